// The tables: runs, settings (side by side), workers (and the live match's worker
// picker, which offers the same workers) and trained bots. Their cells' contents come
// from pure functions (web/tests/unit/tables.test.mjs); the render functions need a
// browser. initTables() first: it keeps index.html's "nothing yet" rows.
import { $, el } from "./dom.js";
import { TOKEN, withToken } from "./api.js";
import { runColor } from "./charts.js";
import { fmtAgo, fmtBytes, fmtEpsilon, fmtInt, fmtNum, fmtPct, fmtSetting } from "./formats.js";
import { flatSettings, differing, runStatus, settingKey, settingsHint, settingsShown } from "./runs.js";
import { ratingCell } from "./league.js";
import { startPlay } from "./play.js";
import { state } from "./state.js";

// ---------------------------------------------------------------- pure
// A model's file name as the manager gives it (its Content-Disposition): with the run's
// name unless it is the run default.
export function modelFile(run, actionSet, v) {
  return "shine-" + (run === "default" ? "" : run + "-") + actionSet + "-v" + v + ".safetensors";
}

// The lower bound of the Wilson 95 % interval of a model's evaluation survival: the
// registry ranks models by it, so one lucky episode does not beat a hundred good ones.
export function wilson(m) {
  const n = m.eval_episodes, p = m.eval_survival, z = 1.96;
  return (p + (z * z) / (2 * n) - z * Math.sqrt((p * (1 - p)) / n + (z * z) / (4 * n * n))) / (1 + (z * z) / n);
}

// The best of `models` by wilson (the first on a tie) among those evaluated; null: none.
export function bestModel(models) {
  let best = null;
  for (const m of models) if (m.eval_survival !== null && m.eval_episodes > 0 && (!best || wilson(m) > wilson(best))) best = m;
  return best;
}

// A survival share as the tables show it: "93.5 %", or "–".
export const survivalCell = (v) => (v === null ? "–" : fmtPct(v) + " %");

// A model version as the tables show it: "v12", or "–" (none yet: 0 or missing).
export const versionCell = (v) => (v ? "v" + v : "–");

// A worker's row before its state and button: [text, class, title] per cell.
export function workerCells(w) {
  return [
    [String(w.worker_id)], [w.host || "–"], [w.backend || "–"],
    // --envs auto: the count it chose now, and why (the cell's tooltip).
    [fmtInt(w.envs_active || w.envs) + (w.envs_auto ? " auto" : ""), "num", w.envs_reason || ""],
    [fmtEpsilon(w.epsilon), "num"],
    [versionCell(w.model_version), "num"], [fmtNum(w.env_fps), "num"],
    [fmtInt(w.skipped_frames) + (w.episodes_cut ? " · " + fmtInt(w.episodes_cut) + " cut" : ""), "num"],
    [fmtInt(w.transitions), "num"], [fmtAgo(w.last_upload_secs)],
  ];
}

// The live match's worker picker, [value, text]: none, then every worker not gone.
export function liveOptions(workers) {
  return [["", "— pick a worker to watch —"]].concat(workers.filter((w) => w.state !== "gone").map((w) => [String(w.worker_id), "worker " + w.worker_id + " · " + (w.host || "?") + " · ε " + w.epsilon.toFixed(3)]));
}

// ---------------------------------------------------------------- DOM
// The tables' "nothing yet" rows as index.html has them, to put back when the run
// shown changes to one without workers or models yet.
const EMPTY_ROWS = {};
export function initTables() {
  EMPTY_ROWS.workers = $("workers-table").tBodies[0].rows[0];
  EMPTY_ROWS.models = $("models-table").tBodies[0].rows[0];
}

