// Unit tests of web/charts.js's computations: node --test web/tests/unit/
process.env.TZ = "UTC";
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  CHARTS, COMPARE, RUN_COLORS, appendSamples, chartValue, extent, gapBefore, nearest, niceStep, runColor, stretches,
  thinHalf, tickDecimals, timeLabel, timeStep, xTicks, yLabel, yRange, yTicks,
} from "../../charts.js";

const close = (a, b, msg) => assert.ok(Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(b)), `${msg || ""} ${a} ≉ ${b}`);
// Samples at times ts with field v (null: none).
const series = (ts, vs = ts.map(() => 1)) => ts.map((t, i) => ({ t, v: vs[i] }));
const plain = { unit: "" };
const pct = { unit: "%", pct: true, min: 0, max: 100 };

test("niceStep: 1, 2 or 5 times a power of ten, about range/ticks", () => {
  close(niceStep(100, 4), 20);
  close(niceStep(10, 4), 2);
  close(niceStep(1, 4), 0.2);
  close(niceStep(5, 4), 1);
  close(niceStep(7, 4), 2);
  close(niceStep(14, 4), 5);
  close(niceStep(9, 1), 10);
  close(niceStep(1e12, 4), 2e11);
  close(niceStep(3e-7, 4), 1e-7);
});

test("niceStep: fewer than one tick counts as one", () => {
  close(niceStep(9, 0), 10);
  close(niceStep(9, -3), 10);
});

test("chartValue: shares become percentages; missing is null, zero stays zero", () => {
  assert.equal(chartValue(pct, { s: 0.25 }, "s"), 25);
  assert.equal(chartValue(pct, { s: 0 }, "s"), 0);
  assert.equal(chartValue(plain, { s: 0.25 }, "s"), 0.25);
  assert.equal(chartValue(plain, { s: -3 }, "s"), -3);
  assert.equal(chartValue(plain, { s: null }, "s"), null);
  assert.equal(chartValue(pct, {}, "s"), null);
});

test("gapBefore: never before the first sample, nor on even spacing", () => {
  const pts = series([0, 1, 2, 3, 4]);
  for (let i = 0; i < pts.length; i++) assert.equal(gapBefore(pts, i), false, String(i));
  assert.equal(gapBefore(series([5]), 0), false);
});

test("gapBefore: a pause over five times the spacing around it is a gap (a restart)", () => {
  const pts = series([0, 1, 2, 100, 101]);
  assert.deepEqual(pts.map((_, i) => gapBefore(pts, i)), [false, false, false, true, false]);
});

test("gapBefore: exactly five times the spacing is not a gap", () => {
  assert.equal(gapBefore(series([0, 1, 2, 7, 8]), 3), false);
  assert.equal(gapBefore(series([0, 1, 2, 7.001, 8.001]), 3), true);
});

test("gapBefore: the spacing is measured on both sides, the wider counts", () => {
  // History thinned to one sample a minute, then polled samples every 2 s: the step from
  // the thinned part to the polled part is no gap.
  const pts = series([0, 60, 120, 180, 182, 184]);
  assert.deepEqual(pts.map((_, i) => gapBefore(pts, i)), [false, false, false, false, false, false]);
  // A restart between the history (every 10 s) and fresh samples (every 0.5 s).
  const restart = series([0, 10, 20, 620, 620.5, 621]);
  assert.deepEqual(restart.map((_, i) => gapBefore(restart, i)), [false, false, false, true, false, false]);
});

test("gapBefore: with no spacing to compare to (two samples, equal times) no gap", () => {
  assert.equal(gapBefore(series([0, 1000]), 1), false);
  assert.equal(gapBefore(series([0, 0, 0]), 2), false);
  assert.equal(gapBefore(series([0, 0, 1000]), 2), false);
  // The last sample compares with the spacing before it.
  assert.equal(gapBefore(series([0, 1, 100]), 2), true);
});

