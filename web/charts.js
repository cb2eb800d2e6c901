// The charts, drawn on <canvas> without libraries: the picked run's progress charts and
// the compare charts (one line per run). The computations (the axis steps and ticks,
// where lines break at a manager restart's gap, the data's extent, the nearest sample
// to the pointer, the series' trimming) are pure functions, exported for the unit tests
// (web/tests/unit/charts.test.mjs); the drawing needs a browser.
import { $, el, setupCanvas } from "./dom.js";
import { clock, fmtNum } from "./formats.js";
import { compare, state } from "./state.js";

// Each chart: one or more series of one Sample field each, a unit, and how to scale.
export const CHARTS = [
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
export const COMPARE = [
  { id: "survival", title: "Evaluation survival", sub: "greedy, top CPU; share of episodes survived, %", key: "eval_survival", unit: "%", pct: true, min: 0, max: 100 },
  { id: "train_sps", title: "Train steps per second", sub: "each run's share of the device", key: "train_steps_per_sec", unit: "steps/s", min: 0 },
  { id: "loss", title: "TD loss", sub: "Huber loss of the latest train steps", key: "loss", unit: "", min: 0 },
  { id: "spi", title: "Samples per insert", sub: "rate limiter's ratio", key: "samples_per_insert", unit: "×", min: 0 },
];

// The compare charts ask the history for at most this many samples per run at first.
export const COMPARE_POINTS = 600;

// ---------------------------------------------------------------- pure computations
// Distinct colors for runs, by their place in `runs` (sorted by name, so a run keeps its
// color while the runs stay the same); past eight they repeat, dashed. A name not in
// the list takes the first color.
export const RUN_COLORS = ["#4fb3ff", "#f5a524", "#3ecf8e", "#ef5b5b", "#a78bfa", "#f472b6", "#2dd4bf", "#e2e8f0"];
export function runColor(name, runs) {
  const i = Math.max(0, runs.findIndex((r) => r.name === name));
  return { color: RUN_COLORS[i % RUN_COLORS.length], dashed: i >= RUN_COLORS.length };
}

// A round step (1, 2 or 5 times a power of ten) that cuts `range` into about `ticks`
// parts. `range` must be positive (yRange never passes less than 1e-9).
export function niceStep(range, ticks) {
  const raw = range / Math.max(1, ticks);
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const n = raw / mag;
  return (n < 1.5 ? 1 : n < 3 ? 2 : n < 7 ? 5 : 10) * mag;
}

// A sample's value as chart `c` draws it (shares as percentages), or null: none.
export function chartValue(c, sample, key) {
  const v = sample[key];
  if (v === null || v === undefined) return null;
  return c.pct ? v * 100 : v;
}

// Whether the samples pause before pts[i] (the manager was down): the step to it is
// over five times the spacing of the samples around it. Lines break there rather than
// bridge the pause with a straight line. The spacing is measured locally because it
// varies within a series: the history comes thinned evenly (every k-th sample), the
// samples polled since then unthinned.
export function gapBefore(pts, i) {
  if (i < 1) return false;
  const d = pts[i].t - pts[i - 1].t;
  const near = Math.max(i >= 2 ? pts[i - 1].t - pts[i - 2].t : 0, i + 1 < pts.length ? pts[i + 1].t - pts[i].t : 0);
  return near > 0 && d > 5 * near;
}

// The stretches of `pts` a line joins, each a list of { t, v } (oldest first): a line
// breaks at a missing value (null) and at a gap (gapBefore). With `bridgeNulls` (the
// area under a line) it breaks only at gaps and joins across missing values.
export function stretches(c, pts, key, bridgeNulls = false) {
  const out = [];
  let cur = null;
  for (let k = 0; k < pts.length; k++) {
    const v = chartValue(c, pts[k], key);
    if ((!bridgeNulls && v === null) || gapBefore(pts, k)) cur = null;
    if (v === null) continue;
    if (cur === null) out.push((cur = []));
    cur.push({ t: pts[k].t, v });
  }
  return out;
}

// What the lines hold: their values' range (lo, hi), how many values in all (points),
// the time span of their samples (t0, t1: every sample, with a value or not) and the
// times of the first and last value (drawnT0, drawnT1). Also sets on each line its own
// `points`, `t0` and `t1` (null: no value). With no value lo/hi/t0/... are ±Infinity.
export function extent(c, lines) {
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
  return { lo, hi, points, t0, t1, drawnT0, drawnT1 };
}

// The y axis for values from lo to hi: chart `c`'s floor (min) and ceiling (max; a
// percentage chart's shrinks to 10 % above the data, at least 10), a flat series
// widened, then both ends rounded out to a niceStep of about four ticks.
export function yRange(c, lo, hi) {
  if (c.min !== undefined) lo = Math.min(lo, c.min);
  if (c.max !== undefined && hi <= c.max) hi = Math.max(hi, c.pct ? Math.min(c.max, Math.max(hi * 1.1, 10)) : c.max);
  if (hi - lo < 1e-9) { const d = Math.abs(hi) * 0.1 || 1; lo -= c.min === undefined ? d : 0; hi += d; }
  const step = niceStep(hi - lo, 4);
  return { lo: Math.floor(lo / step) * step, hi: Math.ceil(hi / step) * step, step };
}

// The y ticks' values, lo to hi by step.
export function yTicks(lo, hi, step) {
  const out = [];
  for (let v = lo; v <= hi + step / 2; v += step) out.push(v);
  return out;
}

// As many decimals as the tick step needs: 0.02, 0.04 ... not 0.0200, 0.0400.
export const tickDecimals = (step) => Math.max(0, Math.min(6, -Math.floor(Math.log10(step) + 1e-9)));

// A y tick's label: fmtNum from 10,000 on, else `decimals` decimals; "%" on a % chart.
export const yLabel = (v, decimals, unit) => (Math.abs(v) >= 1e4 ? fmtNum(v) : v.toFixed(decimals)) + (unit === "%" ? "%" : "");

// Seconds between x labels: the first round step that puts at most `maxLabels` labels
// on `span` seconds (two days past the list).
const TIME_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 43200, 86400];
export const timeStep = (span, maxLabels) => TIME_STEPS.find((s) => span / s <= maxLabels) || 172800;

