// Unit tests of web/stage.js's geometry (the drawing needs a browser).
import { test } from "node:test";
import assert from "node:assert/strict";
import { EDGE, VIEW, camera, cpuLabelLift, isDead, offCamera, stars, stocksText } from "../../stage.js";

test("camera: the view's corners are the canvas's, y up", () => {
  const { X, Y, sx, sy } = camera(960, 540);
  assert.equal(X(VIEW.x0), 0);
  assert.equal(X(VIEW.x1), 960);
  assert.equal(Y(VIEW.y0), 540);
  assert.equal(Y(VIEW.y1), 0);
  assert.equal(X(0), 480, "the stage's centre in the middle");
  assert.equal(sx, 960 / 300);
  assert.equal(sy, 540 / 169);
  assert.ok(X(-EDGE) > 0 && X(EDGE) < 960, "both ledges in view");
});

test("camera: a zero-sized canvas maps everything to 0", () => {
  const { X, Y } = camera(0, 0);
  assert.equal(X(100), 0);
  assert.equal(Y(100), 0);
});

test("stars: the same 70 every time, in the upper part of the sky", () => {
  const a = stars(960, 540);
  assert.equal(a.length, 70);
  assert.deepEqual(a, stars(960, 540));
  for (const [x, y] of a) assert.ok(x >= 0 && x < 960 && y >= 0 && y < 540 * 0.62, `${x},${y}`);
  assert.ok(new Set(a.map(([x]) => Math.round(x))).size > 50, "spread out");
});

test("isDead: no action state, or Melee's dead states 0..0x0a", () => {
  assert.equal(isDead({ action: null }), true);
  assert.equal(isDead({ action: 0 }), true);
  assert.equal(isDead({ action: 0x0a }), true);
  assert.equal(isDead({ action: 0x0b }), false);
  assert.equal(isDead({ action: 0x0e }), false);
  assert.equal(isDead({}), false, "a frame without the field");
});

test("offCamera: on the canvas (edges included) no marker", () => {
  assert.equal(offCamera(100, 100, 960, 540), null);
  assert.equal(offCamera(0, 0, 960, 540), null);
  assert.equal(offCamera(960, 540, 960, 540), null);
});

test("offCamera: a marker 14 px inside the nearest edge, pointing out at the fighter", () => {
  assert.deepEqual(offCamera(-50, 200, 960, 540), { cx: 14, cy: 200, angle: Math.PI });
  assert.deepEqual(offCamera(2000, 200, 960, 540), { cx: 946, cy: 200, angle: 0 });
  assert.deepEqual(offCamera(480, -1e6, 960, 540), { cx: 480, cy: 14, angle: -Math.PI / 2 });
  const corner = offCamera(1000, 600, 960, 540);
  assert.deepEqual([corner.cx, corner.cy], [946, 526]);
  assert.ok(corner.angle > 0 && corner.angle < Math.PI / 2);
});

test("cpuLabelLift: the CPU's label goes up when the two stand close", () => {
  const { X, Y } = camera(960, 540);
  const at = (ax, ay, ox, oy) => cpuLabelLift({ agent: { x: ax, y: ay }, opponent: { x: ox, y: oy } }, X, Y);
  assert.equal(at(0, 0, 0, 0), 30);
  assert.equal(at(0, 0, 20, 5), 30);
  assert.equal(at(-40, 0, 40, 0), 0, "far apart");
  assert.equal(at(0, 0, 0, 40), 0, "one high above the other");
});

test("stocksText: singular and plural", () => {
  assert.equal(stocksText(0), "0 stocks");
  assert.equal(stocksText(1), "1 stock");
  assert.equal(stocksText(4), "4 stocks");
});
