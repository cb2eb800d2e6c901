//! Prometheus metrics (`GET /metrics`), with the `prometheus` crate and a registry of
//! our own (no process-global state, so tests can run managers side by side).
//!
//! One vocabulary for the life of a transition, used alike here, in the stats samples
//! (`GET /api/v1/stats`), on the dashboard and in the docs:
//! - **accepted**: answered 2xx by the API (`shine_transitions_accepted_total`);
//! - **inserted**: put into the replay by the trainer (`shine_transitions_inserted_total`,
//!   over the whole run, across restarts);
//! - **sampled**: drawn from the replay for a train step (`shine_transitions_sampled_total`);
//! - **trained**: train steps taken (`shine_train_steps_total`).
//!
//! Also `shine_model_version`, `shine_replay_size` (rows sampling can draw),
//! `shine_replay_staged` (rows waiting for the next block write), `shine_ingest_queued`,
//! `shine_wal_bytes`, `shine_wal_segments`, `shine_wal_fsyncs_total`,
//! `shine_uploads_rejected_total{reason}`
//! (reason: the wire format's labels — truncated, magic, version, dims, header, count,
//! compression, nan, values — and auth, oversized, content_type, busy, storage_full),
//! `shine_workers`.
//! `shine_experiences_total` is the deprecated name of `shine_transitions_accepted_total`,
//! kept with the same value for one release. Values owned by the trainer are refreshed
//! from its stats at every scrape.

use crate::trainer::TrainerStats;
use prometheus::{Encoder, Gauge, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder};

pub struct Metrics {
    registry: Registry,
    /// Use [`Metrics::accepted`], which keeps the deprecated alias in step.
    pub transitions_accepted: IntCounter,
    experiences_deprecated: IntCounter,
    pub transitions_inserted: IntCounter,
    pub transitions_sampled: IntCounter,
    pub uploads: IntCounter,
    pub duplicates: IntCounter,
    pub rejected: IntCounterVec,
    pub train_steps: IntCounter,
    pub model_version: IntGauge,
    pub replay_size: IntGauge,
    pub replay_staged: IntGauge,
    pub ingest_queued: IntGauge,
    pub wal_bytes: IntGauge,
    pub wal_segments: IntGauge,
    pub wal_fsyncs: IntCounter,
    pub workers: IntGauge,
    pub worker_envs: IntGaugeVec,
    pub episodes: IntCounter,
    pub loss: Gauge,
    pub mean_q: Gauge,
    pub samples_per_insert: Gauge,
}

