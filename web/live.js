// The live match: a WebSocket to the manager (WS /api/v1/live/{worker}) while a worker
// is picked, its frames played back at the game's pace, drawn by stage.js, and the bot's
// action and Q-values beside. The playback's bookkeeping and the Q-value bars' geometry
// are pure (web/tests/unit/live.test.mjs).
//
// Frames arrive in batches (a worker posts ~every 100 ms). They are queued and played
// back at the game's 60 fps, a few frames behind the newest, so motion is smooth
// rather than jumping once per batch; when the queue grows (the network hiccuped), the
// playback skips ahead instead of drifting further behind.
import { TOKEN, liveSocketUrl } from "./api.js";
import { $, el } from "./dom.js";
import { drawStage } from "./stage.js";

export const FPS = 60, TARGET_BUFFER = 9, MAX_BUFFER = 45;

// The playback, read by the browser tests as window.shineLive (app.js): frames drawn,
// game frames shown, the last frame.
export const live = { worker: null, ws: null, queue: [], meta: null, frame: null, last: null, owed: 0, drawn: 0, gameFrames: 0, drawnTimes: [], lastDrawnFrame: null };

// ---------------------------------------------------------------- pure
// Queues a batch's frames; past MAX_BUFFER queued, only the newest TARGET_BUFFER stay.
export function enqueue(queue, frames) {
  for (const f of frames) queue.push(f);
  if (queue.length > MAX_BUFFER) queue.splice(0, queue.length - TARGET_BUFFER);
  return queue;
}

// One animation frame at time `now` (ms) of playback `p` ({ queue, frame, last, owed }):
// the game time owed since the last one, in frames (the fraction carries over, so the
// display keeps exactly 60 fps whatever the screen's refresh rate); the first frame at
// once; a little faster while the queue runs long. Takes the frames owed from the queue
// and returns the newest of them to show (null: none this time). When the queue has run
// dry it waits for the next batch rather than bank time to rush through it.
export function advance(p, now) {
  if (!p.queue.length) {
    p.last = null;
    p.owed = 0;
    return null;
  }
  if (p.last !== null) p.owed += ((now - p.last) * FPS) / 1000;
  p.last = now;
  if (p.frame === null) p.owed = Math.max(p.owed, 1);
  // Catch up gently when the buffer runs long.
  if (p.queue.length > TARGET_BUFFER * 2) p.owed += 0.5;
  let f = null;
  while (p.owed >= 1 && p.queue.length) { f = p.queue.shift(); p.owed -= 1; }
  return f;
}

// Counts frame `f` shown at time `t` (ms) in playback `p`, unless it repeats the last
// one: `drawn` (frames drawn), `gameFrames` (game time shown: the frame numbers'
// advance, up to 10 at a time; a new episode restarts the counter and counts 1) and
// `drawnTimes` (the last second's, for updates/s). The tests check it advances at the
// game's pace.
export function countFrame(p, f, t) {
  p.frame = f;
  if (f.frame === p.lastDrawnFrame) return;
  p.drawn++;
  const d = f.frame - p.lastDrawnFrame;
  p.gameFrames += p.lastDrawnFrame !== null && d > 0 && d <= 10 ? d : 1;
  p.lastDrawnFrame = f.frame;
  p.drawnTimes.push(t);
  while (p.drawnTimes.length && t - p.drawnTimes[0] > 1000) p.drawnTimes.shift();
}

// The Q-value bars: one scale from min(0, lowest) to max(0, highest) so the zero line
// shows; each bar from zero to its value, as left and width in % (at least 0.8 %).
// `best`: the index of the highest (-1: no values).
export function qBars(q) {
  const lo = Math.min(0, ...q), hi = Math.max(0, ...q), range = hi - lo || 1;
  const best = q.indexOf(Math.max(...q));
  const z = (-lo / range) * 100;
  const bars = q.map((v) => {
    const at = ((v - lo) / range) * 100;
    return { left: Math.min(z, at), width: Math.max(Math.abs(at - z), 0.8) };
  });
  return { bars, best };
}

// The panel's CPU level: "9", "9 (eval)" for an evaluation episode, "–": unknown.
export const cpuText = (m) => (m.cpu_level ? m.cpu_level + (m.eval ? " (eval)" : "") : "–");

// ---------------------------------------------------------------- DOM
export const drawLive = () => drawStage($("stage"), live.frame, live.worker !== null);

// Watches worker `id` (null: stops watching): closes the stream there was, resets the
// playback, calls `changed()` (the workers table's Watch buttons follow) and opens the
// worker's stream.
export function watch(id, changed) {
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
  changed();
  if (id === null) { $("live-status").textContent = "Not watching."; drawLive(); return; }
  const ws = new WebSocket(liveSocketUrl(location, id, TOKEN));
  live.ws = ws;
  $("live-status").textContent = "Connecting to worker " + id + "…";
  ws.onopen = () => ($("live-status").textContent = "Waiting for worker " + id + " to send frames (it learns of you within a second)…");
  ws.onmessage = (ev) => {
    const msg = JSON.parse(ev.data);
    if (msg.type !== "frames") return;
    const b = msg.batch;
    live.meta = { actions: b.actions, model_version: b.model_version, cpu_level: b.cpu_level, eval: b.eval };
    enqueue(live.queue, b.frames);
    $("live-status").textContent = "Watching worker " + id + " (environment 0, real time).";
  };
  ws.onclose = () => {
    if (live.ws !== ws) return;
    $("live-status").textContent = "The live stream of worker " + id + " closed (worker gone?). Pick a worker again.";
    live.ws = null;
  };
}

// The animation loop: requestAnimationFrame(tick) once (app.js).
export function tick(now) {
  const f = advance(live, now);
  if (f) showFrame(f);
  requestAnimationFrame(tick);
}

function showFrame(f) {
  countFrame(live, f, performance.now());
  drawLive();
  renderLivePanel();
}

function renderLivePanel() {
  const f = live.frame, m = live.meta || {};
  $("live-frame").textContent = f ? String(f.frame) : "–";
  $("live-fps").textContent = String(live.drawnTimes.length);
  $("live-model").textContent = m.model_version ? "v" + m.model_version : "–";
  $("live-cpu").textContent = cpuText(m);
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
  const { bars, best } = qBars(q);
  [...box.children].forEach((row, i) => {
    const span = row.querySelector(".bar span");
    span.style.left = bars[i].left + "%";
    span.style.width = bars[i].width + "%";
    row.classList.toggle("best", i === best);
    row.classList.toggle("chosen-row", i === f.action);
    row.querySelector(".val").textContent = q[i].toFixed(3);
  });
}
