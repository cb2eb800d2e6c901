// Shine dashboard: the page's entry module, which wires the others together and runs
// the polls. Plain JavaScript modules, no libraries, no build step: charts and the live
// match are drawn on <canvas>. Data comes from the manager's API (docs/api.md):
//   GET /api/v1/runs                 every 3 s: the run picker, the runs and settings tables
//   GET {prefix}/stats?since=T       every interval_secs: charts, header figures, workers table
//   GET {prefix}/models              every 5 s: the bots table
//   GET /api/v1/history/{run}?since  every 5 s, with two runs or more: the compare charts
//   GET /api/v1/league               every 5 s: the league table and head-to-head matrix
//   WS  /api/v1/live/{worker}        while a worker is picked: its live match (live.js)
//   WS  {prefix}/play/{version}      while you play a bot: your match (play.js)
// {prefix} is the picked run's (GET /api/v1/runs says where each run's routes are:
// /api/v1 for the run named default, /api/v1/runs/{run} for the others); the page
// remembers the pick as ?run=NAME. With one run the page shows just that run, as it did
// before runs existed. The token (?token=) is handled in api.js.
//
// The modules, each with one job:
//   api.js      the manager's JSON, the token, the URLs
//   formats.js  number, size and time formats
//   charts.js   the progress and compare charts (axis steps, gaps at restarts)
//   runs.js     the run picker; the runs' settings flattened and compared
//   tables.js   the runs, settings, workers and trained bots tables
//   league.js   the league's table and head-to-head matrix
//   live.js     the live match's WebSocket and playback
//   play.js     a match you play against a bot: keys, gamepad, its WebSocket
//   stage.js    the stage, the fighters and their panels
//   state.js    what the page shows, shared; dom.js: DOM helpers
// Their pure functions are unit-tested with node (web/tests/unit/).
import { API, PARAMS, getJSON, relativePrefix } from "./api.js";
import { COMPARE_POINTS, appendSamples, buildCharts, drawCharts, drawCompare, thinHalf } from "./charts.js";
import { $ } from "./dom.js";
import { clock, fmtInt, fmtNum } from "./formats.js";
import { renderLeague } from "./league.js";
import { drawLive, live, tick, watch } from "./live.js";
import { initPlay, play, playTick } from "./play.js";
import { initialRun, renderRunPicker } from "./runs.js";
import { compare, state } from "./state.js";
import { initTables, renderModels, renderRuns, renderSettings, renderWorkers } from "./tables.js";

window.shineLive = live; // for the browser tests: frames drawn, the last frame
window.shinePlay = play; // for the browser tests: the match you play, its messages

// ---------------------------------------------------------------- wiring
const showWorkers = () => renderWorkers(live.worker, (id) => { watchWorker(id); $("live").scrollIntoView(); });
const watchWorker = (id) => watch(id, showWorkers);
const showRuns = () => renderRuns((name) => { selectRun(name, true); $("progress").scrollIntoView(); });

function setConn(ok, text) {
  const c = $("conn");
  c.className = "conn " + (ok ? "ok" : "bad");
  c.querySelector("span").textContent = text;
}

// ---------------------------------------------------------------- polling
// The picked run's polls (stats, models) chain themselves with setTimeout. A run switch
// clears their timers and starts them afresh; a poll that was in flight then finds the
// generation changed, and neither uses its answer nor schedules another.
const timers = {};
function again(name, f, ms, gen) {
  if (gen === state.gen) timers[name] = setTimeout(f, ms);
}

async function pollStats() {
  const gen = state.gen;
  try {
    const since = state.lastT === null ? "" : "?since=" + state.lastT;
    const s = await getJSON(state.prefix + "/stats" + since);
    if (gen !== state.gen) return;
    state.interval = s.interval_secs || 2;
    state.actionSet = s.action_set;
    appendSamples(state.samples, s.series, state.history);
    if (s.series.length) state.lastT = s.series[s.series.length - 1].t;
    const cur = s.current;
    $("kpi-model").textContent = cur.model_version ? "v" + cur.model_version : "–";
    $("kpi-steps").textContent = fmtInt(cur.train_steps);
    $("kpi-exp").textContent = fmtNum(cur.transitions_inserted);
    $("kpi-episodes").textContent = fmtInt(s.episodes_total) + (s.eval_episodes_total ? " (" + fmtInt(s.eval_episodes_total) + " eval)" : "");
    $("kpi-workers").textContent = String(cur.workers);
    $("progress-hint").textContent = "one sample every " + state.interval + " s · replay capacity " + fmtInt(s.replay_capacity) + " · action set " + s.action_set;
    state.workers = s.workers;
    drawCharts();
    showWorkers();
    setConn(true, "live · " + clock(cur.t));
  } catch (e) {
    if (gen === state.gen) setConn(false, "manager unreachable");
  }
  again("stats", pollStats, Math.max(500, Math.min(state.interval, 5) * 1000), gen);
}

async function pollModels() {
  const gen = state.gen;
  try {
    const m = await getJSON(state.prefix + "/models");
    if (gen === state.gen) {
      state.models = m.models;
      renderModels();
    }
  } catch (e) { /* the stats poll reports connection trouble */ }
  again("models", pollModels, 5000, gen);
}

