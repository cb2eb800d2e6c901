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
//!
//! The train step's device: `shine_graph_captures_total` (CUDA graphs captured of the
//! step a run trains in: one per group it has been in, never one per replay growth),
//! and on a CUDA device `shine_device_allocated_bytes` and `shine_device_reserved_bytes`
//! (the caching allocator's figures, read at each scrape).
//!
//! Every series carries a `run` label (the run's name; `default` on a manager without
//! `[[runs]]`), but the device's memory, which carries `device`; `shine_worker_envs`
//! carries it beside `worker` and `mode`.

use crate::trainer::TrainerStats;
use prometheus::core::{Collector, GenericCounterVec, GenericGaugeVec};
use prometheus::{Encoder, GaugeVec, IntCounterVec, IntGaugeVec, Opts, Registry, TextEncoder};

pub struct Metrics {
    registry: Registry,
    /// Use [`Metrics::accepted`], which keeps the deprecated alias in step.
    transitions_accepted: IntCounterVec,
    experiences_deprecated: IntCounterVec,
    transitions_inserted: IntCounterVec,
    transitions_sampled: IntCounterVec,
    pub uploads: IntCounterVec,
    pub duplicates: IntCounterVec,
    /// Labels: run, reason.
    pub rejected: IntCounterVec,
    train_steps: IntCounterVec,
    model_version: IntGaugeVec,
    replay_size: IntGaugeVec,
    replay_staged: IntGaugeVec,
    ingest_queued: IntGaugeVec,
    wal_bytes: IntGaugeVec,
    wal_segments: IntGaugeVec,
    wal_fsyncs: IntCounterVec,
    workers: IntGaugeVec,
    worker_envs: IntGaugeVec,
    pub episodes: IntCounterVec,
    loss: GaugeVec,
    mean_q: GaugeVec,
    samples_per_insert: GaugeVec,
    graph_captures: IntCounterVec,
    /// Labels: device.
    device_allocated: IntGaugeVec,
    device_reserved: IntGaugeVec,
}

const RUN: &[&str] = &["run"];

