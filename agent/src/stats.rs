//! Survival rates with a 95 % interval, as `play` and `eval` report them.

/// Wilson score interval at 95 % for `k` successes in `n` trials: well-behaved near
/// 0 % and 100 %, where the normal approximation gives nonsense.
pub fn wilson95(k: u64, n: u64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let z = 1.959_963_984_540_054_f64;
    let (n, p) = (n as f64, k as f64 / n as f64);
    let denom = 1.0 + z * z / n;
    let centre = (p + z * z / (2.0 * n)) / denom;
    let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / denom;
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// Full-minute survival over a set of episodes.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Survival {
    pub episodes: u64,
    pub survived: u64,
    pub frames: u64,
}

impl Survival {
    pub fn add(&mut self, survived: bool, frames: u32) {
        self.episodes += 1;
        self.survived += survived as u64;
        self.frames += frames as u64;
    }
    pub fn rate(&self) -> f64 {
        if self.episodes == 0 {
            0.0
        } else {
            self.survived as f64 / self.episodes as f64
        }
    }
    pub fn interval(&self) -> (f64, f64) {
        wilson95(self.survived, self.episodes)
    }
    pub fn mean_frames(&self) -> f64 {
        if self.episodes == 0 {
            0.0
        } else {
            self.frames as f64 / self.episodes as f64
        }
    }
}

impl std::fmt::Display for Survival {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (lo, hi) = self.interval();
        write!(
            f,
            "full-minute survival {:.1} % ({}/{}), 95 % interval {:.1}-{:.1} %, mean {:.0} frames survived",
            100.0 * self.rate(),
            self.survived,
            self.episodes,
            100.0 * lo,
            100.0 * hi,
            self.mean_frames()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_matches_known_values() {
        // 15/20: the textbook Wilson interval is 0.531..0.888.
        let (lo, hi) = wilson95(15, 20);
        assert!((lo - 0.5313).abs() < 1e-3 && (hi - 0.8881).abs() < 1e-3, "{lo} {hi}");
        let (lo, hi) = wilson95(0, 200);
        assert!(lo < 1e-12, "{lo}");
        assert!(hi > 0.0 && hi < 0.02);
    }
}