test("stretches: an empty series or one without values draws nothing", () => {
  assert.deepEqual(stretches(plain, [], "v"), []);
  assert.deepEqual(stretches(plain, series([0, 1, 2], [null, null, null]), "v"), []);
  assert.deepEqual(stretches(plain, series([0, 1, 2], [null, null, null]), "v", true), []);
});

test("stretches: one line when nothing is missing and nothing pauses", () => {
  assert.deepEqual(stretches(plain, series([0, 1, 2], [3, 4, 5]), "v"), [[{ t: 0, v: 3 }, { t: 1, v: 4 }, { t: 2, v: 5 }]]);
});

test("stretches: a missing value breaks the line, not the area under it", () => {
  const pts = series([0, 1, 2, 3], [1, null, 2, 3]);
  assert.deepEqual(stretches(plain, pts, "v"), [[{ t: 0, v: 1 }], [{ t: 2, v: 2 }, { t: 3, v: 3 }]]);
  assert.deepEqual(stretches(plain, pts, "v", true), [[{ t: 0, v: 1 }, { t: 2, v: 2 }, { t: 3, v: 3 }]]);
});

test("stretches: a restart's gap breaks both the line and the area", () => {
  const pts = series([0, 1, 2, 100, 101, 102], [1, 2, 3, 4, 5, 6]);
  const want = [[{ t: 0, v: 1 }, { t: 1, v: 2 }, { t: 2, v: 3 }], [{ t: 100, v: 4 }, { t: 101, v: 5 }, { t: 102, v: 6 }]];
  assert.deepEqual(stretches(plain, pts, "v"), want);
  assert.deepEqual(stretches(plain, pts, "v", true), want);
});

test("stretches: a gap before a missing value still breaks the area", () => {
  const pts = series([0, 1, 2, 100, 101, 102], [1, 2, 3, null, 5, 6]);
  assert.deepEqual(stretches(plain, pts, "v", true), [[{ t: 0, v: 1 }, { t: 1, v: 2 }, { t: 2, v: 3 }], [{ t: 101, v: 5 }, { t: 102, v: 6 }]]);
});

test("stretches: percentages on a % chart", () => {
  assert.deepEqual(stretches(pct, series([0, 1], [0.5, 1]), "v"), [[{ t: 0, v: 50 }, { t: 1, v: 100 }]]);
});

test("extent: no lines, or only empty ones: nothing drawn, infinite bounds", () => {
  const none = extent(plain, []);
  assert.equal(none.points, 0);
  assert.equal(none.lo, Infinity);
  assert.equal(none.hi, -Infinity);
  const lines = [{ key: "v", pts: [] }];
  assert.equal(extent(plain, lines).points, 0);
  assert.deepEqual([lines[0].points, lines[0].t0, lines[0].t1], [0, null, null]);
});

test("extent: samples without values span time but draw nothing", () => {
  const lines = [{ key: "v", pts: series([10, 20], [null, null]) }];
  const e = extent(plain, lines);
  assert.deepEqual([e.points, e.t0, e.t1, e.drawnT0, e.drawnT1], [0, 10, 20, Infinity, -Infinity]);
  assert.equal(lines[0].t0, null);
});

test("extent: the range of values and times over lines on their own time bases", () => {
  const lines = [
    { key: "v", pts: series([10, 20, 30], [null, -2, 5]) },
    { key: "v", pts: series([0, 40], [1, null]) },
    { key: "v", pts: [] },
  ];
  const e = extent(pct, lines);
  assert.deepEqual(e, { lo: -200, hi: 500, points: 3, t0: 0, t1: 40, drawnT0: 0, drawnT1: 30 });
  assert.deepEqual(lines.map((s) => [s.points, s.t0, s.t1]), [[2, 20, 30], [1, 0, 0], [0, null, null]]);
});

test("yRange: a floor of 0 (loss) reaches down to it; ends on the step", () => {
  const r = yRange({ min: 0 }, 0.5, 2);
  close(r.step, 0.5);
  close(r.lo, 0);
  close(r.hi, 2);
});

