//! What the played episodes come to: the Untouchable task's
//! survival and the fight task's summary (wins with a Wilson interval, stocks and
//! damage per match with 95 % intervals).

use crate::games::matches::EpisodeResult;
use shine_agent::stats::{wilson95, Survival};
use shine_agent::task::{Outcome, Tally};

pub(super) fn summarize(results: &[EpisodeResult]) -> Survival {
    let mut s = Survival::default();
    for r in results {
        s.add(r.survived(), r.frames);
    }
    s
}

/// A mean with the half-width of its 95 % interval (normal approximation).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mean {
    pub mean: f64,
    pub half: f64,
}

impl Mean {
    fn of(xs: impl Iterator<Item = f64> + Clone) -> Mean {
        let n = xs.clone().count() as f64;
        if n == 0.0 {
            return Mean { mean: 0.0, half: 0.0 };
        }
        let mean = xs.clone().sum::<f64>() / n;
        let var = if n > 1.0 { xs.map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0) } else { 0.0 };
        Mean { mean, half: 1.959_963_984_540_054 * (var / n).sqrt() }
    }
}

/// The fight task's report over a set of matches.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FightSummary {
    pub matches: u64,
    pub won: u64,
    pub drawn: u64,
    pub lost: u64,
    pub stocks_taken: Mean,
    pub stocks_lost: Mean,
    /// Percent.
    pub damage_dealt: Mean,
    pub damage_taken: Mean,
}

impl FightSummary {
    pub fn of(results: &[EpisodeResult]) -> FightSummary {
        let count = |o| results.iter().filter(|r| r.tally.outcome() == o).count() as u64;
        let mean = |f: fn(&Tally) -> f64| Mean::of(results.iter().map(move |r| f(&r.tally)));
        FightSummary {
            matches: results.len() as u64,
            won: count(Outcome::Win),
            drawn: count(Outcome::Draw),
            lost: count(Outcome::Loss),
            stocks_taken: mean(|t| t.stocks_taken as f64),
            stocks_lost: mean(|t| t.stocks_lost as f64),
            damage_dealt: mean(|t| t.damage_dealt as f64),
            damage_taken: mean(|t| t.damage_taken as f64),
        }
    }

    /// The share of matches won and its 95 % (Wilson) interval.
    pub fn win_rate(&self) -> (f64, (f64, f64)) {
        (if self.matches == 0 { 0.0 } else { self.won as f64 / self.matches as f64 }, wilson95(self.won, self.matches))
    }
}

impl std::fmt::Display for FightSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (rate, (lo, hi)) = self.win_rate();
        let m = |x: Mean| format!("{:.2} +/- {:.2}", x.mean, x.half);
        let pct = |x: Mean| format!("{:.1} +/- {:.1} %", x.mean, x.half);
        write!(
            f,
            "won {:.1} % ({}/{}), 95 % interval {:.1}-{:.1} %; drawn {}, lost {}; per match: stocks taken {}, stocks lost {}, damage dealt {}, damage taken {}",
            100.0 * rate,
            self.won,
            self.matches,
            100.0 * lo,
            100.0 * hi,
            self.drawn,
            self.lost,
            m(self.stocks_taken),
            m(self.stocks_lost),
            pct(self.damage_dealt),
            pct(self.damage_taken)
        )
    }
}
