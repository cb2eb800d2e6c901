// play.js's pure parts: keys and gamepads to the pad the manager takes (docs/api.md,
// "Play"), the socket's URL, the result line.
import { test } from "node:test";
import assert from "node:assert/strict";
import { DEFAULT_KEYS, matchLength, mergePads, padFromGamepad, padFromKeys, playSocketUrl, resultLine, samePad } from "../../play.js";

test("held keys make the pad: the stick from the arrows, opposite keys cancel", () => {
  const held = new Set(["ArrowRight", "KeyJ", "Space"]);
  assert.deepEqual(padFromKeys(held, DEFAULT_KEYS), { stick: [1, 0], buttons: ["a", "x"] });
  assert.deepEqual(padFromKeys(new Set(["ArrowLeft", "ArrowRight", "ArrowUp"]), DEFAULT_KEYS), { stick: [0, 1], buttons: [] });
  assert.deepEqual(padFromKeys(new Set(["ArrowDown", "KeyL"]), DEFAULT_KEYS), { stick: [0, -1], buttons: ["l"] });
  // A key changed on the page does what its new binding says.
  assert.deepEqual(padFromKeys(new Set(["KeyD"]), { ...DEFAULT_KEYS, right: "KeyD" }), { stick: [1, 0], buttons: [] });
});

test("a gamepad's standard mapping: y up, a dead zone, both jump buttons, any shoulder shields", () => {
  const gp = (axes, pressed) => ({ axes, buttons: Array.from({ length: 17 }, (_, i) => ({ pressed: pressed.includes(i), value: pressed.includes(i) ? 1 : 0 })) });
  assert.deepEqual(padFromGamepad(gp([0.1, -0.9], [0])), { stick: [0, 0.9], buttons: ["a"] });
  assert.deepEqual(padFromGamepad(gp([-1, 0], [3, 7, 9])), { stick: [-1, 0], buttons: ["x", "l", "start"] });
  assert.equal(padFromGamepad(null), null);
});

test("keys and a gamepad held together: the sticks add up, clamped; the buttons join", () => {
  const a = { stick: [1, 0], buttons: ["a"] }, b = { stick: [0.5, 1], buttons: ["x", "a"] };
  assert.deepEqual(mergePads(a, b), { stick: [1, 1], buttons: ["a", "x"] });
  assert.equal(mergePads(a, null), a);
  assert.ok(samePad(a, { stick: [1, 0], buttons: ["a"] }));
  assert.ok(!samePad(a, b) && !samePad(a, null));
});

test("the play socket is next to the page, on the run's prefix, with the client and the token", () => {
  const loc = { protocol: "https:", host: "m.example:8080", pathname: "/shine/index.html" };
  assert.equal(playSocketUrl(loc, "api/v1/runs/fight", 12, "tab-a b", "T"), "wss://m.example:8080/shine/api/v1/runs/fight/play/12?client=tab-a%20b&token=T");
  assert.equal(playSocketUrl({ protocol: "http:", host: "h", pathname: "/" }, "api/v1", 3, "c", null), "ws://h/api/v1/play/3?client=c");
});

test("the result line says who won, how, the stocks and the damage", () => {
  const r = { ending: "stocks", winner: "you", frames: 5400, bot_stocks: 0, your_stocks: 2, bot_damage_dealt: 210.4, your_damage_dealt: 388.6 };
  assert.equal(resultLine(r), "You won: stocks you 2, bot 0; damage dealt you 389 %, bot 210 % (90.0 s)");
  assert.match(resultLine({ ...r, winner: "bot", ending: "time" }), /^The bot won on time/);
  assert.match(resultLine({ ...r, winner: "draw", ending: "idle" }), /^A draw \(a minute without input\)/);
});

test("a match's length: whole minutes in minutes, anything else in seconds", () => {
  assert.equal(matchLength(480), "8 minutes");
  assert.equal(matchLength(60), "1 minute");
  assert.equal(matchLength(10), "10 s");
  assert.equal(matchLength(90), "90 s");
});