test("yRange: a survival chart shows 10 % above its data, at least 0-10, at most 0-100", () => {
  const low = yRange(pct, 0, 3);
  assert.deepEqual([low.lo, low.hi, low.step], [0, 10, 2]);
  const mid = yRange(pct, 20, 50);
  assert.deepEqual([mid.lo, mid.hi, mid.step], [0, 60, 10]); // 0..55, rounded out to the step
  const high = yRange(pct, 0, 95);
  assert.deepEqual([high.lo, high.hi, high.step], [0, 100, 20]);
  const full = yRange(pct, 100, 100);
  assert.deepEqual([full.lo, full.hi, full.step], [0, 100, 20]);
});

test("yRange: a flat series is widened by a tenth of its value, or by 1 at zero", () => {
  const five = yRange(plain, 5, 5);
  close(five.step, 0.2);
  close(five.lo, 4.4);
  close(five.hi, 5.6);
  const zero = yRange(plain, 0, 0);
  assert.deepEqual([zero.lo, zero.hi, zero.step], [-1, 1, 0.5]);
  // With a floor the bottom stays at it.
  const floor = yRange({ min: 0 }, 0, 0);
  close(floor.lo, 0);
  close(floor.hi, 1);
  const neg = yRange(plain, -4, -4);
  close(neg.lo, -4.4);
  close(neg.hi, -3.6);
});

test("yRange: negatives and huge ranges get finite round steps", () => {
  const r = yRange(plain, -3, -1);
  assert.deepEqual([r.lo, r.hi, r.step], [-3, -1, 0.5]);
  const big = yRange({ min: 0 }, 1e11, 9e11);
  assert.deepEqual([big.lo, big.hi, big.step], [0, 1e12, 2e11]);
  const tiny = yRange(plain, 1e-10, 1e-10 + 1e-10);
  assert.ok(Number.isFinite(tiny.step) && tiny.step > 0 && tiny.lo < tiny.hi);
});

test("yTicks: lo to hi inclusive, despite floating-point drift", () => {
  assert.deepEqual(yTicks(0, 10, 2), [0, 2, 4, 6, 8, 10]);
  assert.equal(yTicks(0, 1, 0.2).length, 6);
  assert.deepEqual(yTicks(-1, 1, 0.5), [-1, -0.5, 0, 0.5, 1]);
  assert.deepEqual(yTicks(3, 3, 1), [3]);
});

test("tickDecimals: as many decimals as the step needs, 0 to 6", () => {
  assert.equal(tickDecimals(100), 0);
  assert.equal(tickDecimals(10), 0);
  assert.equal(tickDecimals(1), 0);
  assert.equal(tickDecimals(0.5), 1);
  assert.equal(tickDecimals(0.2), 1);
  assert.equal(tickDecimals(0.1), 1);
  assert.equal(tickDecimals(0.05), 2);
  assert.equal(tickDecimals(0.02), 2);
  assert.equal(tickDecimals(1e-9), 6);
});

test("yLabel: fixed decimals below 10,000, fmtNum above, % on % charts", () => {
  assert.equal(yLabel(0.2, 1, ""), "0.2");
  assert.equal(yLabel(50, 0, "%"), "50%");
  assert.equal(yLabel(9999, 0, "steps/s"), "9999");
  assert.equal(yLabel(12345, 0, ""), "12.3k");
  assert.equal(yLabel(-20000, 0, ""), "-20.0k");
  assert.equal(yLabel(2e6, 0, "×"), "2.00M");
});

test("timeStep: the first round step giving at most that many labels", () => {
  assert.equal(timeStep(0, 2), 1);
  assert.equal(timeStep(10, 10), 1);
  assert.equal(timeStep(11, 10), 2);
  assert.equal(timeStep(3600, 10), 600);
  assert.equal(timeStep(86400, 12), 7200);
  assert.equal(timeStep(86400, 11), 14400);
  assert.equal(timeStep(20 * 86400, 10), 172800); // past the list: two days
});

