//! n-step transitions: how an environment's decisions become the wire format's
//! 57-float rows (`state, action, reward, next state, terminal`).

use shine_agent::experience::{col, TRANSITION_FLOATS};
use shine_agent::{EpisodeEnd, STATE_DIM};
use std::collections::VecDeque;

/// One transition: state (27), action, reward, next state (27), terminal.
pub type Row = [f32; TRANSITION_FLOATS];

/// Lay out one transition as the wire format's 57 floats.
pub fn transition_row(state: &[f32; STATE_DIM], action: usize, reward: f32, next: &[f32; STATE_DIM], terminal: bool) -> Row {
    let mut row = [0.0; TRANSITION_FLOATS];
    row[col::STATE..col::STATE + STATE_DIM].copy_from_slice(state);
    row[col::ACTION] = action as f32;
    row[col::REWARD] = reward;
    row[col::NEXT_STATE..col::NEXT_STATE + STATE_DIM].copy_from_slice(next);
    row[col::TERMINAL] = if terminal { 1.0 } else { 0.0 };
    row
}

/// A decision whose transition is not complete yet.
#[derive(Debug, Clone, Copy)]
pub struct Decision {
    pub state: [f32; STATE_DIM],
    pub action: usize,
    /// The macro's summed reward.
    pub reward: f32,
    /// The model that chose the action.
    pub model_version: u64,
}

/// Assembles n-step transitions for one environment.
///
/// A transition starting at decision t carries `r_t + g r_t+1 + ... + g^(n-1) r_t+n-1`
/// and the state after decision t+n-1; the learner bootstraps it with `g^n max Q`.
/// With n = 1 this is the plain one-step transition.
#[derive(Debug)]
pub struct NStep {
    n: usize,
    gamma: f32,
    window: VecDeque<Decision>,
}

impl NStep {
    pub fn new(n: usize, gamma: f32) -> Self {
        assert!(n >= 1, "n-step returns need n >= 1");
        NStep { n, gamma, window: VecDeque::with_capacity(n) }
    }

    fn discounted(&self) -> f32 {
        self.window.iter().rev().fold(0.0, |acc, d| d.reward + self.gamma * acc)
    }

    /// Add the decision just played (`next` is the state it led to, `end` whether the
    /// episode ended there) and emit every transition that became complete. Returns
    /// how many decisions were dropped because they can never be completed.
    pub fn push(&mut self, d: Decision, next: &[f32; STATE_DIM], end: Option<EpisodeEnd>, emit: &mut impl FnMut(&Row, u64)) -> usize {
        self.window.push_back(d);
        let emit_front = |this: &mut Self, terminal: bool, emit: &mut dyn FnMut(&Row, u64)| {
            let ret = this.discounted();
            let first = this.window.pop_front().expect("window is not empty");
            emit(&transition_row(&first.state, first.action, ret, next, terminal), first.model_version);
        };
        match end {
            None => {
                if self.window.len() == self.n {
                    emit_front(self, false, emit);
                }
                0
            }
            // A terminal state has no future value, so each of the last decisions gets
            // the exact (shorter) sum of what remained, and terminal = 1.
            Some(e) if e.is_terminal() => {
                while !self.window.is_empty() {
                    emit_front(self, true, emit);
                }
                0
            }
            // A time limit is not terminal: the learner must bootstrap from `next`
            // with g^n. The oldest decision has its full n rewards and is fine. The
            // last n-1 have fewer than n rewards before the cut; sent as non-terminal
            // they would be bootstrapped with g^n from a state fewer than n steps
            // away (wrong), and as terminal they would claim the future is worth 0
            // (the classic truncation bug). The game cannot be played on past the
            // minute, so they cannot be completed: drop them.
            Some(_) => {
                if self.window.len() == self.n {
                    emit_front(self, false, emit);
                }
                let dropped = self.window.len();
                self.window.clear();
                dropped
            }
        }
    }

