// Shine dashboard. Plain JavaScript, no libraries: charts and the live match are drawn
// on <canvas> here. Data comes from the manager's API (docs/api.md):
//   GET /api/v1/stats?since=T  every interval_secs: charts, header figures, workers table
//   GET /api/v1/models         every 5 s: the bots table
//   WS  /api/v1/live/{worker}  while a worker is picked: its live match
// With `public_reads = false` the page is opened as /?token=T: fetches send it as a
// bearer header; the WebSocket and download links (which cannot carry headers) as ?token=.
"use strict";

const TOKEN = new URLSearchParams(location.search).get("token");
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

const state = { samples: [], lastT: null, interval: 2, history: 3600, actionSet: "untouchable", workers: [], models: [], best: null };

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

function buildCharts() {
  const root = $("charts");
  for (const c of CHARTS) {
    const card = el("div", "card");
    card.dataset.chart = c.id;
    const head = el("div", "chart-head");
    const titles = el("div");
    titles.append(el("div", "chart-title", c.title), el("div", "chart-sub", c.sub));
    c.valueEl = el("div", "chart-value", "–");
    head.append(titles, c.valueEl);
    const legend = el("div", "legend");
    if (c.series.length > 1) {
      for (const s of c.series) {
        const item = el("span");
        const sw = el("i");
        sw.style.background = s.color;
        item.append(sw, document.createTextNode(s.label));
        legend.append(item);
      }
    }
    c.canvas = el("canvas", "chart");
    c.canvas.addEventListener("mousemove", (e) => { c.hoverX = e.offsetX; drawChart(c); });
    c.canvas.addEventListener("mouseleave", () => { c.hoverX = null; drawChart(c); });
    card.append(head, legend, c.canvas);
    root.append(card);
  }
}

function chartValue(c, sample, key) {
  const v = sample[key];
  if (v === null || v === undefined) return null;
  return c.pct ? v * 100 : v;
}