// The x ticks' times: the multiples of step from t0 to t1.
export function xTicks(t0, t1, step) {
  const out = [];
  for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) out.push(t);
  return out;
}

// An x tick's label: HH:MM, or HH:MM:SS when the labels are less than a minute apart.
export const timeLabel = (t, step) => (step >= 60 ? clock(t).slice(0, 5) : clock(t));

// The sample of `pts` (not empty) nearest time t; the earlier one on a tie.
export const nearest = (pts, t) => pts.reduce((a, p) => (Math.abs(p.t - t) < Math.abs(a.t - t) ? p : a));

// `samples` with `series` (newer samples, oldest first) appended, the oldest dropped
// past `max`; changes and returns `samples`.
export function appendSamples(samples, series, max) {
  for (const p of series) samples.push(p);
  if (samples.length > max) samples.splice(0, samples.length - max);
  return samples;
}

// Every other sample, from the first, and always the last: a series halved evenly.
export const thinHalf = (samples) => samples.filter((_, i) => i % 2 === 0 || i === samples.length - 1);

// ---------------------------------------------------------------- drawing
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

export function buildCharts() {
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
    c.lines = () => state.runs.map((r) => ({ key: c.key, label: r.name, ...runColor(r.name, state.runs), pts: (compare.series[r.name] || {}).samples || [] }));
  }
}