// One row per run: what it is and how far it got. The weight, action set and task cells
// are marked `diff` when the runs differ in them, as in the settings table. `onShow(name)`:
// its Show button was clicked.
export function renderRuns(onShow) {
  const tbody = $("runs-table").tBodies[0];
  const diff = differing(state.runs.map((r) => flatSettings(r.settings)));
  tbody.innerHTML = "";
  for (const r of state.runs) {
    const tr = el("tr", r.name === state.run ? "selected" : "");
    tr.dataset.run = r.name;
    const name = el("td", "run-name");
    const sw = el("i", "swatch");
    sw.style.background = runColor(r.name, state.runs).color;
    name.append(sw, document.createTextNode(r.name));
    if (r.source === "api") name.append(el("span", "badge", "api"));
    const status = el("td");
    status.append(el("span", "state " + runStatus(r), runStatus(r)));
    const game = r.settings.game || {};
    const cells = [
      ["status", status],
      ["weight", el("td", "num", fmtSetting(r.settings.weight)), "weight"],
      ["action_set", el("td", null, fmtSetting(game.action_set)), "game.action_set"],
      ["task", el("td", null, fmtSetting(game.task)), "game.task"],
      ["workers", el("td", "num", fmtInt(r.workers))],
      ["train_steps", el("td", "num", fmtInt(r.train_steps))],
      ["train_steps_per_sec", el("td", "num", fmtNum(r.train_steps_per_sec))],
      ["model_version", el("td", "num", versionCell(r.model_version))],
      ["eval_survival", el("td", "num", survivalCell(r.eval_survival))],
      ["group", el("td", null, trainsWith(r))],
    ];
    tr.append(name);
    for (const [key, td, setting] of cells) {
      td.dataset.key = key;
      if (setting && diff.has(setting)) td.classList.add("diff");
      tr.append(td);
    }
    const act = el("td");
    const b = el("button", "btn" + (r.name === state.run ? " primary" : ""), r.name === state.run ? "Shown" : "Show");
    b.addEventListener("click", () => onShow(r.name));
    act.append(b);
    tr.append(act);
    tbody.append(tr);
  }
}

// The runs a run trains with as one step on the device ([trainer] grouped), or "alone".
export function trainsWith(run) {
  const others = (run.group || []).filter((n) => n !== run.name);
  return others.length ? others.join(", ") : "alone";
}

// The settings side by side, a column per run, grouped by section. By default only the
// keys that differ (marked `diff`); "show all settings" lists every key.
export function renderSettings() {
  const all = $("settings-all").checked;
  const flats = state.runs.map((r) => flatSettings(r.settings));
  const { diff, keys } = settingsShown(flats, all);
  // Rebuilt only when something shown changes (the settings change rarely).
  const sig = JSON.stringify([state.runs.map((r) => r.name), flats, all]);
  const table = $("settings-table");
  if (table.dataset.sig === sig) return;
  table.dataset.sig = sig;
  $("settings-hint").textContent = settingsHint(flats, diff);
  const head = el("tr");
  head.append(el("th", null, "Setting"));
  for (const r of state.runs) {
    const th = el("th", null, r.name);
    th.dataset.run = r.name;
    head.append(th);
  }
  table.tHead.replaceChildren(head);
  const tbody = table.tBodies[0];
  tbody.innerHTML = "";
  if (!keys.length) {
    const tr = el("tr", "empty");
    const td = el("td", null, "The runs' settings are the same; tick “show all settings” to list them.");
    td.colSpan = state.runs.length + 1;
    tr.append(td);
    tbody.append(tr);
    return;
  }
  let section = null;
  for (const k of keys) {
    const { section: sec, name } = settingKey(k);
    if (sec !== section) {
      section = sec;
      const tr = el("tr", "group");
      const th = el("th", null, sec);
      th.colSpan = state.runs.length + 1;
      tr.append(th);
      tbody.append(tr);
    }
    const tr = el("tr", diff.has(k) ? "diff" : "");
    tr.dataset.key = k;
    tr.append(el("td", "key", name));
    state.runs.forEach((r, i) => {
      const td = el("td", "val" + (diff.has(k) ? " diff" : ""), fmtSetting(flats[i][k]));
      td.dataset.run = r.name;
      tr.append(td);
    });
    tbody.append(tr);
  }
}