impl Metrics {
    pub fn new() -> Metrics {
        let registry = Registry::new();
        fn reg<T: Collector + Clone + 'static>(r: &Registry, m: T) -> T {
            r.register(Box::new(m.clone())).expect("metric names are unique");
            m
        }
        let counter = |name: &str, help: &str| reg(&registry, IntCounterVec::new(Opts::new(name, help), RUN).expect("valid metric"));
        let gauge = |name: &str, help: &str| reg(&registry, IntGaugeVec::new(Opts::new(name, help), RUN).expect("valid metric"));
        let fgauge = |name: &str, help: &str| reg(&registry, GaugeVec::new(Opts::new(name, help), RUN).expect("valid metric"));
        Metrics {
            transitions_accepted: counter("shine_transitions_accepted_total", "Transitions accepted from workers (answered 2xx)"),
            experiences_deprecated: counter("shine_experiences_total", "Deprecated: the same as shine_transitions_accepted_total"),
            transitions_inserted: counter("shine_transitions_inserted_total", "Transitions inserted into the replay by the trainer, over the whole run"),
            transitions_sampled: counter("shine_transitions_sampled_total", "Transitions sampled from the replay for training, over the whole run"),
            uploads: counter("shine_uploads_total", "Experience uploads accepted"),
            duplicates: counter("shine_uploads_duplicate_total", "Uploads dropped as repeats of an accepted upload_id"),
            rejected: reg(
                &registry,
                IntCounterVec::new(Opts::new("shine_uploads_rejected_total", "Experience uploads rejected, by reason"), &["run", "reason"])
                    .expect("valid metric"),
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
                    &["run", "worker", "mode"],
                )
                .expect("valid metric"),
            ),
            episodes: counter("shine_episodes_total", "Finished episodes reported by workers"),
            loss: fgauge("shine_loss", "Recent mean TD loss"),
            mean_q: fgauge("shine_mean_q", "Recent mean Q of the sampled actions"),
            samples_per_insert: fgauge("shine_samples_per_insert", "Transitions sampled for training per transition inserted"),
            graph_captures: counter("shine_graph_captures_total", "CUDA graphs captured of the train step the run trains in (one per group it has been in)"),
            device_allocated: reg(
                &registry,
                IntGaugeVec::new(Opts::new("shine_device_allocated_bytes", "Bytes of the training device's memory in tensors (CUDA)"), &["device"]).expect("valid metric"),
            ),
            device_reserved: reg(
                &registry,
                IntGaugeVec::new(Opts::new("shine_device_reserved_bytes", "Bytes of the training device's memory held by the caching allocator (CUDA)"), &["device"])
                    .expect("valid metric"),
            ),
            registry,
        }
    }

    /// Each registered worker's environments and each run's live workers, from the
    /// fleet (gone workers leave the series). `runs`: every run's name, so a run
    /// without workers shows 0.
    pub fn observe_fleet(&self, workers: &[crate::dashboard::views::WorkerView], runs: &[String]) {
        self.worker_envs.reset();
        self.workers.reset();
        for r in runs {
            self.workers.with_label_values(&[r]).set(0);
        }
        for w in workers.iter().filter(|w| w.state != crate::dashboard::views::WorkerState::Gone) {
            let (n, mode) = match w.heartbeat.envs_active {
                0 => (w.info.envs, "fixed"),
                n => (n, if w.heartbeat.envs_auto { "auto" } else { "fixed" }),
            };
            self.worker_envs.with_label_values(&[&w.run, &w.worker_id.to_string(), mode]).set(i64::from(n));
            self.workers.with_label_values(&[&w.run]).inc();
        }
    }

    /// Bring one run's trainer-owned values up to date. The run's totals are
    /// Prometheus counters: they advance by the difference (and a resumed trainer
    /// starts them at the checkpoint's counts).
    pub fn observe_trainer(&self, run: &str, s: &TrainerStats) {
        // The API's counters of the run exist (at 0) from its first scrape on.
        for c in [&self.transitions_accepted, &self.experiences_deprecated, &self.uploads, &self.duplicates, &self.episodes] {
            c.with_label_values(&[run]);
        }
        for (counter, total) in [
            (&self.train_steps, s.train_steps),
            (&self.transitions_inserted, s.transitions_inserted),
            (&self.transitions_sampled, s.transitions_sampled),
            (&self.graph_captures, s.graph_captures),
        ] {
            let c = counter.with_label_values(&[run]);
            c.inc_by(total.saturating_sub(c.get()));
        }
        let set = |g: &IntGaugeVec, v: u64| g.with_label_values(&[run]).set(v as i64);
        set(&self.replay_size, s.replay_len as u64);
        set(&self.replay_staged, s.replay_staged as u64);
        set(&self.ingest_queued, s.queued);
        set(&self.model_version, s.model_version);
        self.loss.with_label_values(&[run]).set(s.loss);
        self.mean_q.with_label_values(&[run]).set(s.mean_q);
        self.samples_per_insert.with_label_values(&[run]).set(s.samples_per_insert);
    }

    /// The training device's memory, on a CUDA device (nothing on the CPU: its memory is
    /// the process's).
    pub fn observe_device(&self, device: tch::Device) {
        let tch::Device::Cuda(index) = device else { return };
        match crate::trainer::cuda_graph::memory(index) {
            Ok((allocated, reserved)) => {
                let label = format!("cuda:{index}");
                self.device_allocated.with_label_values(&[&label]).set(allocated as i64);
                self.device_reserved.with_label_values(&[&label]).set(reserved as i64);
            }
            Err(e) => tracing::debug!("device memory not read: {e}"),
        }
    }

    /// Bring one run's write-ahead log values up to date.
    pub fn observe_wal(&self, run: &str, w: &crate::storage::wal::WalStats) {
        use std::sync::atomic::Ordering::Relaxed;
        self.wal_bytes.with_label_values(&[run]).set(w.bytes.load(Relaxed) as i64);
        self.wal_segments.with_label_values(&[run]).set(w.segments.load(Relaxed) as i64);
        let f = self.wal_fsyncs.with_label_values(&[run]);
        f.inc_by(w.fsyncs.load(Relaxed).saturating_sub(f.get()));
    }

    /// Count `n` transitions accepted by the API for `run`.
    pub fn accepted(&self, run: &str, n: u64) {
        self.transitions_accepted.with_label_values(&[run]).inc_by(n);
        self.experiences_deprecated.with_label_values(&[run]).inc_by(n);
    }

    /// Transitions accepted for `run` by this process.
    pub fn accepted_total(&self, run: &str) -> u64 {
        self.transitions_accepted.with_label_values(&[run]).get()
    }

    /// Drop every series of a deleted run.
    pub fn forget_run(&self, run: &str) {
        fn drop_run<P: prometheus::core::Atomic>(v: &GenericCounterVec<P>, run: &str) {
            let _ = v.remove_label_values(&[run]);
        }
        fn drop_gauge<P: prometheus::core::Atomic>(v: &GenericGaugeVec<P>, run: &str) {
            let _ = v.remove_label_values(&[run]);
        }
        for c in [
            &self.transitions_accepted,
            &self.experiences_deprecated,
            &self.transitions_inserted,
            &self.transitions_sampled,
            &self.uploads,
            &self.duplicates,
            &self.train_steps,
            &self.wal_fsyncs,
            &self.episodes,
            &self.graph_captures,
        ] {
            drop_run(c, run);
        }
        for g in [&self.model_version, &self.replay_size, &self.replay_staged, &self.ingest_queued, &self.wal_bytes, &self.wal_segments, &self.workers] {
            drop_gauge(g, run);
        }
        for g in [&self.loss, &self.mean_q, &self.samples_per_insert] {
            drop_gauge(g, run);
        }
        // Series with more labels than the run: keep those of other runs.
        for mf in self.rejected.collect() {
            for m in mf.get_metric() {
                let label = |name: &str| m.get_label().iter().find(|l| l.name() == name).map(|l| l.value().to_string());
                if let (Some(r), Some(reason)) = (label("run"), label("reason")) {
                    if r == run {
                        let _ = self.rejected.remove_label_values(&[run, &reason]);
                    }
                }
            }
        }
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
