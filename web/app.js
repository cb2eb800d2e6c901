// Shine dashboard. Plain JavaScript, no libraries: charts and the live match are drawn
// on <canvas> here. Data comes from the manager's API (docs/api.md):
//   GET /api/v1/runs                 every 3 s: the run picker, the runs and settings tables
//   GET {prefix}/stats?since=T       every interval_secs: charts, header figures, workers table
//   GET {prefix}/models              every 5 s: the bots table
//   GET /api/v1/history/{run}?since  every 5 s, with two runs or more: the compare charts
//   WS  /api/v1/live/{worker}        while a worker is picked: its live match
// {prefix} is the picked run's (GET /api/v1/runs says where each run's routes are:
// /api/v1 for the run named default, /api/v1/runs/{run} for the others); the page
// remembers the pick as ?run=NAME. With one run the page shows just that run, as it did
// before runs existed. With `public_reads = false` the page is opened as /?token=T:
// fetches send it as a bearer header; the WebSocket and download links (which cannot
// carry headers) as ?token=.
"use strict";

const PARAMS = new URLSearchParams(location.search);
const TOKEN = PARAMS.get("token");
const API = "api/v1";

function withToken(url) {
  return TOKEN ? url + (url.includes("?") ? "&" : "?") + "token=" + encodeURIComponent(TOKEN) : url;
}

async function getJSON(path) {
  const r = await fetch(path, { headers: TOKEN ? { Authorization: "Bearer " + TOKEN } : {}, cache: "no-store" });
  if (!r.ok) throw new Error(path + ": HTTP " + r.status);
  return r.json();
}

const $ = (id) => document.getElementById(id);
const el = (tag, cls, text) => {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
};

// ---------------------------------------------------------------- number formatting
function fmtNum(v, digits = 3) {
  if (v === null || v === undefined || !isFinite(v)) return "–";
  const a = Math.abs(v);
  if (a >= 1e9) return (v / 1e9).toFixed(2) + "G";
  if (a >= 1e6) return (v / 1e6).toFixed(2) + "M";
  if (a >= 1e4) return (v / 1e3).toFixed(1) + "k";
  if (a >= 100) return v.toFixed(0);
  if (a >= 10) return v.toFixed(1);
  if (a === 0) return "0";
  return v.toPrecision(digits);
}
const fmtInt = (v) => (v === null || v === undefined ? "–" : Math.round(v).toLocaleString("en-US"));
const fmtPct = (v) => (v === null || v === undefined ? "–" : (v * 100).toFixed(1));
function fmtAgo(secs) {
  if (secs === null || secs === undefined) return "never";
  if (secs < 1) return "just now";
  if (secs < 60) return Math.round(secs) + " s ago";
  if (secs < 3600) return Math.round(secs / 60) + " min ago";
  return (secs / 3600).toFixed(1) + " h ago";
}
function fmtBytes(b) {
  if (b >= 1 << 20) return (b / (1 << 20)).toFixed(1) + " MiB";
  if (b >= 1 << 10) return (b / (1 << 10)).toFixed(0) + " KiB";
  return b + " B";
}
const pad2 = (n) => String(n).padStart(2, "0");
const clock = (t) => {
  const d = new Date(t * 1000);
  return pad2(d.getHours()) + ":" + pad2(d.getMinutes()) + ":" + pad2(d.getSeconds());
};

// ---------------------------------------------------------------- charts
// Each chart: one or more series of one Sample field each, a unit, and how to scale.
const CHARTS = [
  { id: "survival", title: "Full-minute survival", sub: "share of episodes survived, %", unit: "%", pct: true, min: 0, max: 100,
    series: [{ key: "eval_survival", label: "evaluation (greedy, top CPU)", color: "#3ecf8e" }, { key: "train_survival", label: "training", color: "#4fb3ff", dashed: true }] },
  { id: "reward", title: "Episode reward", sub: "mean of recent training episodes", unit: "",
    series: [{ key: "episode_reward", label: "reward", color: "#a78bfa" }] },
  { id: "loss", title: "TD loss", sub: "Huber loss of the latest train steps", unit: "", min: 0,
    series: [{ key: "loss", label: "loss", color: "#ef5b5b" }] },
  { id: "mean_q", title: "Mean Q", sub: "mean Q of the sampled actions", unit: "",
    series: [{ key: "mean_q", label: "mean Q", color: "#f472b6" }] },
  { id: "train_sps", title: "Train steps per second", sub: "gradient steps", unit: "steps/s", min: 0,
    series: [{ key: "train_steps_per_sec", label: "steps/s", color: "#4fb3ff" }] },
  { id: "ingest", title: "Transitions accepted per second", sub: "uploaded by workers, answered 2xx", unit: "/s", min: 0,
    series: [{ key: "accepted_per_sec", label: "accepted/s", color: "#3ecf8e" }] },
  { id: "fill", title: "Replay fill", sub: "replay size / capacity, %", unit: "%", pct: true, min: 0, max: 100,
    series: [{ key: "replay_fill", label: "fill", color: "#f5a524" }] },
  { id: "spi", title: "Transitions sampled per transition inserted", sub: "rate limiter's ratio", unit: "×", min: 0,
    series: [{ key: "samples_per_insert", label: "samples/insert", color: "#a78bfa" }] },
  { id: "age", title: "Age of incoming data", sub: "model versions behind the latest", unit: "versions", min: 0,
    series: [{ key: "data_age", label: "versions behind", color: "#f472b6" }] },
];

// The compare charts: one Sample field each, one line per run (its color: runColor).
const COMPARE = [
  { id: "survival", title: "Evaluation survival", sub: "greedy, top CPU; share of episodes survived, %", key: "eval_survival", unit: "%", pct: true, min: 0, max: 100 },
  { id: "train_sps", title: "Train steps per second", sub: "each run's share of the device", key: "train_steps_per_sec", unit: "steps/s", min: 0 },
  { id: "loss", title: "TD loss", sub: "Huber loss of the latest train steps", key: "loss", unit: "", min: 0 },
  { id: "spi", title: "Samples per insert", sub: "rate limiter's ratio", key: "samples_per_insert", unit: "×", min: 0 },
];