function drawChart(c) {
  const { ctx, w, h } = setupCanvas(c.canvas);
  ctx.clearRect(0, 0, w, h);
  const pts = state.samples;
  const L = 52, R = 10, T = 8, B = 22;
  const pw = w - L - R, ph = h - T - B;
  // Data range.
  let lo = Infinity, hi = -Infinity, points = 0;
  for (const s of c.series) for (const p of pts) {
    const v = chartValue(c, p, s.key);
    if (v === null) continue;
    lo = Math.min(lo, v); hi = Math.max(hi, v); points++;
  }
  ctx.font = "11px system-ui, sans-serif";
  if (points === 0) {
    ctx.fillStyle = "#5b6676";
    ctx.textAlign = "center";
    ctx.fillText("no data yet", L + pw / 2, T + ph / 2);
    c.canvas.dataset.points = "0";
    return;
  }
  if (c.min !== undefined) lo = Math.min(lo, c.min);
  if (c.max !== undefined && hi <= c.max) hi = Math.max(hi, c.pct ? Math.min(c.max, Math.max(hi * 1.1, 10)) : c.max);
  if (hi - lo < 1e-9) { const d = Math.abs(hi) * 0.1 || 1; lo -= c.min === undefined ? d : 0; hi += d; }
  const step = niceStep(hi - lo, 4);
  lo = Math.floor(lo / step) * step;
  hi = Math.ceil(hi / step) * step;
  const t0 = pts[0].t, t1 = Math.max(pts[pts.length - 1].t, t0 + 1);
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
  const xstep = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200].find((s) => span / s <= maxLabels) || 14400;
  for (let t = Math.ceil(t0 / xstep) * xstep; t <= t1; t += xstep) {
    const x = X(t);
    ctx.strokeStyle = "#1c252f";
    ctx.beginPath(); ctx.moveTo(Math.round(x) + 0.5, T); ctx.lineTo(Math.round(x) + 0.5, T + ph); ctx.stroke();
    if (x < L + 24 || x > L + pw - 24) continue;
    ctx.fillText(xstep >= 60 ? clock(t).slice(0, 5) : clock(t), x, T + ph + 6);
  }
  ctx.strokeStyle = "#34414f";
  ctx.beginPath(); ctx.moveTo(L + 0.5, T); ctx.lineTo(L + 0.5, T + ph + 0.5); ctx.lineTo(L + pw, T + ph + 0.5); ctx.stroke();

  // Series: lines with gaps where the value is null, a soft fill under the first.
  c.series.forEach((s, i) => {
    ctx.strokeStyle = s.color;
    ctx.lineWidth = 1.8;
    ctx.setLineDash(s.dashed ? [5, 4] : []);
    let started = false, first = null, last = null;
    ctx.beginPath();
    for (const p of pts) {
      const v = chartValue(c, p, s.key);
      if (v === null) { started = false; continue; }
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
    if (i === 0 && first !== null && !s.dashed) {
      const g = ctx.createLinearGradient(0, T, 0, T + ph);
      g.addColorStop(0, s.color + "33"); g.addColorStop(1, s.color + "00");
      ctx.fillStyle = g;
      ctx.beginPath();
      let open = false;
      for (const p of pts) {
        const v = chartValue(c, p, s.key);
        if (v === null) continue;
        if (!open) { ctx.moveTo(X(p.t), T + ph); open = true; }
        ctx.lineTo(X(p.t), Y(v));
      }
      ctx.lineTo(last[0], T + ph);
      ctx.closePath();
      ctx.fill();
    }
  });
  // Read by the browser tests: how many values this chart drew.
  c.canvas.dataset.points = String(points);

  // Hover: the nearest sample's values.
  if (c.hoverX != null && c.hoverX >= L) {
    const t = t0 + ((c.hoverX - L) / pw) * (t1 - t0);
    let best = pts[0];
    for (const p of pts) if (Math.abs(p.t - t) < Math.abs(best.t - t)) best = p;
    const x = X(best.t);
    ctx.strokeStyle = "#8b98a9";
    ctx.setLineDash([3, 3]);
    ctx.beginPath(); ctx.moveTo(x, T); ctx.lineTo(x, T + ph); ctx.stroke();
    ctx.setLineDash([]);
    const lines = [clock(best.t)].concat(c.series.map((s) => s.label + ": " + fmtNum(chartValue(c, best, s.key)) + (c.unit ? " " + c.unit : "")));
    ctx.font = "11px system-ui, sans-serif";
    const bw = Math.max(...lines.map((l) => ctx.measureText(l).width)) + 14, bh = lines.length * 15 + 8;
    const bx = x + bw + 10 > L + pw ? x - bw - 8 : x + 8;
    ctx.fillStyle = "rgba(13,17,23,.92)";
    ctx.strokeStyle = "#34414f";
    ctx.fillRect(bx, T + 4, bw, bh); ctx.strokeRect(bx + 0.5, T + 4.5, bw, bh);
    ctx.fillStyle = "#d8dee6";
    ctx.textAlign = "left";
    ctx.textBaseline = "top";
    lines.forEach((l, i) => ctx.fillText(l, bx + 7, T + 9 + i * 15));
  }
}

function drawCharts() {
  const cur = state.samples[state.samples.length - 1];
  for (const c of CHARTS) {
    if (cur) {
      const v = chartValue(c, cur, c.series[0].key);
      c.valueEl.innerHTML = "";
      c.valueEl.append(document.createTextNode(fmtNum(v)));
      if (v !== null && c.unit) c.valueEl.append(el("small", null, c.unit));
    }
    drawChart(c);
  }
}

// ---------------------------------------------------------------- polling
function setConn(ok, text) {
  const c = $("conn");
  c.className = "conn " + (ok ? "ok" : "bad");
  c.querySelector("span").textContent = text;
}

async function pollStats() {
  try {
    const since = state.lastT === null ? "" : "?since=" + state.lastT;
    const s = await getJSON(API + "/stats" + since);
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
    setConn(false, "manager unreachable");
  }
  setTimeout(pollStats, Math.max(500, Math.min(state.interval, 5) * 1000));
}

async function pollModels() {
  try {
    const m = await getJSON(API + "/models");
    state.models = m.models;
    renderModels();
  } catch (e) { /* the stats poll reports connection trouble */ }
  setTimeout(pollModels, 5000);
}

// ---------------------------------------------------------------- workers table
function renderWorkers() {
  const tbody = $("workers-table").tBodies[0];
  const ws = state.workers;
  if (!ws.length) return; // keep the "no worker yet" hint
  tbody.innerHTML = "";
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
function modelFile(v) {
  return "shine-" + state.actionSet + "-v" + v + ".safetensors";
}

function renderModels() {
  const tbody = $("models-table").tBodies[0];
  if (!state.models.length) return;
  tbody.innerHTML = "";
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
drawStage();
pollStats();
pollModels();
requestAnimationFrame(tick);
window.addEventListener("resize", () => { drawCharts(); drawStage(); });
