// Unit tests of web/live.js's playback bookkeeping and Q-value bars.
import { test } from "node:test";
import assert from "node:assert/strict";
import { FPS, MAX_BUFFER, TARGET_BUFFER, advance, countFrame, cpuText, enqueue, qBars } from "../../live.js";

const frames = (from, n) => Array.from({ length: n }, (_, i) => ({ frame: from + i }));
const playback = (queue = []) => ({ queue, frame: null, last: null, owed: 0 });
const MS = 1000 / FPS;
// The bars as [left, width] (-0, which the style shows as 0%, as 0).
const bars = (q) => qBars(q).bars.map((b) => [b.left + 0, b.width + 0]);

test("enqueue: frames queue in order up to MAX_BUFFER", () => {
  const q = enqueue([], frames(0, 6));
  assert.deepEqual(q.map((f) => f.frame), [0, 1, 2, 3, 4, 5]);
  enqueue(q, frames(6, MAX_BUFFER - 6));
  assert.equal(q.length, MAX_BUFFER, "exactly full is kept");
  assert.equal(q[0].frame, 0);
});

test("enqueue: past MAX_BUFFER only the newest TARGET_BUFFER stay", () => {
  const q = enqueue(frames(0, MAX_BUFFER), frames(MAX_BUFFER, 1));
  assert.equal(q.length, TARGET_BUFFER);
  assert.deepEqual(q.map((f) => f.frame), frames(MAX_BUFFER + 1 - TARGET_BUFFER, TARGET_BUFFER).map((f) => f.frame));
  assert.deepEqual(enqueue([], []), []);
});

test("advance: nothing queued resets the clock and shows nothing", () => {
  const p = { ...playback(), last: 5, owed: 0.7 };
  assert.equal(advance(p, 100), null);
  assert.deepEqual([p.last, p.owed], [null, 0]);
});

test("advance: the first frame shows at once", () => {
  const p = playback(frames(0, 3));
  assert.deepEqual(advance(p, 1000), { frame: 0 });
  assert.equal(p.queue.length, 2);
  assert.equal(p.last, 1000);
});

test("advance: then one frame per 1/60 s, the fraction carried over", () => {
  const p = playback(frames(0, 10));
  p.frame = advance(p, 0);
  // Half a frame's time: nothing yet.
  assert.equal(advance(p, MS / 2), null);
  assert.ok(Math.abs(p.owed - 0.5) < 1e-9);
  // Another half: the next frame.
  assert.deepEqual(advance(p, MS), { frame: 1 });
  // A 144 Hz screen: over one second, 60 frames (within one).
  const shown = [];
  for (let t = MS; t <= MS + 1000; t += 1000 / 144) {
    const f = advance(p, t);
    if (f) shown.push(f.frame);
    if (p.queue.length < 5) enqueue(p.queue, frames(1000 + shown.length * 10, 5));
  }
  assert.ok(Math.abs(shown.length - 60) <= 1, String(shown.length));
});

test("advance: after a stall, the frames owed are taken and only the newest shown", () => {
  const p = playback(frames(0, 10));
  p.frame = advance(p, 0);
  assert.deepEqual(advance(p, 4 * MS + 0.001), { frame: 4 });
  assert.equal(p.queue.length, 5);
  // More owed than queued: the queue empties, the rest of the debt stays.
  assert.deepEqual(advance(p, 100 * MS), { frame: 9 });
  assert.equal(p.queue.length, 0);
});

test("advance: a long queue plays a little faster", () => {
  const p = playback(frames(0, TARGET_BUFFER * 2 + 5));
  p.frame = advance(p, 0);
  advance(p, MS / 2 + 0.001);
  // Half a frame's time, plus the half a frame of catching up: one frame.
  assert.equal(p.queue.length, TARGET_BUFFER * 2 + 3);
});

const counter = () => ({ frame: null, drawn: 0, gameFrames: 0, drawnTimes: [], lastDrawnFrame: null });

test("countFrame: the same frame again is not counted", () => {
  const p = counter();
  countFrame(p, { frame: 7 }, 0);
  countFrame(p, { frame: 7 }, 10);
  assert.deepEqual([p.drawn, p.gameFrames, p.drawnTimes.length, p.frame.frame], [1, 1, 1, 7]);
});

test("countFrame: game time advances by the frame numbers, up to 10 at a time", () => {
  const p = counter();
  countFrame(p, { frame: 100 }, 0);
  countFrame(p, { frame: 101 }, 16);
  countFrame(p, { frame: 105 }, 32);
  assert.equal(p.gameFrames, 1 + 1 + 4);
  countFrame(p, { frame: 115 }, 48);
  assert.equal(p.gameFrames, 16, "10 is still a step");
  countFrame(p, { frame: 126 }, 64);
  assert.equal(p.gameFrames, 17, "a jump of 11 counts 1");
  countFrame(p, { frame: 1 }, 80);
  assert.equal(p.gameFrames, 18, "a new episode counts 1");
  assert.equal(p.drawn, 6);
});

test("countFrame: updates/s counts the frames of the last second", () => {
  const p = counter();
  for (let i = 0; i < 100; i++) countFrame(p, { frame: i }, i * 20);
  // At t = 1980 ms the window holds 980..1980: 51 frames.
  assert.equal(p.drawnTimes.length, 51);
  assert.equal(p.drawnTimes[0], 980);
});

test("qBars: no values, no bars", () => {
  assert.deepEqual(qBars([]), { bars: [], best: -1 });
});

test("qBars: a tie for the highest: the first is best", () => {
  assert.equal(qBars([1, 5, 5]).best, 1);
});

test("qBars: all positive: bars grow from zero at the left", () => {
  assert.equal(qBars([1, 2, 4]).best, 2);
  assert.deepEqual(bars([1, 2, 4]), [[0, 25], [0, 50], [0, 100]]);
});

test("qBars: all negative: bars grow leftwards from zero at the right", () => {
  assert.equal(qBars([-4, -1]).best, 1);
  assert.deepEqual(bars([-4, -1]), [[0, 100], [75, 25]]);
});

test("qBars: mixed signs share one scale with the zero line inside", () => {
  assert.equal(qBars([-1, 3, 0]).best, 1);
  assert.deepEqual(bars([-1, 3, 0]), [[0, 25], [25, 75], [25, 0.8]]);
});

test("qBars: all zero: a sliver each, the first is best", () => {
  assert.equal(qBars([0, 0]).best, 0);
  assert.deepEqual(bars([0, 0]), [[0, 0.8], [0, 0.8]]);
});

test("cpuText: the CPU level, marked in evaluation episodes", () => {
  assert.equal(cpuText({}), "–");
  assert.equal(cpuText({ cpu_level: 0 }), "–");
  assert.equal(cpuText({ cpu_level: 9 }), "9");
  assert.equal(cpuText({ cpu_level: 9, eval: true }), "9 (eval)");
});