// Draws c.lines(): each { pts (samples, oldest first), key, label, color, dashed }.
// Returns them with `points`, how many values each drew, `segments`, how many line
// segments it stroked, and `t0`, `t1`, the times of its first and last (null: none).
export function drawChart(c) {
  const { ctx, w, h } = setupCanvas(c.canvas);
  ctx.clearRect(0, 0, w, h);
  const lines = c.lines();
  const L = 52, R = 10, T = 8, B = 22;
  const pw = w - L - R, ph = h - T - B;
  // Data range, the time span, and the first and last time a value is drawn at.
  const ext = extent(c, lines);
  const { points, drawnT0, drawnT1 } = ext;
  let { t0, t1 } = ext;
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
  const { lo, hi, step } = yRange(c, ext.lo, ext.hi);
  t1 = Math.max(t1, t0 + 1);
  const X = (t) => L + ((t - t0) / (t1 - t0)) * pw;
  const Y = (v) => T + ph - ((v - lo) / (hi - lo)) * ph;

  // Grid and y labels (with the unit).
  ctx.strokeStyle = "#222c38";
  ctx.lineWidth = 1;
  ctx.fillStyle = "#8b98a9";
  ctx.textAlign = "right";
  ctx.textBaseline = "middle";
  const decimals = tickDecimals(step);
  for (const v of yTicks(lo, hi, step)) {
    const y = Math.round(Y(v)) + 0.5;
    ctx.beginPath(); ctx.moveTo(L, y); ctx.lineTo(L + pw, y); ctx.stroke();
    ctx.fillText(yLabel(v, decimals, c.unit), L - 6, y);
  }
  // x labels: wall-clock time, at most one per ~70 px, none cut off at the edges.
  ctx.textAlign = "center";
  ctx.textBaseline = "top";
  const xstep = timeStep(t1 - t0, Math.max(2, Math.floor(pw / 70)));
  for (const t of xTicks(t0, t1, xstep)) {
    const x = X(t);
    ctx.strokeStyle = "#1c252f";
    ctx.beginPath(); ctx.moveTo(Math.round(x) + 0.5, T); ctx.lineTo(Math.round(x) + 0.5, T + ph); ctx.stroke();
    if (x < L + 24 || x > L + pw - 24) continue;
    ctx.fillText(timeLabel(t, xstep), x, T + ph + 6);
  }
  ctx.strokeStyle = "#34414f";
  ctx.beginPath(); ctx.moveTo(L + 0.5, T); ctx.lineTo(L + 0.5, T + ph + 0.5); ctx.lineTo(L + pw, T + ph + 0.5); ctx.stroke();

  // Series: lines with gaps where the value is null, a soft fill under the first (not
  // when comparing runs: no run's line should stand out).
  lines.forEach((s, i) => {
    ctx.strokeStyle = s.color;
    ctx.lineWidth = 1.8;
    ctx.setLineDash(s.dashed ? [5, 4] : []);
    const parts = stretches(c, s.pts, s.key);
    // Read by the browser tests: the segments this line stroked (where lines overlap,
    // one covers another's pixels, so what was drawn is counted, not seen).
    s.segments = parts.reduce((n, part) => n + part.length - 1, 0);
    ctx.beginPath();
    for (const part of parts) part.forEach((p, k) => (k === 0 ? ctx.moveTo(X(p.t), Y(p.v)) : ctx.lineTo(X(p.t), Y(p.v))));
    ctx.stroke();
    ctx.setLineDash([]);
    if (parts.length) {
      const lastPart = parts[parts.length - 1], last = lastPart[lastPart.length - 1];
      ctx.fillStyle = s.color;
      ctx.beginPath(); ctx.arc(X(last.t), Y(last.v), 2.8, 0, Math.PI * 2); ctx.fill();
    }
    if (i === 0 && parts.length && !s.dashed && !c.compare) {
      const g = ctx.createLinearGradient(0, T, 0, T + ph);
      g.addColorStop(0, s.color + "33"); g.addColorStop(1, s.color + "00");
      ctx.fillStyle = g;
      // One area per stretch without a gap (missing values are bridged).
      ctx.beginPath();
      for (const area of stretches(c, s.pts, s.key, true)) {
        ctx.moveTo(X(area[0].t), T + ph);
        for (const p of area) ctx.lineTo(X(p.t), Y(p.v));
        ctx.lineTo(X(area[area.length - 1].t), T + ph);
        ctx.closePath();
      }
      ctx.fill();
    }
  });

  // Hover: each line's sample nearest the pointer (the lines of a progress chart share
  // their samples; compared runs each have their own).
  if (c.hoverX != null && c.hoverX >= L) {
    const t = t0 + ((c.hoverX - L) / pw) * (t1 - t0);
    const shown = lines.filter((s) => s.pts.length);
    const near = shown.map((s) => nearest(s.pts, t));
    const ref = nearest(near, t);
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

// The progress charts, each with its current value (the newest sample's) in the head.
export function drawCharts() {
  const cur = state.samples[state.samples.length - 1];
  for (const c of CHARTS) {
    c.valueEl.innerHTML = "";
    const v = cur ? chartValue(c, cur, c.series[0].key) : null;
    c.valueEl.append(document.createTextNode(fmtNum(v)));
    if (v !== null && c.unit) c.valueEl.append(el("small", null, c.unit));
    drawChart(c);
  }
}

export function drawCompare() {
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
      d.segments = String(s.segments);
      d.t0 = s.t0 === null ? "" : String(s.t0);
      d.t1 = s.t1 === null ? "" : String(s.t1);
    });
  }
}