// The picked run's workers, and the live match's picker. `watching`: the worker watched
// (null: none); `onWatch(id)`: a row's Watch button was clicked.
export function renderWorkers(watching, onWatch) {
  const tbody = $("workers-table").tBodies[0];
  const ws = state.workers;
  tbody.innerHTML = "";
  if (!ws.length) {
    const hint = EMPTY_ROWS.workers.cloneNode(true);
    // With several runs, the command names the run shown.
    if (state.runs.length > 1) hint.querySelector(".worker-cmd").textContent = "shine-worker run --manager URL --token TOKEN --run " + state.run;
    tbody.append(hint);
  }
  for (const w of ws) {
    const tr = el("tr", w.state === "gone" ? "gone" : "");
    tr.dataset.workerId = w.worker_id;
    for (const [text, cls, title] of workerCells(w)) {
      const td = el("td", cls, text);
      if (title) td.title = title;
      tr.append(td);
    }
    const st = el("td");
    st.append(el("span", "state " + w.state, w.state));
    tr.append(st);
    const act = el("td");
    if (w.state !== "gone") {
      const b = el("button", "btn" + (watching === w.worker_id ? " primary" : ""), watching === w.worker_id ? "Watching" : "Watch");
      b.addEventListener("click", () => onWatch(w.worker_id));
      act.append(b);
    }
    tr.append(act);
    tbody.append(tr);
  }
  // The live picker offers the workers that can stream.
  const sel = $("live-worker");
  const want = watching === null ? "" : String(watching);
  const opts = liveOptions(ws);
  const sig = JSON.stringify(opts);
  if (sel.dataset.sig !== sig) {
    sel.innerHTML = "";
    for (const [v, t] of opts) { const o = el("option", null, t); o.value = v; sel.append(o); }
    sel.dataset.sig = sig;
  }
  sel.value = want;
}

// The picked run's published models, newest first, and the commands that play and
// evaluate the best (else the newest).
export function renderModels() {
  const tbody = $("models-table").tBodies[0];
  tbody.innerHTML = "";
  if (!state.models.length) {
    tbody.append(EMPTY_ROWS.models.cloneNode(true));
    $("play-cmd").textContent = "shine-worker play --model FILE";
    $("eval-cmd").textContent = "shine-worker eval --model FILE --episodes 200 --cpu-level 9";
    return;
  }
  const file = (v) => modelFile(state.run, state.actionSet, v);
  const best = bestModel(state.models);
  for (const m of state.models) {
    const tr = el("tr");
    tr.dataset.version = m.version;
    const v = el("td", "num", "v" + m.version);
    if (m === state.models[0]) v.append(el("span", "badge", "latest"));
    if (best && m === best) v.append(el("span", "badge", "★ best"));
    tr.append(v, el("td", "num", fmtInt(m.train_step)),
      el("td", "num", survivalCell(m.eval_survival)),
      el("td", "num", fmtInt(m.eval_episodes)),
      el("td", "num", ratingCell(m.league_rating, m.league_deviation, m.league_matches)),
      el("td", null, new Date(m.created_unix * 1000).toLocaleString() + " (" + fmtAgo(Date.now() / 1000 - m.created_unix) + ")"),
      el("td", "num", fmtBytes(m.bytes)));
    const dl = el("td");
    const a = el("a", "download", file(m.version));
    a.href = withToken(m.url.replace(/^\//, ""));
    a.setAttribute("download", file(m.version));
    dl.append(a);
    // Play it here, in the browser, against the simulator (play.js).
    const playBtn = el("button", "btn play-btn", "Play");
    playBtn.addEventListener("click", () => startPlay(state.prefix, m.version, state.run + " v" + m.version, TOKEN));
    const pl = el("td");
    pl.append(playBtn);
    tr.append(dl, pl);
    tbody.append(tr);
  }
  const pick = best || state.models[0];
  $("play-cmd").textContent = "shine-worker play --model " + file(pick.version);
  $("eval-cmd").textContent = "shine-worker eval --model " + file(pick.version) + " --episodes 200 --cpu-level 9";
}