impl Metrics {
    pub fn new() -> Metrics {
        let registry = Registry::new();
        fn reg<T: prometheus::core::Collector + Clone + 'static>(r: &Registry, m: T) -> T {
            r.register(Box::new(m.clone())).expect("metric names are unique");
            m
        }
        let counter = |name: &str, help: &str| reg(&registry, IntCounter::new(name, help).expect("valid metric"));
        let gauge = |name: &str, help: &str| reg(&registry, IntGauge::new(name, help).expect("valid metric"));
        let fgauge = |name: &str, help: &str| reg(&registry, Gauge::new(name, help).expect("valid metric"));
        Metrics {
            transitions_accepted: counter("shine_transitions_accepted_total", "Transitions accepted from workers (answered 2xx)"),
            experiences_deprecated: counter("shine_experiences_total", "Deprecated: the same as shine_transitions_accepted_total"),
            transitions_inserted: counter("shine_transitions_inserted_total", "Transitions inserted into the replay by the trainer, over the whole run"),
            transitions_sampled: counter("shine_transitions_sampled_total", "Transitions sampled from the replay for training, over the whole run"),
            uploads: counter("shine_uploads_total", "Experience uploads accepted"),
            duplicates: counter("shine_uploads_duplicate_total", "Uploads dropped as repeats of an accepted upload_id"),
            rejected: reg(
                &registry,
                IntCounterVec::new(Opts::new("shine_uploads_rejected_total", "Experience uploads rejected, by reason"), &["reason"]).expect("valid metric"),
            ),
            train_steps: counter("shine_train_steps_total", "Gradient steps taken by the trainer"),
            model_version: gauge("shine_model_version", "Version of the latest published model"),
            replay_size: gauge("shine_replay_size", "Transitions in the replay that sampling can draw (staged rows not included)"),
            replay_staged: gauge("shine_replay_staged", "Transitions staged in host memory for the replay's next block write"),
            ingest_queued: gauge("shine_ingest_queued", "Transitions accepted and queued for the replay"),
            wal_bytes: gauge("shine_wal_bytes", "Bytes of the write-ahead log on disk"),
            wal_segments: gauge("shine_wal_segments", "Segment files of the write-ahead log"),
            wal_fsyncs: counter("shine_wal_fsyncs_total", "Group commits of the write-ahead log (one fsync each)"),
            workers: gauge("shine_workers", "Live workers"),
            worker_envs: reg(
                &registry,
                IntGaugeVec::new(
                    Opts::new("shine_worker_envs", "Environments each registered worker plays now (mode: auto when --envs auto chose the count, else fixed)"),
                    &["worker", "mode"],
                )
                .expect("valid metric"),
            ),
            episodes: counter("shine_episodes_total", "Finished episodes reported by workers"),
            loss: fgauge("shine_loss", "Recent mean TD loss"),
            mean_q: fgauge("shine_mean_q", "Recent mean Q of the sampled actions"),
            samples_per_insert: fgauge("shine_samples_per_insert", "Transitions sampled for training per transition inserted"),
            registry,
        }
    }

    /// Each registered worker's environments, from the fleet (gone workers leave the
    /// series).
    pub fn observe_fleet(&self, workers: &[crate::fleet::WorkerView]) {
        self.worker_envs.reset();
        for w in workers.iter().filter(|w| w.state != crate::fleet::WorkerState::Gone) {
            let (n, mode) = match w.heartbeat.envs_active {
                0 => (w.info.envs, "fixed"),
                n => (n, if w.heartbeat.envs_auto { "auto" } else { "fixed" }),
            };
            self.worker_envs.with_label_values(&[&w.worker_id.to_string(), mode]).set(i64::from(n));
        }
    }

    /// Bring the trainer-owned values up to date. The run's totals are Prometheus
    /// counters: they advance by the difference (and a resumed trainer starts them at
    /// the checkpoint's counts).
    pub fn observe_trainer(&self, s: &TrainerStats) {
        for (counter, total) in
            [(&self.train_steps, s.train_steps), (&self.transitions_inserted, s.transitions_inserted), (&self.transitions_sampled, s.transitions_sampled)]
        {
            counter.inc_by(total.saturating_sub(counter.get()));
        }
        self.replay_size.set(s.replay_len as i64);
        self.replay_staged.set(s.replay_staged as i64);
        self.ingest_queued.set(s.queued as i64);
        self.model_version.set(s.model_version as i64);
        self.loss.set(s.loss);
        self.mean_q.set(s.mean_q);
        self.samples_per_insert.set(s.samples_per_insert);
    }

    /// Bring the write-ahead log's values up to date.
    pub fn observe_wal(&self, w: &crate::wal::WalStats) {
        use std::sync::atomic::Ordering::Relaxed;
        self.wal_bytes.set(w.bytes.load(Relaxed) as i64);
        self.wal_segments.set(w.segments.load(Relaxed) as i64);
        self.wal_fsyncs.inc_by(w.fsyncs.load(Relaxed).saturating_sub(self.wal_fsyncs.get()));
    }

    /// Count `n` transitions accepted by the API.
    pub fn accepted(&self, n: u64) {
        self.transitions_accepted.inc_by(n);
        self.experiences_deprecated.inc_by(n);
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        TextEncoder::new().encode(&self.registry.gather(), &mut out).expect("text encoding into a Vec");
        String::from_utf8(out).expect("prometheus text is UTF-8")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}
