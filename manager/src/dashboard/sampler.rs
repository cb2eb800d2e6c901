//! Taking the dashboard's samples ([`Sample`]) of a run: from its trainer counters, the
//! API's metrics, the fleet and the recent episodes. The server's sampler task takes one
//! of every run every `[stats] interval_secs` (`crate::server`), and `GET
//! /api/v1/stats` one more, now.

use crate::dashboard::series::Sample;
use crate::fleet::Fleet;
use crate::metrics::Metrics;
use crate::run::Run;
use shine_agent::durable::unix_now;
use std::sync::atomic::Ordering::Relaxed;

/// Take one sample of `run` now; `prev` (its last sample) gives the rates. `fleet`: as
/// the caller swept it (its workers that timed out gone). Brings `metrics`' trainer and
/// write-ahead log gauges up to date on the way.
pub fn sample(run: &Run, metrics: &Metrics, fleet: &Fleet, prev: Option<&Sample>) -> Sample {
    let t = unix_now();
    let ts = run.stats();
    metrics.observe_trainer(run.name(), &ts);
    metrics.observe_wal(run.name(), run.wal_stats());
    let workers = fleet.live_in(run.name()) as u64;
    let transitions_accepted = metrics.accepted_total(run.name());
    let (episode_reward, train_survival, eval_survival) = {
        let e = run.episodes().lock().expect("episodes lock");
        (e.train_reward(), e.train_survival(), e.eval_survival())
    };
    let capacity = run.settings().replay.capacity.max(1) as f64;
    let mut s = Sample { t, transitions_accepted, workers, episode_reward, train_survival, eval_survival, ..Default::default() };
    s.train_steps = ts.train_steps;
    s.transitions_inserted = ts.transitions_inserted;
    s.transitions_sampled = ts.transitions_sampled;
    // NaN before the first train step: null in JSON.
    s.loss = ts.loss.is_finite().then_some(ts.loss);
    s.mean_q = ts.mean_q.is_finite().then_some(ts.mean_q);
    s.replay_size = ts.replay_len as u64;
    s.replay_staged = ts.replay_staged as u64;
    s.queued = ts.queued;
    s.wal_bytes = run.wal_stats().bytes.load(Relaxed);
    s.replay_fill = ts.replay_len as f64 / capacity;
    s.samples_per_insert = ts.samples_per_insert;
    s.model_version = ts.model_version;
    (s.age_sum, s.age_count) = run.data_age();
    if let Some(p) = prev {
        let n = s.age_count.saturating_sub(p.age_count);
        s.data_age = (n > 0).then(|| s.age_sum.saturating_sub(p.age_sum) as f64 / n as f64);
        let dt = t - p.t;
        if dt > 0.0 {
            s.accepted_per_sec = transitions_accepted.saturating_sub(p.transitions_accepted) as f64 / dt;
            s.train_steps_per_sec = s.train_steps.saturating_sub(p.train_steps) as f64 / dt;
        }
    }
    s
}
