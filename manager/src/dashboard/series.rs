//! The dashboard's time series: one [`Sample`] every `[stats] interval_secs`, the last
//! `[stats] history` kept, served by `GET /api/v1/stats`.
//!
//! A sample (the `sampler` module takes them) combines the trainer's own counters
//! (`TrainerStats`), the API's accepted counter, the fleet, and the recent finished episodes that workers report (training
//! episodes for reward and survival, evaluation episodes — greedy, at the top CPU
//! level — for the evaluation survival the paper reports). Rates are differences
//! between consecutive samples, so they need nothing from the trainer but counters.

use serde::{Deserialize, Serialize};
use shine_agent::protocol::EpisodeReport;
use std::collections::VecDeque;

/// One point of the series. Names match the Prometheus metrics where both exist.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Sample {
    /// Unix time in seconds.
    pub t: f64,
    /// Transitions accepted (answered 2xx) per second since the previous sample.
    pub accepted_per_sec: f64,
    /// Transitions accepted by this manager process.
    pub transitions_accepted: u64,
    /// Transitions the trainer has inserted into the replay, over the whole run
    /// (continues across restarts).
    pub transitions_inserted: u64,
    /// Transitions sampled for training, over the whole run.
    pub transitions_sampled: u64,
    /// Train steps taken, over the whole run.
    pub train_steps: u64,
    pub train_steps_per_sec: f64,
    /// Mean TD loss of the latest step read back (null before training starts).
    pub loss: Option<f64>,
    pub mean_q: Option<f64>,
    /// Transitions in the replay that sampling can draw.
    pub replay_size: u64,
    /// Transitions staged in host memory for the replay's next block write.
    pub replay_staged: u64,
    /// Transitions accepted and queued for the replay.
    pub queued: u64,
    /// Bytes of the write-ahead log on disk.
    pub wal_bytes: u64,
    /// `replay_size / capacity`, 0..1.
    pub replay_fill: f64,
    pub samples_per_insert: f64,
    pub model_version: u64,
    pub workers: u64,
    /// Mean reward of the recent training episodes (null before the first).
    pub episode_reward: Option<f64>,
    /// Full-minute survival of the recent training episodes.
    pub train_survival: Option<f64>,
    /// Full-minute survival of the recent evaluation episodes.
    pub eval_survival: Option<f64>,
    /// Mean age of the transitions accepted since the previous sample, in model
    /// versions behind the latest (0: played by the newest model; null: none arrived).
    pub data_age: Option<f64>,
    /// The running sums behind `data_age` (not served).
    #[serde(skip)]
    pub age_sum: u64,
    #[serde(skip)]
    pub age_count: u64,
}

/// A bounded ring of samples.
pub struct Series {
    cap: usize,
    points: VecDeque<Sample>,
}

impl Series {
    pub fn new(cap: usize) -> Self {
        Series { cap: cap.max(1), points: VecDeque::new() }
    }
    pub fn push(&mut self, s: Sample) {
        if self.points.len() == self.cap {
            self.points.pop_front();
        }
        self.points.push_back(s);
    }
    /// Samples strictly after `since` (all when `None`).
    pub fn since(&self, since: Option<f64>) -> Vec<Sample> {
        self.points.iter().filter(|p| since.is_none_or(|s| p.t > s)).cloned().collect()
    }
    pub fn last(&self) -> Option<&Sample> {
        self.points.back()
    }
}

/// The recent training and evaluation episodes, each window bounded.
pub struct EpisodeLog {
    cap: usize,
    train: VecDeque<EpisodeReport>,
    eval: VecDeque<EpisodeReport>,
    pub total: u64,
    pub eval_total: u64,
}

impl EpisodeLog {
    pub fn new(cap: usize) -> Self {
        EpisodeLog { cap: cap.max(1), train: VecDeque::new(), eval: VecDeque::new(), total: 0, eval_total: 0 }
    }
    pub fn add(&mut self, e: EpisodeReport) {
        self.total += 1;
        self.eval_total += e.eval as u64;
        self.preload(e);
    }
    /// Put an episode of an earlier life (the history) into the windows, without
    /// counting it in this process's totals.
    pub fn preload(&mut self, e: EpisodeReport) {
        let q = if e.eval { &mut self.eval } else { &mut self.train };
        if q.len() == self.cap {
            q.pop_front();
        }
        q.push_back(e);
    }
    fn mean(q: &VecDeque<EpisodeReport>, f: impl Fn(&EpisodeReport) -> f64) -> Option<f64> {
        (!q.is_empty()).then(|| q.iter().map(f).sum::<f64>() / q.len() as f64)
    }
    pub fn train_reward(&self) -> Option<f64> {
        Self::mean(&self.train, |e| e.reward)
    }
    pub fn train_survival(&self) -> Option<f64> {
        Self::mean(&self.train, |e| e.survived as u8 as f64)
    }
    pub fn eval_survival(&self) -> Option<f64> {
        Self::mean(&self.eval, |e| e.survived as u8 as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_is_bounded_and_filters_by_time() {
        let mut s = Series::new(3);
        for t in 0..5 {
            s.push(Sample { t: t as f64, ..Default::default() });
        }
        let ts: Vec<f64> = s.since(None).iter().map(|p| p.t).collect();
        assert_eq!(ts, vec![2.0, 3.0, 4.0]);
        assert_eq!(s.since(Some(3.0)).len(), 1);
    }

    /// A client passes a sample's `t` back as `?since=`; if JSON parsing rounded it
    /// (serde_json does, by 1 ulp for ~10 % of such times, unless `float_roundtrip`
    /// is on), the sample itself would come back as "newer" (a CI failure once).
    #[test]
    fn sample_times_survive_a_json_round_trip_exactly() {
        for i in 0..10_000u32 {
            let t = 1_763_900_000.0 + f64::from(i) * 0.100_012_3;
            let json = serde_json::to_string(&Sample { t, ..Default::default() }).unwrap();
            let back: Sample = serde_json::from_str(&json).unwrap();
            assert_eq!(back.t.to_bits(), t.to_bits(), "{json}");
        }
    }

    #[test]
    fn episode_windows_separate_eval_from_training() {
        let mut log = EpisodeLog::new(2);
        let ep = |reward: f64, survived, eval| EpisodeReport { frames: 3600, reward, survived, eval, cpu_level: 9, model_version: 1 };
        log.add(ep(1.0, true, false));
        log.add(ep(3.0, false, false));
        log.add(ep(5.0, false, false));
        log.add(ep(0.0, true, true));
        assert_eq!(log.train_reward(), Some(4.0), "window of 2 keeps the last two");
        assert_eq!(log.train_survival(), Some(0.0));
        assert_eq!(log.eval_survival(), Some(1.0));
        assert_eq!((log.total, log.eval_total), (4, 1));
    }
}