test("xTicks: the multiples of the step within t0..t1, ends included", () => {
  assert.deepEqual(xTicks(5, 35, 10), [10, 20, 30]);
  assert.deepEqual(xTicks(10, 30, 10), [10, 20, 30]);
  assert.deepEqual(xTicks(11, 19, 10), []);
  assert.deepEqual(xTicks(-25, 5, 10), [-20, -10, 0]);
  assert.deepEqual(xTicks(30, 10, 10), []);
});

test("timeLabel: seconds only while labels are under a minute apart", () => {
  assert.equal(timeLabel(3661, 1), "01:01:01");
  assert.equal(timeLabel(3661, 30), "01:01:01");
  assert.equal(timeLabel(3661, 60), "01:01");
  assert.equal(timeLabel(3661, 3600), "01:01");
});

test("nearest: the sample closest in time, the earlier on a tie", () => {
  const pts = series([0, 10, 20]);
  assert.equal(nearest(pts, 4).t, 0);
  assert.equal(nearest(pts, 5).t, 0);
  assert.equal(nearest(pts, 6).t, 10);
  assert.equal(nearest(pts, -100).t, 0);
  assert.equal(nearest(pts, 1e9).t, 20);
  assert.equal(nearest(series([7]), 0).t, 7);
});

test("appendSamples: appends in order and drops the oldest past the maximum", () => {
  const s = series([1, 2]);
  assert.equal(appendSamples(s, series([3]), 10), s, "in place");
  assert.deepEqual(s.map((p) => p.t), [1, 2, 3]);
  appendSamples(s, series([4, 5, 6]), 4);
  assert.deepEqual(s.map((p) => p.t), [3, 4, 5, 6]);
  appendSamples(s, [], 4);
  assert.deepEqual(s.map((p) => p.t), [3, 4, 5, 6]);
  appendSamples(s, series([7]), 0);
  assert.deepEqual(s, []);
});

test("thinHalf: every other sample from the first, the newest always kept", () => {
  assert.deepEqual(thinHalf([]), []);
  assert.deepEqual(thinHalf([0]), [0]);
  assert.deepEqual(thinHalf([0, 1]), [0, 1]);
  assert.deepEqual(thinHalf([0, 1, 2, 3, 4]), [0, 2, 4]);
  assert.deepEqual(thinHalf([0, 1, 2, 3, 4, 5]), [0, 2, 4, 5]);
  const many = Array.from({ length: 1201 }, (_, i) => i);
  assert.equal(thinHalf(many).length, 601);
});

test("runColor: by place in the list; past eight colors they repeat, dashed", () => {
  const runs = Array.from({ length: 10 }, (_, i) => ({ name: "r" + i }));
  assert.deepEqual(runColor("r0", runs), { color: RUN_COLORS[0], dashed: false });
  assert.deepEqual(runColor("r7", runs), { color: RUN_COLORS[7], dashed: false });
  assert.deepEqual(runColor("r8", runs), { color: RUN_COLORS[0], dashed: true });
  assert.deepEqual(runColor("r9", runs), { color: RUN_COLORS[1], dashed: true });
});

test("runColor: a run not in the list (or no runs) takes the first color", () => {
  assert.deepEqual(runColor("gone", [{ name: "a" }]), { color: RUN_COLORS[0], dashed: false });
  assert.deepEqual(runColor("a", []), { color: RUN_COLORS[0], dashed: false });
});

test("the chart lists: ids unique, percentage charts scaled 0-100", () => {
  for (const list of [CHARTS, COMPARE]) {
    assert.equal(new Set(list.map((c) => c.id)).size, list.length);
    for (const c of list.filter((c) => c.pct)) assert.deepEqual([c.min, c.max, c.unit], [0, 100, "%"], c.id);
  }
  // The browser test reads these ids.
  assert.deepEqual(COMPARE.map((c) => c.id), ["survival", "train_sps", "loss", "spi"]);
});
