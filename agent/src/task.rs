//! Rewards and episode end.
//!
//! - [`Task::Untouchable`] (the paper): +1/60 for every frame the agent stands in Wait
//!   (0x0E) having chosen "nothing"; the episode is *terminal* as soon as the agent
//!   takes any damage or loses a stock.
//! - [`Task::Fight`]: damage dealt minus damage taken (per 100 %), plus one per stock
//!   taken and minus one per stock lost; terminal when either side is out of stocks.
//!
//! Both end after [`EPISODE_FRAMES`] (one minute). That end is a *time limit*, not a
//! terminal state: learners must still bootstrap from it (CleanRL's classic mistake).

use crate::state::{Observation, PlayerFacts};
use shine_bridge::melee::action;

/// One minute at 60 frames per second.
pub const EPISODE_FRAMES: u32 = 3600;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Task {
    Untouchable,
    Fight,
}

impl Task {
    pub fn name(self) -> &'static str {
        match self {
            Task::Untouchable => "untouchable",
            Task::Fight => "fight",
        }
    }
}

impl std::str::FromStr for Task {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "untouchable" => Ok(Task::Untouchable),
            "fight" => Ok(Task::Fight),
            _ => Err(format!("unknown task {s:?} (expected untouchable or fight)")),
        }
    }
}

/// Why an episode ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EpisodeEnd {
    /// The agent took damage (Untouchable).
    Hit,
    /// The agent lost a stock (Untouchable).
    StockLost,
    /// A side ran out of stocks (Fight).
    GameOver,
    /// [`EPISODE_FRAMES`] passed: truncation, not a terminal state.
    TimeLimit,
}

impl EpisodeEnd {
    /// Terminal states have no future value; a time limit does.
    pub fn is_terminal(self) -> bool {
        self != EpisodeEnd::TimeLimit
    }
}

/// What happened between the two fighters in an episode, whatever the task: what
/// `shine-worker eval` reports for a fight.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Tally {
    /// Stocks the opponent lost.
    pub stocks_taken: u32,
    /// Stocks the agent lost.
    pub stocks_lost: u32,
    /// Percent the opponent took, summed over its stocks.
    pub damage_dealt: f32,
    /// Percent the agent took, summed over its stocks.
    pub damage_taken: f32,
}

/// A match's result for the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    Win,
    Draw,
    Loss,
}

impl Tally {
    /// More stocks taken than lost wins; with as many taken as lost, more damage dealt
    /// than taken wins; the same of both is a draw.
    pub fn outcome(&self) -> Outcome {
        use std::cmp::Ordering::*;
        let by_stocks = self.stocks_taken.cmp(&self.stocks_lost);
        let by_damage = self.damage_dealt.partial_cmp(&self.damage_taken).unwrap_or(Equal);
        match by_stocks.then(by_damage) {
            Greater => Outcome::Win,
            Equal => Outcome::Draw,
            Less => Outcome::Loss,
        }
    }

    /// Account for one frame of one fighter going from `before` to `after`: a lost
    /// stock, or the percent it took within a stock (the reset to 0 on a new stock is
    /// not a heal).
    fn count(stocks: &mut u32, damage: &mut f32, before: &PlayerFacts, after: &PlayerFacts) {
        if after.stocks < before.stocks {
            *stocks += u32::from(before.stocks - after.stocks);
        } else {
            *damage += f32::from(after.percent.saturating_sub(before.percent));
        }
    }
}

/// Reward and end bookkeeping for one episode.
#[derive(Debug, Clone)]
pub struct Episode {
    task: Task,
    start: PlayerFacts,
    prev: Observation,
    frames: u32,
    tally: Tally,
    pub total_reward: f32,
}

impl Episode {
    pub fn new(task: Task, first: &Observation) -> Self {
        Episode { task, start: first.agent, prev: *first, frames: 0, tally: Tally::default(), total_reward: 0.0 }
    }

    pub fn frames(&self) -> u32 {
        self.frames
    }

    /// Stocks and damage so far.
    pub fn tally(&self) -> Tally {
        self.tally
    }

