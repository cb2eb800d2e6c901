// Unit tests of web/tables.js's cell contents (the rendering needs a browser).
import { test } from "node:test";
import assert from "node:assert/strict";
import { bestModel, liveOptions, modelFile, survivalCell, trainsWith, versionCell, wilson, workerCells } from "../../tables.js";

const close = (a, b) => assert.ok(Math.abs(a - b) < 1e-12, `${a} ≉ ${b}`);

test("modelFile: the run's name in it unless it is default", () => {
  assert.equal(modelFile("default", "untouchable", 12), "shine-untouchable-v12.safetensors");
  assert.equal(modelFile("fight", "fight", 3), "shine-fight-fight-v3.safetensors");
  assert.equal(modelFile("default", "fight", 0), "shine-fight-v0.safetensors");
});

test("wilson: the bound at 0 and 1, below the observed share", () => {
  close(wilson({ eval_survival: 0, eval_episodes: 50 }), 0);
  close(wilson({ eval_survival: 1, eval_episodes: 100 }), 1 / (1 + 1.96 ** 2 / 100));
  const w = wilson({ eval_survival: 0.9, eval_episodes: 200 });
  assert.ok(w < 0.9 && w > 0.85, String(w));
});

test("wilson: more episodes, a tighter bound", () => {
  assert.ok(wilson({ eval_survival: 0.95, eval_episodes: 100 }) > wilson({ eval_survival: 1, eval_episodes: 1 }));
  assert.ok(wilson({ eval_survival: 0.9, eval_episodes: 1000 }) > wilson({ eval_survival: 0.9, eval_episodes: 10 }));
});

test("bestModel: none evaluated, none best", () => {
  assert.equal(bestModel([]), null);
  assert.equal(bestModel([{ version: 1, eval_survival: null, eval_episodes: 0 }]), null);
  assert.equal(bestModel([{ version: 1, eval_survival: 1, eval_episodes: 0 }]), null, "no episodes");
});

test("bestModel: ranked by the Wilson bound, not the raw share; the first on a tie", () => {
  const lucky = { version: 3, eval_survival: 1, eval_episodes: 1 };
  const solid = { version: 2, eval_survival: 0.95, eval_episodes: 100 };
  const unevaluated = { version: 4, eval_survival: null, eval_episodes: 0 };
  assert.equal(bestModel([unevaluated, lucky, solid]), solid);
  const twin = { ...solid, version: 1 };
  assert.equal(bestModel([solid, twin]), solid);
  assert.equal(bestModel([twin, solid]), twin);
});

test("survivalCell and versionCell: missing as a dash", () => {
  assert.equal(survivalCell(null), "–");
  assert.equal(survivalCell(0), "0.0 %");
  assert.equal(survivalCell(0.935), "93.5 %");
  assert.equal(versionCell(0), "–");
  assert.equal(versionCell(null), "–");
  assert.equal(versionCell(undefined), "–");
  assert.equal(versionCell(7), "v7");
});

const worker = {
  worker_id: 4, host: "box", backend: "sim", envs: 4, envs_active: 3, envs_auto: true, envs_reason: "knee at 3",
  epsilon: 0.4, model_version: 12, env_fps: 1234.5, skipped_frames: 12345, episodes_cut: 2, transitions: 1234567,
  last_upload_secs: 3, state: "live",
};

test("workerCells: a worker's row", () => {
  assert.deepEqual(workerCells(worker), [
    ["4"], ["box"], ["sim"], ["3 auto", "num", "knee at 3"], ["0.400", "num"], ["v12", "num"], ["1235", "num"],
    ["12,345 · 2 cut", "num"], ["1,234,567", "num"], ["3 s ago"],
  ]);
});

test("workerCells: a fresh worker: nothing known yet", () => {
  const w = { worker_id: 1, envs: 2, epsilon: 0.001, skipped_frames: 0, episodes_cut: 0, transitions: 0, last_upload_secs: null, env_fps: null };
  assert.deepEqual(workerCells(w), [
    ["1"], ["–"], ["–"], ["2", "num", ""], ["1.0e-3", "num"], ["–", "num"], ["–", "num"],
    ["0", "num"], ["0", "num"], ["never"],
  ]);
});

test("liveOptions: the workers that can stream, after the prompt", () => {
  assert.deepEqual(liveOptions([]), [["", "— pick a worker to watch —"]]);
  assert.deepEqual(liveOptions([
    { worker_id: 1, host: "a", epsilon: 0.4, state: "live" },
    { worker_id: 2, host: "b", epsilon: 0.1, state: "gone" },
    { worker_id: 3, epsilon: 0.0004, state: "stale" },
  ]), [["", "— pick a worker to watch —"], ["1", "worker 1 · a · ε 0.400"], ["3", "worker 3 · ? · ε 0.000"]]);
});

test("trainsWith names the other runs of a run's group, or says it trains alone", () => {
  assert.equal(trainsWith({ name: "a", group: ["a", "b", "c"] }), "b, c");
  assert.equal(trainsWith({ name: "b", group: ["a", "b"] }), "a");
  assert.equal(trainsWith({ name: "a", group: null }), "alone");
  assert.equal(trainsWith({ name: "a" }), "alone");
});