    /// Forget unfinished decisions (the emulator failed mid-episode). Returns how many.
    pub fn clear(&mut self) -> usize {
        let n = self.window.len();
        self.window.clear();
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shine_agent::experience::col;

    fn st(v: f32) -> [f32; STATE_DIM] {
        [v; STATE_DIM]
    }

    fn d(state: f32, action: usize, reward: f32) -> Decision {
        Decision { state: st(state), action, reward, model_version: 7 }
    }

    /// Push decisions (state i, action i, reward r[i]); the last one ends with `end`.
    fn run(n: usize, gamma: f32, rewards: &[f32], end: EpisodeEnd) -> (Vec<Row>, usize) {
        let mut ns = NStep::new(n, gamma);
        let mut rows = Vec::new();
        let mut dropped = 0;
        for (i, &r) in rewards.iter().enumerate() {
            let last = i + 1 == rewards.len();
            dropped += ns.push(d(i as f32, i, r), &st(i as f32 + 1.0), last.then_some(end), &mut |row, v| {
                assert_eq!(v, 7);
                rows.push(*row);
            });
        }
        (rows, dropped)
    }

    fn close(a: f32, b: f32) -> bool {
        (a - b).abs() < 1e-6
    }

    #[test]
    fn transition_row_is_the_papers_57_floats() {
        let r = transition_row(&st(0.25), 3, 0.5, &st(0.75), true);
        assert_eq!(r.len(), 57);
        assert!(r[..27].iter().all(|&v| v == 0.25));
        assert_eq!((r[27], r[28]), (3.0, 0.5));
        assert!(r[29..56].iter().all(|&v| v == 0.75));
        assert_eq!(r[56], 1.0);
        assert_eq!(transition_row(&st(0.0), 0, 0.0, &st(0.0), false)[56], 0.0);
    }

    #[test]
    fn one_step_transitions_follow_each_decision() {
        let (rows, dropped) = run(1, 0.99, &[1.0, 2.0, 3.0], EpisodeEnd::TimeLimit);
        assert_eq!((rows.len(), dropped), (3, 0));
        for (i, r) in rows.iter().enumerate() {
            assert_eq!((r[col::STATE], r[col::ACTION], r[col::REWARD], r[col::NEXT_STATE]), (i as f32, i as f32, (i + 1) as f32, i as f32 + 1.0));
            assert_eq!(r[col::TERMINAL], 0.0, "a time limit is never terminal");
        }
        let (rows, _) = run(1, 0.99, &[1.0, 2.0], EpisodeEnd::Hit);
        assert_eq!(rows.iter().map(|r| r[col::TERMINAL]).collect::<Vec<_>>(), vec![0.0, 1.0]);
    }

    #[test]
    fn n_step_sums_are_discounted_over_n_decisions() {
        // n = 3, gamma = 0.5, rewards 1, 2, 4, 8, 16, cut by the time limit.
        let (rows, dropped) = run(3, 0.5, &[1.0, 2.0, 4.0, 8.0, 16.0], EpisodeEnd::TimeLimit);
        // t=0: 1 + 0.5*2 + 0.25*4 = 3;  t=1: 2 + 2 + 2 = 6;  t=2: 4 + 4 + 4 = 12.
        let got: Vec<(f32, f32, f32, f32)> = rows.iter().map(|r| (r[col::STATE], r[col::REWARD], r[col::NEXT_STATE], r[col::TERMINAL])).collect();
        assert_eq!(got, vec![(0.0, 3.0, 3.0, 0.0), (1.0, 6.0, 4.0, 0.0), (2.0, 12.0, 5.0, 0.0)]);
        // The decisions at t=3 and t=4 have only 2 and 1 rewards before the cut.
        assert_eq!(dropped, 2);
    }

    #[test]
    fn terminal_episode_ends_with_shorter_terminal_sums() {
        let (rows, dropped) = run(3, 0.5, &[1.0, 2.0, 4.0, 8.0, 16.0], EpisodeEnd::Hit);
        assert_eq!(dropped, 0);
        let got: Vec<(f32, f32, f32, f32)> = rows.iter().map(|r| (r[col::STATE], r[col::REWARD], r[col::NEXT_STATE], r[col::TERMINAL])).collect();
        // t=3: 8 + 0.5*16 = 16, t=4: 16; both point at the final state and are terminal.
        assert_eq!(got, vec![(0.0, 3.0, 3.0, 0.0), (1.0, 6.0, 4.0, 0.0), (2.0, 12.0, 5.0, 1.0), (3.0, 16.0, 5.0, 1.0), (4.0, 16.0, 5.0, 1.0)]);
    }

    #[test]
    fn episodes_shorter_than_n() {
        // Terminal after 2 decisions with n = 4: both kept, terminal, exact sums.
        let (rows, dropped) = run(4, 0.9, &[1.0, 1.0], EpisodeEnd::StockLost);
        assert_eq!(dropped, 0);
        assert!(close(rows[0][col::REWARD], 1.9) && close(rows[1][col::REWARD], 1.0));
        assert!(rows.iter().all(|r| r[col::TERMINAL] == 1.0));
        // Cut by the time limit after 2 decisions with n = 4: nothing can be completed.
        let (rows, dropped) = run(4, 0.9, &[1.0, 1.0], EpisodeEnd::TimeLimit);
        assert_eq!((rows.len(), dropped), (0, 2));
        // Exactly n decisions then the time limit: the first one is complete.
        let (rows, dropped) = run(2, 0.9, &[1.0, 1.0], EpisodeEnd::TimeLimit);
        assert_eq!((rows.len(), dropped), (1, 1));
        assert!(close(rows[0][col::REWARD], 1.9) && rows[0][col::TERMINAL] == 0.0);
    }
}