const state = {
  samples: [], lastT: null, interval: 2, history: 3600, actionSet: "untouchable", workers: [], models: [], best: null,
  // The runs (GET /api/v1/runs, by name), the one picked, where its routes are (relative,
  // like API, so the page also works under a path prefix), and a generation that a run
  // switch bumps so that answers for the previous run still in flight are dropped.
  runs: [], run: null, prefix: null, gen: 0,
};

// Distinct colors for runs, by their place in the list (sorted by name, so a run keeps
// its color while the runs stay the same); past eight they repeat, dashed.
const RUN_COLORS = ["#4fb3ff", "#f5a524", "#3ecf8e", "#ef5b5b", "#a78bfa", "#f472b6", "#2dd4bf", "#e2e8f0"];
function runColor(name) {
  const i = Math.max(0, state.runs.findIndex((r) => r.name === name));
  return { color: RUN_COLORS[i % RUN_COLORS.length], dashed: i >= RUN_COLORS.length };
}

function niceStep(range, ticks) {
  const raw = range / Math.max(1, ticks);
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const n = raw / mag;
  return (n < 1.5 ? 1 : n < 3 ? 2 : n < 7 ? 5 : 10) * mag;
}

function setupCanvas(canvas) {
  const dpr = window.devicePixelRatio || 1;
  const w = canvas.clientWidth, h = canvas.clientHeight;
  if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(h * dpr);
  }
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  return { ctx, w, h };
}

function legendItem(color, label) {
  const item = el("span");
  const sw = el("i");
  sw.style.background = color;
  item.append(sw, document.createTextNode(label));
  return item;
}

// One chart's card: title, current value (the progress charts), legend, canvas.
function buildChart(c, root) {
  const card = el("div", "card");
  const head = el("div", "chart-head");
  const titles = el("div");
  titles.append(el("div", "chart-title", c.title), el("div", "chart-sub", c.sub));
  head.append(titles);
  if (c.series) {
    c.valueEl = el("div", "chart-value", "–");
    head.append(c.valueEl);
  }
  c.legendEl = el("div", "legend");
  c.canvas = el("canvas", "chart");
  c.canvas.addEventListener("mousemove", (e) => { c.hoverX = e.offsetX; drawChart(c); });
  c.canvas.addEventListener("mouseleave", () => { c.hoverX = null; drawChart(c); });
  card.append(head, c.legendEl, c.canvas);
  root.append(card);
  return card;
}

function buildCharts() {
  for (const c of CHARTS) {
    buildChart(c, $("charts")).dataset.chart = c.id;
    if (c.series.length > 1) for (const s of c.series) c.legendEl.append(legendItem(s.color, s.label));
    // The picked run's samples, every series on one time base.
    c.lines = () => c.series.map((s) => ({ ...s, pts: state.samples }));
  }
  for (const c of COMPARE) {
    c.compare = true;
    buildChart(c, $("compare-charts")).dataset.compare = c.id;
    // Each run's samples from its history, each on its own time base.
    c.lines = () => state.runs.map((r) => ({ key: c.key, label: r.name, ...runColor(r.name), pts: (compare.series[r.name] || {}).samples || [] }));
  }
}

function chartValue(c, sample, key) {
  const v = sample[key];
  if (v === null || v === undefined) return null;
  return c.pct ? v * 100 : v;
}

// Whether the samples pause before pts[i] (the manager was down): the step to it is
// over five times the spacing of the samples around it. Lines break there rather than
// bridge the pause with a straight line. The spacing is measured locally because it
// varies within a series: the history comes thinned evenly (every k-th sample), the
// samples polled since then unthinned.
function gapBefore(pts, i) {
  if (i < 1) return false;
  const d = pts[i].t - pts[i - 1].t;
  const near = Math.max(i >= 2 ? pts[i - 1].t - pts[i - 2].t : 0, i + 1 < pts.length ? pts[i + 1].t - pts[i].t : 0);
  return near > 0 && d > 5 * near;
}

