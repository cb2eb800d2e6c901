// What the page shows, shared by the modules: the picked run's samples, workers and
// models, and the runs.
export const state = {
  samples: [], lastT: null, interval: 2, history: 3600, actionSet: "untouchable", workers: [], models: [], best: null,
  // The runs (GET /api/v1/runs, by name), the one picked, where its routes are (relative,
  // like API, so the page also works under a path prefix), and a generation that a run
  // switch bumps so that answers for the previous run still in flight are dropped.
  runs: [], run: null, prefix: null, gen: 0,
};

// Each run's series for the compare charts, from the manager's history: run name ->
// { samples, lastT }; `polling` once the compare poll has started (app.js).
export const compare = { series: {}, polling: false };