// The league is the manager's, not a run's: one poll whatever run is shown.
async function pollLeague() {
  try {
    renderLeague(await getJSON(API + "/league"));
  } catch (e) { /* the stats poll reports connection trouble */ }
  setTimeout(pollLeague, 5000);
}

// ---------------------------------------------------------------- runs
const currentRun = () => state.runs.find((r) => r.name === state.run);

// Show `name` below: figures, progress, workers, live picker and bots are its. `remember`
// (a pick by the user) writes it into the URL as ?run=, next to ?token= if there is one,
// so that a reload shows the same run.
function selectRun(name, remember) {
  const run = state.runs.find((r) => r.name === name);
  if (!run) return;
  const switched = state.run !== null && state.run !== name;
  state.run = name;
  state.prefix = relativePrefix(run.prefix);
  state.actionSet = run.settings.game.action_set;
  if (remember) {
    PARAMS.set("run", name);
    window.history.replaceState(null, "", location.pathname + "?" + PARAMS + location.hash);
  }
  // Another run's figures must not stay up while the new one's load.
  state.gen++;
  for (const t of Object.values(timers)) clearTimeout(t);
  state.samples = [];
  state.lastT = null;
  state.workers = [];
  state.models = [];
  for (const id of ["kpi-model", "kpi-steps", "kpi-exp", "kpi-episodes", "kpi-workers"]) $(id).textContent = "–";
  // The live match is of a worker of the run shown; picking another run stops it.
  if (switched && live.worker !== null) watchWorker(null);
  drawCharts();
  showWorkers();
  renderModels();
  renderRunPicker();
  showRuns();
  for (const e of document.querySelectorAll(".run-label")) e.textContent = name;
  $("stats-link").href = state.prefix + "/stats";
  pollStats();
  pollModels();
}

async function pollRuns() {
  try {
    const r = await getJSON(API + "/runs");
    state.runs = r.runs;
    // With one run the page is that run's, as before runs existed: the picker, the runs
    // table and the compare charts show from two runs on.
    document.body.classList.toggle("multi-run", state.runs.length > 1);
    if (state.runs.length && !currentRun()) selectRun(initialRun(state.runs, state.run === null ? PARAMS.get("run") : null), false);
    renderRunPicker();
    showRuns();
    renderSettings();
    if (!compare.polling) pollCompare();
    else drawCompare();
  } catch (e) {
    // Until a run is picked no other poll runs to say so.
    if (state.run === null) setConn(false, "manager unreachable");
  }
  setTimeout(pollRuns, 3000);
}

// Each run's series for the compare charts, from the manager's history (which keeps it
// across restarts, so a curve goes back to the run's start). The first request asks for
// at most COMPARE_POINTS samples, thinned evenly by the manager; later ones only those
// since the last (a few every poll). When a run's series grows past twice the budget,
// every other sample is dropped, so drawing stays cheap however long the page is open.
async function pollCompare() {
  compare.polling = true;
  if (state.runs.length > 1) {
    const names = state.runs.map((r) => r.name);
    for (const n of Object.keys(compare.series)) if (!names.includes(n)) delete compare.series[n];
    await Promise.all(names.map(async (name) => {
      const c = compare.series[name] || (compare.series[name] = { samples: [], lastT: null });
      try {
        const since = c.lastT === null ? "" : "&since=" + c.lastT;
        const h = await getJSON(API + "/history/" + encodeURIComponent(name) + "?max_points=" + COMPARE_POINTS + since);
        if (compare.series[name] !== c) return; // the run went away meanwhile
        for (const p of h.series) c.samples.push(p);
        if (h.series.length) c.lastT = h.series[h.series.length - 1].t;
        if (c.samples.length > 2 * COMPARE_POINTS) c.samples = thinHalf(c.samples);
      } catch (e) { /* a run the history does not know yet; the stats poll reports connection trouble */ }
    }));
  }
  drawCompare();
  setTimeout(pollCompare, 5000);
}

// ---------------------------------------------------------------- start
$("run-select").addEventListener("change", (e) => selectRun(e.target.value, true));
$("settings-all").addEventListener("change", renderSettings);
initTables();
$("copy-cmd").addEventListener("click", async () => {
  try { await navigator.clipboard.writeText($("play-cmd").textContent); $("copy-cmd").textContent = "Copied"; }
  catch (e) { $("copy-cmd").textContent = "Select and copy"; }
  setTimeout(() => ($("copy-cmd").textContent = "Copy"), 1500);
});
$("live-worker").addEventListener("change", (e) => watchWorker(e.target.value === "" ? null : Number(e.target.value)));
$("live-stop").addEventListener("click", () => watchWorker(null));

buildCharts();
drawCharts();
drawLive();
// The runs first: they say which run to show and where its routes are (a manager whose
// [[runs]] name no `default` has no /api/v1/stats); picking one starts its polls.
pollRuns();
pollLeague();
requestAnimationFrame(tick);
initPlay();
const playLoop = () => { playTick(); requestAnimationFrame(playLoop); };
requestAnimationFrame(playLoop);
window.addEventListener("resize", () => { drawCharts(); drawCompare(); drawLive(); });