// Draws c.lines(): each { pts (samples, oldest first), key, label, color, dashed }.
// Returns them with `points`, how many values each drew, and `t0`, `t1`, the times of
// its first and last (null: none).
function drawChart(c) {
  const { ctx, w, h } = setupCanvas(c.canvas);
  ctx.clearRect(0, 0, w, h);
  const lines = c.lines();
  const L = 52, R = 10, T = 8, B = 22;
  const pw = w - L - R, ph = h - T - B;
  // Data range, the time span, and the first and last time a value is drawn at.
  let lo = Infinity, hi = -Infinity, points = 0, t0 = Infinity, t1 = -Infinity, drawnT0 = Infinity, drawnT1 = -Infinity;
  for (const s of lines) {
    s.points = 0;
    s.t0 = null;
    s.t1 = null;
    if (!s.pts.length) continue;
    t0 = Math.min(t0, s.pts[0].t);
    t1 = Math.max(t1, s.pts[s.pts.length - 1].t);
    for (const p of s.pts) {
      const v = chartValue(c, p, s.key);
      if (v === null) continue;
      lo = Math.min(lo, v); hi = Math.max(hi, v); points++; s.points++;
      drawnT0 = Math.min(drawnT0, p.t); drawnT1 = Math.max(drawnT1, p.t);
      if (s.t0 === null) s.t0 = p.t;
      s.t1 = p.t;
    }
  }
  // Read by the browser tests: how many values this chart drew, and from when to when
  // (unix seconds; the compare charts' first one shows the history from before a
  // manager restart is still drawn).
  c.canvas.dataset.points = String(points);
  c.canvas.dataset.t0 = points ? String(drawnT0) : "";
  c.canvas.dataset.t1 = points ? String(drawnT1) : "";
  ctx.font = "11px system-ui, sans-serif";
  if (points === 0) {
    ctx.fillStyle = "#5b6676";
    ctx.textAlign = "center";
    ctx.fillText("no data yet", L + pw / 2, T + ph / 2);
    return lines;
  }
  if (c.min !== undefined) lo = Math.min(lo, c.min);
  if (c.max !== undefined && hi <= c.max) hi = Math.max(hi, c.pct ? Math.min(c.max, Math.max(hi * 1.1, 10)) : c.max);
  if (hi - lo < 1e-9) { const d = Math.abs(hi) * 0.1 || 1; lo -= c.min === undefined ? d : 0; hi += d; }
  const step = niceStep(hi - lo, 4);
  lo = Math.floor(lo / step) * step;
  hi = Math.ceil(hi / step) * step;
  t1 = Math.max(t1, t0 + 1);
  const X = (t) => L + ((t - t0) / (t1 - t0)) * pw;
  const Y = (v) => T + ph - ((v - lo) / (hi - lo)) * ph;

  // Grid and y labels (with the unit).
  ctx.strokeStyle = "#222c38";
  ctx.lineWidth = 1;
  ctx.fillStyle = "#8b98a9";
  ctx.textAlign = "right";
  ctx.textBaseline = "middle";
  // As many decimals as the tick step needs: 0.02, 0.04 ... not 0.0200, 0.0400.
  const decimals = Math.max(0, Math.min(6, -Math.floor(Math.log10(step) + 1e-9)));
  for (let v = lo; v <= hi + step / 2; v += step) {
    const y = Math.round(Y(v)) + 0.5;
    ctx.beginPath(); ctx.moveTo(L, y); ctx.lineTo(L + pw, y); ctx.stroke();
    const text = Math.abs(v) >= 1e4 ? fmtNum(v) : v.toFixed(decimals);
    ctx.fillText(text + (c.unit === "%" ? "%" : ""), L - 6, y);
  }
  // x labels: wall-clock time.
  ctx.textAlign = "center";
  ctx.textBaseline = "top";
  const span = t1 - t0;
  // At most one label per ~70 px, none cut off at the edges.
  const maxLabels = Math.max(2, Math.floor(pw / 70));
  const xstep = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 43200, 86400].find((s) => span / s <= maxLabels) || 172800;
  for (let t = Math.ceil(t0 / xstep) * xstep; t <= t1; t += xstep) {
    const x = X(t);
    ctx.strokeStyle = "#1c252f";
    ctx.beginPath(); ctx.moveTo(Math.round(x) + 0.5, T); ctx.lineTo(Math.round(x) + 0.5, T + ph); ctx.stroke();
    if (x < L + 24 || x > L + pw - 24) continue;
    ctx.fillText(xstep >= 60 ? clock(t).slice(0, 5) : clock(t), x, T + ph + 6);
  }
  ctx.strokeStyle = "#34414f";
  ctx.beginPath(); ctx.moveTo(L + 0.5, T); ctx.lineTo(L + 0.5, T + ph + 0.5); ctx.lineTo(L + pw, T + ph + 0.5); ctx.stroke();

  // Series: lines with gaps where the value is null, a soft fill under the first (not
  // when comparing runs: no run's line should stand out).
  lines.forEach((s, i) => {
    ctx.strokeStyle = s.color;
    ctx.lineWidth = 1.8;
    ctx.setLineDash(s.dashed ? [5, 4] : []);
    let started = false, first = null, last = null;
    ctx.beginPath();
    for (let k = 0; k < s.pts.length; k++) {
      const p = s.pts[k];
      const v = chartValue(c, p, s.key);
      if (v === null || gapBefore(s.pts, k)) started = false;
      if (v === null) continue;
      const x = X(p.t), y = Y(v);
      if (!started) { ctx.moveTo(x, y); started = true; } else ctx.lineTo(x, y);
      if (first === null) first = x;
      last = [x, y];
    }
    ctx.stroke();
    ctx.setLineDash([]);
    if (last) {
      ctx.fillStyle = s.color;
      ctx.beginPath(); ctx.arc(last[0], last[1], 2.8, 0, Math.PI * 2); ctx.fill();
    }
    if (i === 0 && first !== null && !s.dashed && !c.compare) {
      const g = ctx.createLinearGradient(0, T, 0, T + ph);
      g.addColorStop(0, s.color + "33"); g.addColorStop(1, s.color + "00");
      ctx.fillStyle = g;
      // One area per stretch without a gap (missing values are bridged, as before).
      ctx.beginPath();
      let open = null;
      for (let k = 0; k < s.pts.length; k++) {
        const p = s.pts[k];
        const v = chartValue(c, p, s.key);
        if (open !== null && gapBefore(s.pts, k)) { ctx.lineTo(open, T + ph); ctx.closePath(); open = null; }
        if (v === null) continue;
        if (open === null) ctx.moveTo(X(p.t), T + ph);
        ctx.lineTo(X(p.t), Y(v));
        open = X(p.t);
      }
      if (open !== null) { ctx.lineTo(open, T + ph); ctx.closePath(); }
      ctx.fill();
    }
  });

  // Hover: each line's sample nearest the pointer (the lines of a progress chart share
  // their samples; compared runs each have their own).
  if (c.hoverX != null && c.hoverX >= L) {
    const t = t0 + ((c.hoverX - L) / pw) * (t1 - t0);
    const shown = lines.filter((s) => s.pts.length);
    const near = shown.map((s) => s.pts.reduce((a, p) => (Math.abs(p.t - t) < Math.abs(a.t - t) ? p : a)));
    const ref = near.reduce((a, p) => (Math.abs(p.t - t) < Math.abs(a.t - t) ? p : a));
    const x = X(ref.t);
    ctx.strokeStyle = "#8b98a9";
    ctx.setLineDash([3, 3]);
    ctx.beginPath(); ctx.moveTo(x, T); ctx.lineTo(x, T + ph); ctx.stroke();
    ctx.setLineDash([]);
    const text = [clock(ref.t)].concat(shown.map((s, i) => s.label + ": " + fmtNum(chartValue(c, near[i], s.key)) + (c.unit ? " " + c.unit : "")));
    ctx.font = "11px system-ui, sans-serif";
    const bw = Math.max(...text.map((l) => ctx.measureText(l).width)) + 14, bh = text.length * 15 + 8;
    const bx = x + bw + 10 > L + pw ? x - bw - 8 : x + 8;
    ctx.fillStyle = "rgba(13,17,23,.92)";
    ctx.strokeStyle = "#34414f";
    ctx.fillRect(bx, T + 4, bw, bh); ctx.strokeRect(bx + 0.5, T + 4.5, bw, bh);
    ctx.fillStyle = "#d8dee6";
    ctx.textAlign = "left";
    ctx.textBaseline = "top";
    text.forEach((l, i) => ctx.fillText(l, bx + 7, T + 9 + i * 15));
  }
  return lines;
}

