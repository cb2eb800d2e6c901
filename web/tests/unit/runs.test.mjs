// Unit tests of web/runs.js: the run picker's logic and the settings diff.
import { test } from "node:test";
import assert from "node:assert/strict";
import { differing, flatSettings, initialRun, pickerOptions, runStatus, settingKey, settingsHint, settingsShown } from "../../runs.js";

const runs = (...names) => names.map((name) => ({ name }));

test("initialRun: the run ?run= names, if there is one", () => {
  assert.equal(initialRun(runs("a", "default", "b"), "b"), "b");
  assert.equal(initialRun(runs("a", "default", "b"), "a"), "a");
});

test("initialRun: else default, else the first", () => {
  assert.equal(initialRun(runs("a", "default", "b"), "gone"), "default");
  assert.equal(initialRun(runs("a", "default"), null), "default");
  assert.equal(initialRun(runs("b", "a"), "gone"), "b");
  assert.equal(initialRun(runs("b", "a"), null), "b");
  assert.equal(initialRun(runs("b", "a"), ""), "b");
});

test("initialRun: no runs, no run", () => {
  assert.equal(initialRun([], null), undefined);
  assert.equal(initialRun([], "default"), undefined);
});

test("runStatus: stopped wins over paused", () => {
  assert.equal(runStatus({ running: true, paused: false }), "training");
  assert.equal(runStatus({ running: true, paused: true }), "paused");
  assert.equal(runStatus({ running: false, paused: true }), "stopped");
  assert.equal(runStatus({ running: false, paused: false }), "stopped");
  assert.equal(runStatus({}), "stopped");
});

test("pickerOptions: each run by name, its status unless training", () => {
  assert.deepEqual(pickerOptions([]), []);
  assert.deepEqual(pickerOptions([
    { name: "default", running: true, paused: false },
    { name: "fight", running: true, paused: true },
    { name: "old", running: false },
  ]), [["default", "default"], ["fight", "fight (paused)"], ["old", "old (stopped)"]]);
});

test("flatSettings: sections flattened one level, name and paused left out", () => {
  const flat = flatSettings({
    name: "fight", paused: true, weight: 2,
    game: { action_set: "fight", task: "fight" },
    dqn: { lr: 0.0001, n_step: 5, hidden: [256, 256], extra: { deep: 1 }, none: null },
    tags: ["a", "b"], note: null,
  });
  assert.deepEqual(flat, {
    weight: 2, "game.action_set": "fight", "game.task": "fight",
    "dqn.lr": 0.0001, "dqn.n_step": 5, "dqn.hidden": [256, 256], "dqn.extra": { deep: 1 }, "dqn.none": null,
    tags: ["a", "b"], note: null,
  });
});

test("flatSettings: no settings, or empty ones, flatten to nothing", () => {
  assert.deepEqual(flatSettings(undefined), {});
  assert.deepEqual(flatSettings(null), {});
  assert.deepEqual(flatSettings({}), {});
  assert.deepEqual(flatSettings({ name: "x", paused: false, game: {} }), {});
});

test("differing: equal settings differ in nothing", () => {
  const a = { weight: 1, "game.task": "survive", "dqn.hidden": [256, 256] };
  assert.deepEqual(differing([a, { ...a, "dqn.hidden": [256, 256] }]), new Set());
  assert.deepEqual(differing([a]), new Set(), "one run");
  assert.deepEqual(differing([]), new Set(), "no runs");
});

test("differing: the keys whose values are not all the same", () => {
  const a = { weight: 1, "game.task": "survive", "dqn.lr": 1e-4 };
  const b = { weight: 2, "game.task": "survive", "dqn.lr": 1e-4 };
  const c = { weight: 1, "game.task": "fight", "dqn.lr": 1e-4 };
  assert.deepEqual(differing([a, b]), new Set(["weight"]));
  assert.deepEqual(differing([a, b, c]), new Set(["weight", "game.task"]));
});

test("differing: a key only some runs have, lists and types compared exactly", () => {
  assert.deepEqual(differing([{ x: 1 }, {}]), new Set(["x"]));
  assert.deepEqual(differing([{ x: null }, {}]), new Set(["x"]), "null is not missing");
  assert.deepEqual(differing([{ x: [1, 2] }, { x: [2, 1] }]), new Set(["x"]));
  assert.deepEqual(differing([{ x: 1 }, { x: "1" }]), new Set(["x"]));
  assert.deepEqual(differing([{ x: 0 }, { x: false }]), new Set(["x"]));
});

test("settingsShown: only the differing keys, or all, in first-seen order", () => {
  const flats = [{ a: 1, b: 2 }, { a: 1, b: 3, c: 4 }];
  assert.deepEqual(settingsShown(flats, false), { diff: new Set(["b", "c"]), keys: ["b", "c"] });
  assert.deepEqual(settingsShown(flats, true).keys, ["a", "b", "c"]);
  assert.deepEqual(settingsShown([{ a: 1 }, { a: 1 }], false).keys, []);
  assert.deepEqual(settingsShown([], true), { diff: new Set(), keys: [] });
});

test("settingsHint: how many of the first run's settings differ", () => {
  const flats = [{ a: 1, b: 2, c: 3 }, { a: 1, b: 3, c: 4 }];
  assert.equal(settingsHint(flats, differing(flats)), "2 of 3 settings differ");
  assert.equal(settingsHint([{ a: 1 }, { a: 1 }], new Set()), "every setting is the same in all runs");
  assert.equal(settingsHint([], new Set()), "every setting is the same in all runs");
});

test("settingKey: the section before the first dot; top-level keys are the run's", () => {
  assert.deepEqual(settingKey("dqn.lr"), { section: "dqn", name: "lr" });
  assert.deepEqual(settingKey("weight"), { section: "run", name: "weight" });
  assert.deepEqual(settingKey("a.b.c"), { section: "a", name: "b.c" });
});
