// Unit tests of web/league.js's cell contents (the rendering needs a browser).
import { test } from "node:test";
import assert from "node:assert/strict";
import { headToHeadCell, playerCell, ratingCell } from "../../league.js";

test("ratingCell: the rating and its 95 % half width, nothing before a match", () => {
  assert.equal(ratingCell(1687.2, 71.5, 31), "1687 ± 140");
  assert.equal(ratingCell(1500, 350, 0), "–");
  assert.equal(ratingCell(null, null, 3), "–");
});

test("headToHeadCell: the win rate and matches, the record and interval in the tooltip", () => {
  const c = { matches: 9, won: 7, drawn: 0, lost: 2, win_rate: 7 / 9, low: 0.453, high: 0.937 };
  assert.deepEqual(headToHeadCell(c), ["78 % (9)", "7-0-2, 95 % interval 45-94 %"]);
  assert.deepEqual(headToHeadCell(null), ["", ""], "never met");
});

test("playerCell: a model's side, the CPU as scripted", () => {
  assert.equal(playerCell({ player: "fox v812", cpu: null, side: "fox" }), "fox v812 · fox");
  assert.equal(playerCell({ player: "cpu 9", cpu: 9, side: null }), "cpu 9 · scripted CPU");
});