function drawCharts() {
  const cur = state.samples[state.samples.length - 1];
  for (const c of CHARTS) {
    c.valueEl.innerHTML = "";
    const v = cur ? chartValue(c, cur, c.series[0].key) : null;
    c.valueEl.append(document.createTextNode(fmtNum(v)));
    if (v !== null && c.unit) c.valueEl.append(el("small", null, c.unit));
    drawChart(c);
  }
}

function drawCompare() {
  if (state.runs.length < 2) return; // hidden
  for (const c of COMPARE) {
    const lines = drawChart(c);
    // Read by the browser tests: how many runs have a line here.
    c.canvas.dataset.runs = String(lines.filter((s) => s.points > 0).length);
    // The legend names the runs, each with its color and (for the tests) how many
    // values its line has and the times of its first and last.
    const sig = JSON.stringify(lines.map((s) => [s.label, s.color, s.dashed]));
    if (c.legendEl.dataset.sig !== sig) {
      c.legendEl.innerHTML = "";
      for (const s of lines) {
        const item = legendItem(s.color, s.label);
        item.dataset.run = s.label;
        c.legendEl.append(item);
      }
      c.legendEl.dataset.sig = sig;
    }
    lines.forEach((s, i) => {
      const d = c.legendEl.children[i].dataset;
      d.points = String(s.points);
      d.t0 = s.t0 === null ? "" : String(s.t0);
      d.t1 = s.t1 === null ? "" : String(s.t1);
    });
  }
}

// ---------------------------------------------------------------- polling
function setConn(ok, text) {
  const c = $("conn");
  c.className = "conn " + (ok ? "ok" : "bad");
  c.querySelector("span").textContent = text;
}

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
    for (const p of s.series) state.samples.push(p);
    if (s.series.length) state.lastT = s.series[s.series.length - 1].t;
    if (state.samples.length > state.history) state.samples.splice(0, state.samples.length - state.history);
    const cur = s.current;
    $("kpi-model").textContent = cur.model_version ? "v" + cur.model_version : "–";
    $("kpi-steps").textContent = fmtInt(cur.train_steps);
    $("kpi-exp").textContent = fmtNum(cur.transitions_inserted);
    $("kpi-episodes").textContent = fmtInt(s.episodes_total) + (s.eval_episodes_total ? " (" + fmtInt(s.eval_episodes_total) + " eval)" : "");
    $("kpi-workers").textContent = String(cur.workers);
    $("progress-hint").textContent = "one sample every " + state.interval + " s · replay capacity " + fmtInt(s.replay_capacity) + " · action set " + s.action_set;
    state.workers = s.workers;
    drawCharts();
    renderWorkers();
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

// ---------------------------------------------------------------- runs
// The run the page opens with: the one ?run= names, else `default` (the one run of a
// manager without [[runs]]), else the first; and the one it falls back to when the
// picked run is deleted.
function initialRun(wanted) {
  const names = state.runs.map((r) => r.name);
  if (wanted !== null && names.includes(wanted)) return wanted;
  return names.includes("default") ? "default" : names[0];
}

const currentRun = () => state.runs.find((r) => r.name === state.run);

// Show `name` below: figures, progress, workers, live picker and bots are its. `remember`
// (a pick by the user) writes it into the URL as ?run=, next to ?token= if there is one,
// so that a reload shows the same run.
function selectRun(name, remember) {
  const run = state.runs.find((r) => r.name === name);
  if (!run) return;
  const switched = state.run !== null && state.run !== name;
  state.run = name;
  state.prefix = run.prefix.replace(/^\//, "");
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
  if (switched && live.worker !== null) watch(null);
  drawCharts();
  renderWorkers();
  renderModels();
  renderRunPicker();
  renderRuns();
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
    if (state.runs.length && !currentRun()) selectRun(initialRun(state.run === null ? PARAMS.get("run") : null), false);
    renderRunPicker();
    renderRuns();
    renderSettings();
    if (!compare.polling) pollCompare();
    else drawCompare();
  } catch (e) {
    // Until a run is picked no other poll runs to say so.
    if (state.run === null) setConn(false, "manager unreachable");
  }
  setTimeout(pollRuns, 3000);
}

function runStatus(r) {
  return !r.running ? "stopped" : r.paused ? "paused" : "training";
}

function renderRunPicker() {
  const sel = $("run-select");
  const opts = state.runs.map((r) => [r.name, r.name + (runStatus(r) === "training" ? "" : " (" + runStatus(r) + ")")]);
  const sig = JSON.stringify(opts);
  if (sel.dataset.sig !== sig) {
    sel.innerHTML = "";
    for (const [v, t] of opts) { const o = el("option", null, t); o.value = v; sel.append(o); }
    sel.dataset.sig = sig;
  }
  if (state.run !== null) sel.value = state.run;
}

$("run-select").addEventListener("change", (e) => selectRun(e.target.value, true));

// A run's settings as flat keys: `weight`, then each section's (game.task, dqn.lr, ...).
// `name` is the run's own and `paused` only how it was asked to start: the status
// column says what it does now.
function flatSettings(settings) {
  const out = {};
  for (const [k, v] of Object.entries(settings || {})) {
    if (k === "name" || k === "paused") continue;
    if (v !== null && typeof v === "object" && !Array.isArray(v)) {
      for (const [k2, v2] of Object.entries(v)) out[k + "." + k2] = v2;
    } else out[k] = v;
  }
  return out;
}

