// The runs a manager trains: which one the page shows (the run picker in the header),
// their status, and their settings compared (flattened, and which differ; the runs and
// settings tables in tables.js draw them). All pure but renderRunPicker
// (web/tests/unit/runs.test.mjs).
import { $, el } from "./dom.js";
import { state } from "./state.js";

// The run the page opens with: `wanted` (from ?run=) if there is such a run, else
// `default` (the one run of a manager without [[runs]]), else the first; and the one it
// falls back to when the picked run is deleted (wanted null). undefined: no runs.
export function initialRun(runs, wanted) {
  const names = runs.map((r) => r.name);
  if (wanted !== null && names.includes(wanted)) return wanted;
  return names.includes("default") ? "default" : names[0];
}

// What a run does now: "training", "paused" or "stopped".
export function runStatus(r) {
  return !r.running ? "stopped" : r.paused ? "paused" : "training";
}

// The picker's options, [value, text]: each run by name, with its status unless training.
export const pickerOptions = (runs) => runs.map((r) => [r.name, r.name + (runStatus(r) === "training" ? "" : " (" + runStatus(r) + ")")]);

export function renderRunPicker() {
  const sel = $("run-select");
  const opts = pickerOptions(state.runs);
  const sig = JSON.stringify(opts);
  if (sel.dataset.sig !== sig) {
    sel.innerHTML = "";
    for (const [v, t] of opts) { const o = el("option", null, t); o.value = v; sel.append(o); }
    sel.dataset.sig = sig;
  }
  if (state.run !== null) sel.value = state.run;
}

// A run's settings as flat keys: `weight`, then each section's (game.task, dqn.lr, ...).
// `name` is the run's own and `paused` only how it was asked to start: the status
// column says what it does now. One level deep: a section's objects stay values.
export function flatSettings(settings) {
  const out = {};
  for (const [k, v] of Object.entries(settings || {})) {
    if (k === "name" || k === "paused") continue;
    if (v !== null && typeof v === "object" && !Array.isArray(v)) {
      for (const [k2, v2] of Object.entries(v)) out[k + "." + k2] = v2;
    } else out[k] = v;
  }
  return out;
}

// Keys whose values are not the same in every run (compared as JSON; a key some runs
// lack differs).
export function differing(flats) {
  const keys = [...new Set(flats.flatMap((f) => Object.keys(f)))];
  return new Set(keys.filter((k) => new Set(flats.map((f) => JSON.stringify(f[k]))).size > 1));
}

// The settings table's rows: every key of any run in first-seen order, or with `all`
// false only those that differ; and `diff`, the keys that differ.
export function settingsShown(flats, all) {
  const diff = differing(flats);
  const keys = [...new Set(flats.flatMap((f) => Object.keys(f)))].filter((k) => all || diff.has(k));
  return { diff, keys };
}

// The line above the settings table: how many of the first run's settings differ.
export function settingsHint(flats, diff) {
  return diff.size ? diff.size + " of " + Object.keys(flats[0] || {}).length + " settings differ" : "every setting is the same in all runs";
}

// A flat key's section and name: "dqn.lr" -> dqn, lr; "weight" -> run, weight.
export function settingKey(k) {
  const dot = k.indexOf(".");
  return dot < 0 ? { section: "run", name: k } : { section: k.slice(0, dot), name: k.slice(dot + 1) };
}
