//! The rate limiter: transitions trained per transition inserted, held near a target.

/// Keeps transitions trained per transition inserted near a target, from both sides
/// (Reverb's `SampleToInsertRatio`): [`RateLimiter::allows`] holds the learner back,
/// [`RateLimiter::takes_inserts`] the inserts.
#[derive(Debug, Clone)]
pub struct RateLimiter {
    samples_per_insert: f64,
    slack: u64,
    insert_slack: u64,
    inserted: u64,
    sampled: u64,
}

impl RateLimiter {
    pub fn new(samples_per_insert: f64, slack: u64, insert_slack: u64) -> Self {
        RateLimiter { samples_per_insert, slack, insert_slack, inserted: 0, sampled: 0 }
    }
    pub fn inserted(&mut self, n: u64) {
        self.inserted += n;
    }
    pub fn sampled(&mut self, n: u64) {
        self.sampled += n;
    }
    /// Whether a batch of `batch` may be trained now without going over budget.
    pub fn allows(&self, batch: u64) -> bool {
        self.samples_per_insert == 0.0 || (self.sampled + batch) as f64 <= self.samples_per_insert * self.inserted as f64 + self.slack as f64
    }
    /// Whether more transitions may go in: false once the inserts are more than
    /// `insert_slack` transitions ahead of what the learner has trained at the target
    /// ratio. Only asked once training has started, so the learner can always catch up
    /// (then [`RateLimiter::allows`] is true) and the two sides never wait on each other.
    pub fn takes_inserts(&self) -> bool {
        let spi = self.samples_per_insert;
        spi == 0.0 || self.insert_slack == 0 || spi * self.inserted as f64 <= self.sampled as f64 + spi * self.insert_slack as f64
    }
    /// The ratio so far (0 before anything was inserted).
    pub fn actual(&self) -> f64 {
        if self.inserted == 0 {
            0.0
        } else {
            self.sampled as f64 / self.inserted as f64
        }
    }
}