// Keys whose values are not the same in every run.
function differing(flats) {
  const keys = [...new Set(flats.flatMap((f) => Object.keys(f)))];
  return new Set(keys.filter((k) => new Set(flats.map((f) => JSON.stringify(f[k]))).size > 1));
}

function fmtSetting(v) {
  if (v === undefined || v === null) return "–";
  if (Array.isArray(v)) return v.join(", ");
  return String(v);
}

// One row per run: what it is and how far it got. The weight, action set and task cells
// are marked `diff` when the runs differ in them, as in the settings table.
function renderRuns() {
  const tbody = $("runs-table").tBodies[0];
  const diff = differing(state.runs.map((r) => flatSettings(r.settings)));
  tbody.innerHTML = "";
  for (const r of state.runs) {
    const tr = el("tr", r.name === state.run ? "selected" : "");
    tr.dataset.run = r.name;
    const name = el("td", "run-name");
    const sw = el("i", "swatch");
    sw.style.background = runColor(r.name).color;
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
      ["model_version", el("td", "num", r.model_version ? "v" + r.model_version : "–")],
      ["eval_survival", el("td", "num", r.eval_survival === null ? "–" : fmtPct(r.eval_survival) + " %")],
    ];
    tr.append(name);
    for (const [key, td, setting] of cells) {
      td.dataset.key = key;
      if (setting && diff.has(setting)) td.classList.add("diff");
      tr.append(td);
    }
    const act = el("td");
    const b = el("button", "btn" + (r.name === state.run ? " primary" : ""), r.name === state.run ? "Shown" : "Show");
    b.addEventListener("click", () => { selectRun(r.name, true); $("progress").scrollIntoView(); });
    act.append(b);
    tr.append(act);
    tbody.append(tr);
  }
}

// The settings side by side, a column per run, grouped by section. By default only the
// keys that differ (marked `diff`); "show all settings" lists every key.
function renderSettings() {
  const all = $("settings-all").checked;
  const flats = state.runs.map((r) => flatSettings(r.settings));
  const diff = differing(flats);
  const keys = [...new Set(flats.flatMap((f) => Object.keys(f)))].filter((k) => all || diff.has(k));
  // Rebuilt only when something shown changes (the settings change rarely).
  const sig = JSON.stringify([state.runs.map((r) => r.name), flats, all]);
  const table = $("settings-table");
  if (table.dataset.sig === sig) return;
  table.dataset.sig = sig;
  $("settings-hint").textContent = diff.size ? diff.size + " of " + Object.keys(flats[0] || {}).length + " settings differ" : "every setting is the same in all runs";
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
    const dot = k.indexOf(".");
    const sec = dot < 0 ? "run" : k.slice(0, dot);
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
    tr.append(el("td", "key", dot < 0 ? k : k.slice(dot + 1)));
    state.runs.forEach((r, i) => {
      const td = el("td", "val" + (diff.has(k) ? " diff" : ""), fmtSetting(flats[i][k]));
      td.dataset.run = r.name;
      tr.append(td);
    });
    tbody.append(tr);
  }
}

$("settings-all").addEventListener("change", renderSettings);

// Each run's series for the compare charts, from the manager's history (which keeps it
// across restarts, so a curve goes back to the run's start). The first request asks for
// at most COMPARE_POINTS samples, thinned evenly by the manager; later ones only those
// since the last (a few every poll). When a run's series grows past twice the budget,
// every other sample is dropped, so drawing stays cheap however long the page is open.
const COMPARE_POINTS = 600;
const compare = { series: {}, polling: false }; // series: run name -> { samples, lastT }

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
        if (c.samples.length > 2 * COMPARE_POINTS) c.samples = c.samples.filter((_, i) => i % 2 === 0 || i === c.samples.length - 1);
      } catch (e) { /* a run the history does not know yet; the stats poll reports connection trouble */ }
    }));
  }
  drawCompare();
  setTimeout(pollCompare, 5000);
}

// The tables' "nothing yet" rows as index.html has them, to put back when the run
// shown changes to one without workers or models yet.
const EMPTY_ROWS = { workers: $("workers-table").tBodies[0].rows[0], models: $("models-table").tBodies[0].rows[0] };

// ---------------------------------------------------------------- workers table
function renderWorkers() {
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
    const cells = [
      [String(w.worker_id)], [w.host || "–"], [w.backend || "–"],
      // --envs auto: the count it chose now, and why (the cell's tooltip).
      [fmtInt(w.envs_active || w.envs) + (w.envs_auto ? " auto" : ""), "num", w.envs_reason || ""],
      [w.epsilon < 0.01 ? w.epsilon.toExponential(1) : w.epsilon.toFixed(3), "num"],
      [w.model_version ? "v" + w.model_version : "–", "num"], [fmtNum(w.env_fps), "num"],
      [fmtInt(w.skipped_frames) + (w.episodes_cut ? " · " + fmtInt(w.episodes_cut) + " cut" : ""), "num"],
      [fmtInt(w.transitions), "num"], [fmtAgo(w.last_upload_secs)],
    ];
    for (const [text, cls, title] of cells) {
      const td = el("td", cls, text);
      if (title) td.title = title;
      tr.append(td);
    }
    const st = el("td");
    st.append(el("span", "state " + w.state, w.state));
    tr.append(st);
    const act = el("td");
    if (w.state !== "gone") {
      const b = el("button", "btn" + (live.worker === w.worker_id ? " primary" : ""), live.worker === w.worker_id ? "Watching" : "Watch");
      b.addEventListener("click", () => { watch(w.worker_id); document.getElementById("live").scrollIntoView(); });
      act.append(b);
    }
    tr.append(act);
    tbody.append(tr);
  }
  // The live picker offers the workers that can stream.
  const sel = $("live-worker");
  const want = live.worker === null ? "" : String(live.worker);
  const opts = [["", "— pick a worker to watch —"]].concat(ws.filter((w) => w.state !== "gone").map((w) => [String(w.worker_id), "worker " + w.worker_id + " · " + (w.host || "?") + " · ε " + w.epsilon.toFixed(3)]));
  const sig = JSON.stringify(opts);
  if (sel.dataset.sig !== sig) {
    sel.innerHTML = "";
    for (const [v, t] of opts) { const o = el("option", null, t); o.value = v; sel.append(o); }
    sel.dataset.sig = sig;
  }
  sel.value = want;
}