    /// Account for one emulated frame that led to `now`; `chose_nothing` is whether the
    /// macro-action in progress is "nothing".
    pub fn frame(&mut self, now: &Observation, chose_nothing: bool) -> (f32, Option<EpisodeEnd>) {
        self.frames += 1;
        let (reward, end) = match self.task {
            Task::Untouchable => {
                let idle = now.agent.action == Some(action::WAIT) && chose_nothing;
                let end = if now.agent.stocks < self.start.stocks {
                    Some(EpisodeEnd::StockLost)
                } else if now.agent.percent > self.start.percent {
                    Some(EpisodeEnd::Hit)
                } else {
                    None
                };
                (if idle && end.is_none() { 1.0 / 60.0 } else { 0.0 }, end)
            }
            Task::Fight => {
                let swing = |before: &PlayerFacts, after: &PlayerFacts| -> f32 {
                    if after.stocks < before.stocks {
                        -((before.stocks - after.stocks) as f32)
                    } else {
                        // Percent resets on a stock; only count it within a stock.
                        -(after.percent.saturating_sub(before.percent) as f32) / 100.0
                    }
                };
                let r = swing(&self.prev.agent, &now.agent) - swing(&self.prev.opponent, &now.opponent);
                let over = now.agent.stocks == 0 || now.opponent.stocks == 0;
                (r, over.then_some(EpisodeEnd::GameOver))
            }
        };
        let end = end.or((self.frames >= EPISODE_FRAMES).then_some(EpisodeEnd::TimeLimit));
        let t = &mut self.tally;
        Tally::count(&mut t.stocks_lost, &mut t.damage_taken, &self.prev.agent, &now.agent);
        Tally::count(&mut t.stocks_taken, &mut t.damage_dealt, &self.prev.opponent, &now.opponent);
        self.prev = *now;
        self.total_reward += reward;
        (reward, end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::STATE_DIM;

    fn obs(agent_action: u32, agent_pct: u16, agent_stocks: u8, opp_pct: u16, opp_stocks: u8) -> Observation {
        let p = |action, percent, stocks| PlayerFacts { action: Some(action), percent, stocks, ..Default::default() };
        Observation { state: [0.0; STATE_DIM], frame: 0, agent: p(agent_action, agent_pct, agent_stocks), opponent: p(0x0E, opp_pct, opp_stocks) }
    }

    #[test]
    fn untouchable_pays_for_idle_wait_and_ends_on_a_hit() {
        let mut e = Episode::new(Task::Untouchable, &obs(action::WAIT, 0, 4, 0, 4));
        assert_eq!(e.frame(&obs(action::WAIT, 0, 4, 0, 4), true), (1.0 / 60.0, None));
        assert_eq!(e.frame(&obs(action::WAIT, 0, 4, 0, 4), false), (0.0, None), "only when it chose nothing");
        assert_eq!(e.frame(&obs(action::SPOTDODGE, 0, 4, 0, 4), true), (0.0, None));
        assert_eq!(e.frame(&obs(action::DAMAGE_HIGH_1, 9, 4, 0, 4), true), (0.0, Some(EpisodeEnd::Hit)));
        let mut e = Episode::new(Task::Untouchable, &obs(action::WAIT, 0, 4, 0, 4));
        assert_eq!(e.frame(&obs(action::DEAD_DOWN, 0, 3, 0, 4), true).1, Some(EpisodeEnd::StockLost));
    }

    #[test]
    fn time_limit_is_not_terminal() {
        let o = obs(action::WAIT, 0, 4, 0, 4);
        let mut e = Episode::new(Task::Untouchable, &o);
        for _ in 0..EPISODE_FRAMES - 1 {
            assert_eq!(e.frame(&o, true).1, None);
        }
        let end = e.frame(&o, true).1.unwrap();
        assert_eq!(end, EpisodeEnd::TimeLimit);
        assert!(!end.is_terminal() && EpisodeEnd::Hit.is_terminal());
        assert!((e.total_reward - 60.0).abs() < 1e-3);
    }

    #[test]
    fn fight_reward_counts_damage_and_stocks() {
        let mut e = Episode::new(Task::Fight, &obs(action::WAIT, 0, 4, 0, 4));
        let (r, end) = e.frame(&obs(action::WAIT, 10, 4, 30, 4), false);
        assert!((r - 0.2).abs() < 1e-6 && end.is_none());
        // Opponent loses a stock: +1, its percent reset is not a "heal".
        let (r, _) = e.frame(&obs(action::WAIT, 10, 4, 0, 3), false);
        assert!((r - 1.0).abs() < 1e-6);
        let (r, end) = e.frame(&obs(action::WAIT, 0, 0, 0, 3), false);
        assert!((r + 4.0).abs() < 1e-6);
        assert_eq!(end, Some(EpisodeEnd::GameOver));
        // 30 % dealt before the opponent's stock went (its reset is not counted), 10 %
        // taken before the agent's four stocks went.
        assert_eq!(e.tally(), Tally { stocks_taken: 1, stocks_lost: 4, damage_dealt: 30.0, damage_taken: 10.0 });
        assert_eq!(e.tally().outcome(), Outcome::Loss);
    }

    #[test]
    fn the_outcome_is_stocks_first_then_damage() {
        let t = |taken, lost, dealt, took| Tally { stocks_taken: taken, stocks_lost: lost, damage_dealt: dealt, damage_taken: took };
        assert_eq!(t(2, 1, 0.0, 90.0).outcome(), Outcome::Win);
        assert_eq!(t(1, 1, 40.0, 30.0).outcome(), Outcome::Win);
        assert_eq!(t(1, 1, 30.0, 30.0).outcome(), Outcome::Draw);
        assert_eq!(t(0, 0, 0.0, 0.0).outcome(), Outcome::Draw);
        assert_eq!(t(0, 0, 10.0, 12.0).outcome(), Outcome::Loss);
        assert_eq!(t(0, 1, 200.0, 0.0).outcome(), Outcome::Loss);
    }

    #[test]
    fn the_tally_is_kept_in_the_untouchable_task_too() {
        let mut e = Episode::new(Task::Untouchable, &obs(action::WAIT, 0, 4, 0, 4));
        e.frame(&obs(action::WAIT, 0, 4, 12, 4), true);
        let (_, end) = e.frame(&obs(action::DAMAGE_HIGH_1, 7, 4, 12, 4), true);
        assert_eq!(end, Some(EpisodeEnd::Hit));
        assert_eq!(e.tally(), Tally { stocks_taken: 0, stocks_lost: 0, damage_dealt: 12.0, damage_taken: 7.0 });
    }
}