// ---------------------------------------------------------------- bots table
// As the manager names the file (its Content-Disposition): with the run's name unless
// it is the run default.
function modelFile(v) {
  return "shine-" + (state.run === "default" ? "" : state.run + "-") + state.actionSet + "-v" + v + ".safetensors";
}

function renderModels() {
  const tbody = $("models-table").tBodies[0];
  tbody.innerHTML = "";
  if (!state.models.length) {
    tbody.append(EMPTY_ROWS.models.cloneNode(true));
    $("play-cmd").textContent = "shine-worker play --model FILE";
    $("eval-cmd").textContent = "shine-worker eval --model FILE --episodes 200 --cpu-level 9";
    return;
  }
  // The best by evaluation survival, ranked as the registry ranks it (the Wilson 95 %
  // lower bound, so one lucky episode does not beat a hundred good ones).
  const wilson = (m) => {
    const n = m.eval_episodes, p = m.eval_survival, z = 1.96;
    return (p + (z * z) / (2 * n) - z * Math.sqrt((p * (1 - p)) / n + (z * z) / (4 * n * n))) / (1 + (z * z) / n);
  };
  let best = null;
  for (const m of state.models) if (m.eval_survival !== null && m.eval_episodes > 0 && (!best || wilson(m) > wilson(best))) best = m;
  for (const m of state.models) {
    const tr = el("tr");
    tr.dataset.version = m.version;
    const v = el("td", "num", "v" + m.version);
    if (m === state.models[0]) v.append(el("span", "badge", "latest"));
    if (best && m === best) v.append(el("span", "badge", "★ best"));
    tr.append(v, el("td", "num", fmtInt(m.train_step)),
      el("td", "num", m.eval_survival === null ? "–" : fmtPct(m.eval_survival) + " %"),
      el("td", "num", fmtInt(m.eval_episodes)),
      el("td", null, new Date(m.created_unix * 1000).toLocaleString() + " (" + fmtAgo(Date.now() / 1000 - m.created_unix) + ")"),
      el("td", "num", fmtBytes(m.bytes)));
    const dl = el("td");
    const a = el("a", "download", modelFile(m.version));
    a.href = withToken(m.url.replace(/^\//, ""));
    a.setAttribute("download", modelFile(m.version));
    dl.append(a);
    tr.append(dl);
    tbody.append(tr);
  }
  const pick = best || state.models[0];
  $("play-cmd").textContent = "shine-worker play --model " + modelFile(pick.version);
  $("eval-cmd").textContent = "shine-worker eval --model " + modelFile(pick.version) + " --episodes 200 --cpu-level 9";
}

$("copy-cmd").addEventListener("click", async () => {
  try { await navigator.clipboard.writeText($("play-cmd").textContent); $("copy-cmd").textContent = "Copied"; }
  catch (e) { $("copy-cmd").textContent = "Select and copy"; }
  setTimeout(() => ($("copy-cmd").textContent = "Copy"), 1500);
});

// ---------------------------------------------------------------- live match
// Frames arrive in batches (a worker posts ~every 100 ms). They are queued and played
// back at the game's 60 fps, a few frames behind the newest, so motion is smooth
// rather than jumping once per batch; when the queue grows (the network hiccuped), the
// playback skips ahead instead of drifting further behind.
const FPS = 60, TARGET_BUFFER = 9, MAX_BUFFER = 45;
const live = { worker: null, ws: null, queue: [], meta: null, frame: null, last: null, owed: 0, drawn: 0, gameFrames: 0, drawnTimes: [], lastDrawnFrame: null };
window.shineLive = live; // for the browser tests: frames drawn, the last frame

function watch(id) {
  if (live.ws) { live.ws.onclose = null; live.ws.close(); }
  live.ws = null;
  live.queue = [];
  live.frame = null;
  live.last = null;
  live.owed = 0;
  live.drawn = 0;
  live.gameFrames = 0;
  live.drawnTimes = [];
  live.worker = id;
  $("live-stop").disabled = id === null;
  renderWorkers();
  if (id === null) { $("live-status").textContent = "Not watching."; drawStage(); return; }
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  const base = location.pathname.replace(/[^/]*$/, "");
  const ws = new WebSocket(withToken(proto + "//" + location.host + base + API + "/live/" + id));
  live.ws = ws;
  $("live-status").textContent = "Connecting to worker " + id + "…";
  ws.onopen = () => ($("live-status").textContent = "Waiting for worker " + id + " to send frames (it learns of you within a second)…");
  ws.onmessage = (ev) => {
    const msg = JSON.parse(ev.data);
    if (msg.type !== "frames") return;
    const b = msg.batch;
    live.meta = { actions: b.actions, model_version: b.model_version, cpu_level: b.cpu_level, eval: b.eval };
    for (const f of b.frames) live.queue.push(f);
    if (live.queue.length > MAX_BUFFER) live.queue.splice(0, live.queue.length - TARGET_BUFFER);
    $("live-status").textContent = "Watching worker " + id + " (environment 0, real time).";
  };
  ws.onclose = () => {
    if (live.ws !== ws) return;
    $("live-status").textContent = "The live stream of worker " + id + " closed (worker gone?). Pick a worker again.";
    live.ws = null;
  };
}

$("live-worker").addEventListener("change", (e) => watch(e.target.value === "" ? null : Number(e.target.value)));
$("live-stop").addEventListener("click", () => watch(null));

function tick(now) {
  // Game time owed since the last animation frame, in frames; the fraction carries
  // over, so the display keeps exactly 60 fps whatever the screen's refresh rate.
  if (live.queue.length) {
    if (live.last !== null) live.owed += ((now - live.last) * FPS) / 1000;
    live.last = now;
    if (live.frame === null) live.owed = Math.max(live.owed, 1);
    // Catch up gently when the buffer runs long.
    if (live.queue.length > TARGET_BUFFER * 2) live.owed += 0.5;
    let f = null;
    while (live.owed >= 1 && live.queue.length) { f = live.queue.shift(); live.owed -= 1; }
    if (f) showFrame(f);
  } else {
    // Ran dry: wait for the next batch rather than bank time to rush through it.
    live.last = null;
    live.owed = 0;
  }
  requestAnimationFrame(tick);
}

function showFrame(f) {
  live.frame = f;
  if (f.frame !== live.lastDrawnFrame) {
    live.drawn++;
    // Game time shown, in frames (a new episode restarts the counter: count 1). The
    // tests check it advances at the game's pace.
    const d = f.frame - live.lastDrawnFrame;
    live.gameFrames += live.lastDrawnFrame !== null && d > 0 && d <= 10 ? d : 1;
    live.lastDrawnFrame = f.frame;
    const t = performance.now();
    live.drawnTimes.push(t);
    while (live.drawnTimes.length && t - live.drawnTimes[0] > 1000) live.drawnTimes.shift();
  }
  drawStage();
  renderLivePanel();
}

// Final Destination as the simulator plays it (DESIGN.md): main stage at y = 0, edges
// at x = ±85.57, blast zones at x = ±246, y = +188 / −140. The camera shows the stage
// and its surroundings; a fighter outside the view is marked at the edge.
const VIEW = { x0: -150, x1: 150, y0: -62, y1: 107 };
const EDGE = 85.57;

function drawStage() {
  const canvas = $("stage");
  const { ctx, w, h } = setupCanvas(canvas);
  const sx = w / (VIEW.x1 - VIEW.x0), sy = h / (VIEW.y1 - VIEW.y0);
  const X = (x) => (x - VIEW.x0) * sx, Y = (y) => h - (y - VIEW.y0) * sy;
  const sky = ctx.createLinearGradient(0, 0, 0, h);
  sky.addColorStop(0, "#0b1424"); sky.addColorStop(1, "#1a1030");
  ctx.fillStyle = sky;
  ctx.fillRect(0, 0, w, h);
  // A few fixed "stars" for depth (a small LCG: the same sky on every frame).
  ctx.fillStyle = "rgba(255,255,255,.3)";
  let seed = 12345;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
  for (let i = 0; i < 70; i++) { const x = rnd() * w, y = rnd() * h * 0.62; ctx.fillRect(x, y, 1.4, 1.4); }
  // The stage: a flat top, a tapered underside.
  ctx.fillStyle = "#2b3647";
  ctx.strokeStyle = "#7f93ad";
  ctx.lineWidth = 2;
  ctx.beginPath();
  ctx.moveTo(X(-EDGE), Y(0));
  ctx.lineTo(X(EDGE), Y(0));
  ctx.lineTo(X(EDGE - 8), Y(-10));
  ctx.lineTo(X(EDGE - 30), Y(-24));
  ctx.lineTo(X(-EDGE + 30), Y(-24));
  ctx.lineTo(X(-EDGE + 8), Y(-10));
  ctx.closePath();
  ctx.fill();
  ctx.stroke();
  ctx.strokeStyle = "#b9c7d8";
  ctx.beginPath(); ctx.moveTo(X(-EDGE), Y(0)); ctx.lineTo(X(EDGE), Y(0)); ctx.stroke();
  // Axis hints: ledges, scale.
  ctx.fillStyle = "#5b6676";
  ctx.font = "11px system-ui, sans-serif";
  ctx.textAlign = "center";
  ctx.fillText("x = −85.6", X(-EDGE), Y(-30));
  ctx.fillText("x = +85.6", X(EDGE), Y(-30));

  const f = live.frame;
  if (!f) {
    ctx.fillStyle = "#8b98a9";
    ctx.font = "16px system-ui, sans-serif";
    ctx.fillText(live.worker === null ? "Pick a worker above to watch its match" : "Waiting for frames…", w / 2, h * 0.3);
    return;
  }
  // Close together, the CPU's label goes higher so the two never overlap.
  const close = Math.abs(X(f.opponent.x) - X(f.agent.x)) < 110 && Math.abs(Y(f.opponent.y) - Y(f.agent.y)) < 40;
  drawFighter(ctx, X, Y, sx, f.opponent, "#ef5b5b", "CPU", w, h, close ? 30 : 0);
  drawFighter(ctx, X, Y, sx, f.agent, "#4fb3ff", "BOT", w, h, 0);
  drawHud(ctx, w, h, f);
}

function drawFighter(ctx, X, Y, s, p, color, tag, w, h, lift) {
  const dead = p.action === null || (p.action !== undefined && p.action <= 0x0a);
  let px = X(p.x), py = Y(p.y);
  const out = px < 0 || px > w || py < 0 || py > h;
  if (out) {
    // Off camera: an arrow at the nearest edge, pointing at the fighter.
    const cx = Math.min(Math.max(px, 14), w - 14), cy = Math.min(Math.max(py, 14), h - 14);
    const a = Math.atan2(py - cy, px - cx);
    ctx.save();
    ctx.translate(cx, cy); ctx.rotate(a);
    ctx.fillStyle = color;
    ctx.beginPath(); ctx.moveTo(10, 0); ctx.lineTo(-6, -7); ctx.lineTo(-6, 7); ctx.closePath(); ctx.fill();
    ctx.restore();
    return;
  }
  const bw = 7 * s, bh = 13 * s;
  ctx.save();
  ctx.globalAlpha = dead ? 0.35 : 1;
  // Shadow on the stage when above it.
  if (Math.abs(p.x) <= EDGE && p.y > 0) {
    ctx.fillStyle = "rgba(0,0,0,.35)";
    ctx.beginPath(); ctx.ellipse(px, Y(0), bw * 0.7, 2.5, 0, 0, Math.PI * 2); ctx.fill();
  }
  // Body: a rounded capsule standing on (x, y).
  ctx.fillStyle = color;
  ctx.strokeStyle = "rgba(255,255,255,.8)";
  ctx.lineWidth = 1.5;
  const r = bw / 2;
  ctx.beginPath();
  ctx.moveTo(px - r, py - r);
  ctx.arc(px, py - bh + r, r, Math.PI, 0);
  ctx.lineTo(px + r, py - r);
  ctx.arc(px, py - r, r, 0, Math.PI);
  ctx.closePath();
  ctx.fill(); ctx.stroke();
  // Facing: an eye and a nose on the side it faces.
  const dir = p.facing >= 0 ? 1 : -1;
  ctx.fillStyle = "#0d1117";
  ctx.beginPath(); ctx.arc(px + dir * r * 0.45, py - bh + r * 1.1, Math.max(1.5, r * 0.22), 0, Math.PI * 2); ctx.fill();
  ctx.fillStyle = color;
  ctx.beginPath();
  ctx.moveTo(px + dir * r * 0.9, py - bh + r * 1.3);
  ctx.lineTo(px + dir * (r + 6), py - bh + r * 1.6);
  ctx.lineTo(px + dir * r * 0.9, py - bh + r * 1.9);
  ctx.closePath(); ctx.fill();
  ctx.restore();
  // Label: who, and the action state.
  ctx.textAlign = "center";
  ctx.font = "600 12px system-ui, sans-serif";
  ctx.fillStyle = color;
  ctx.fillText(tag, px, py - bh - 20 - lift);
  ctx.font = "12px ui-monospace, monospace";
  ctx.fillStyle = "#d8dee6";
  ctx.fillText(p.action_name || "?", px, py - bh - 6 - lift);
}

function drawHud(ctx, w, h, f) {
  // Melee-style panels: percent and stocks, opponent left, bot right.
  const panels = [[f.opponent, "CPU (port 1)", "#ef5b5b"], [f.agent, "BOT (port 2)", "#4fb3ff"]];
  panels.forEach(([p, name, color], i) => {
    const pw = 170, ph = 62, x = w / 2 + (i === 0 ? -pw - 16 : 16), y = h - ph - 12;
    ctx.fillStyle = "rgba(13,17,23,.78)";
    ctx.strokeStyle = color;
    ctx.lineWidth = 1.5;
    ctx.beginPath(); ctx.roundRect(x, y, pw, ph, 8); ctx.fill(); ctx.stroke();
    ctx.textAlign = "left";
    ctx.fillStyle = color;
    ctx.font = "600 11px system-ui, sans-serif";
    ctx.fillText(name, x + 10, y + 16);
    ctx.fillStyle = "#f2f5f8";
    ctx.font = "700 26px system-ui, sans-serif";
    ctx.fillText(Math.round(p.percent) + "%", x + 10, y + 48);
    for (let s = 0; s < p.stocks; s++) {
      ctx.fillStyle = color;
      ctx.beginPath(); ctx.arc(x + pw - 14 - s * 16, y + 44, 5.5, 0, Math.PI * 2); ctx.fill();
    }
    ctx.fillStyle = "#8b98a9";
    ctx.font = "11px system-ui, sans-serif";
    ctx.textAlign = "right";
    ctx.fillText(p.stocks + (p.stocks === 1 ? " stock" : " stocks"), x + pw - 10, y + 16);
  });
  ctx.textAlign = "left";
  ctx.fillStyle = "#8b98a9";
  ctx.font = "12px ui-monospace, monospace";
  ctx.fillText("frame " + f.frame, 12, 20);
  const secs = f.frame / 60;
  ctx.fillText(Math.floor(secs / 60) + ":" + pad2(Math.floor(secs % 60)), 12, 36);
}

function renderLivePanel() {
  const f = live.frame, m = live.meta || {};
  $("live-frame").textContent = f ? String(f.frame) : "–";
  $("live-fps").textContent = String(live.drawnTimes.length);
  $("live-model").textContent = m.model_version ? "v" + m.model_version : "–";
  $("live-cpu").textContent = m.cpu_level ? m.cpu_level + (m.eval ? " (eval)" : "") : "–";
  if (!f) return;
  const names = m.actions || [];
  $("live-action").textContent = names[f.action] || "action " + f.action;
  $("live-explored").hidden = !f.explored;
  const q = f.q || [];
  const box = $("qbars");
  if (box.childElementCount !== q.length || !box.querySelector(".qrow")) {
    box.innerHTML = "";
    q.forEach((_, i) => {
      const row = el("div", "qrow");
      const bar = el("div", "bar");
      bar.append(el("span"));
      row.append(el("div", "name", names[i] || "a" + i), bar, el("div", "val"));
      box.append(row);
    });
  }
  // Bars share one scale from min(0, lowest) to max(0, highest): the zero line shows.
  const lo = Math.min(0, ...q), hi = Math.max(0, ...q), range = hi - lo || 1;
  const best = q.indexOf(Math.max(...q));
  [...box.children].forEach((row, i) => {
    const v = q[i];
    const span = row.querySelector(".bar span");
    const z = (-lo / range) * 100, at = ((v - lo) / range) * 100;
    span.style.left = Math.min(z, at) + "%";
    span.style.width = Math.max(Math.abs(at - z), 0.8) + "%";
    row.classList.toggle("best", i === best);
    row.classList.toggle("chosen-row", i === f.action);
    row.querySelector(".val").textContent = v.toFixed(3);
  });
}

// ---------------------------------------------------------------- start
buildCharts();
drawCharts();
drawStage();
// The runs first: they say which run to show and where its routes are (a manager whose
// [[runs]] name no `default` has no /api/v1/stats); picking one starts its polls.
pollRuns();
requestAnimationFrame(tick);
window.addEventListener("resize", () => { drawCharts(); drawCompare(); drawStage(); });
