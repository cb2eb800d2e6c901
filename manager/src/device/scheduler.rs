//! Which run takes the next train step on the device.

use super::RunId;

/// Which run takes the next train step: weighted fair sharing by virtual time
/// (stride scheduling, as in Linux's CFS). Each step costs the run `1 / weight`; the
/// ready run with the least virtual time goes next. A run that is not ready (its
/// limiter waits, it is paused or burning in) banks no credit: its virtual time is
/// raised to the least among the ready ones, so when it comes back it shares from then
/// on rather than taking the device for a burst.
#[derive(Debug, Default)]
pub struct Scheduler {
    vtime: Vec<(RunId, f64)>,
}

impl Scheduler {
    pub fn add(&mut self, id: RunId) {
        // A newcomer starts level with the least busy run, not at zero.
        let start = self.vtime.iter().map(|&(_, v)| v).fold(f64::INFINITY, f64::min);
        self.vtime.push((id, if start.is_finite() { start } else { 0.0 }));
    }

    pub fn remove(&mut self, id: RunId) {
        self.vtime.retain(|&(r, _)| r != id);
    }

    /// A run's virtual time (0 for one not added).
    fn vt(&self, id: RunId) -> f64 {
        self.vtime.iter().find(|&&(r, _)| r == id).map_or(0.0, |&(_, v)| v)
    }

    /// The run to step next among `ready` (id and weight), charged for the step.
    pub fn pick(&mut self, ready: &[(RunId, f64)]) -> Option<RunId> {
        let &(id, weight) = ready.iter().min_by(|a, b| self.vt(a.0).total_cmp(&self.vt(b.0)))?;
        let floor = self.vt(id);
        for (r, v) in &mut self.vtime {
            if *r == id {
                *v += 1.0 / weight;
            } else if !ready.iter().any(|&(x, _)| x == *r) && *v < floor {
                *v = floor;
            }
        }
        Some(id)
    }

    /// After [`Scheduler::pick`] chose `picked` from a group that steps together
    /// (`members`, row order; `picked` among them): which members move with it. A
    /// member moves when it is ready and its virtual time is no later than `picked`'s
    /// after its step, so that a group keeps its runs' shares (a run of weight 2 moves
    /// in every grouped step, one of weight 1 beside it in every other); each member
    /// that moves is charged for its step.
    pub fn with_group(&mut self, picked: RunId, members: &[RunId], ready: &[(RunId, f64)]) -> Vec<bool> {
        let bar = self.vt(picked);
        members
            .iter()
            .map(|&m| {
                if m == picked {
                    return true;
                }
                let Some(&(_, weight)) = ready.iter().find(|&&(r, _)| r == m) else { return false };
                let moves = self.vt(m) <= bar;
                if moves {
                    if let Some((_, v)) = self.vtime.iter_mut().find(|(r, _)| *r == m) {
                        *v += 1.0 / weight;
                    }
                }
                moves
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(s: &mut Scheduler, steps: usize, ready: impl Fn(usize) -> Vec<(RunId, f64)>) -> [usize; 3] {
        let mut c = [0; 3];
        for i in 0..steps {
            if let Some(id) = s.pick(&ready(i)) {
                c[id as usize] += 1;
            }
        }
        c
    }

    #[test]
    fn equal_weights_take_turns_and_weights_set_the_shares() {
        let mut s = Scheduler::default();
        s.add(1);
        s.add(2);
        assert_eq!(counts(&mut s, 1000, |_| vec![(1, 1.0), (2, 1.0)]), [0, 500, 500]);
        let mut s = Scheduler::default();
        s.add(1);
        s.add(2);
        let c = counts(&mut s, 3000, |_| vec![(1, 2.0), (2, 1.0)]);
        assert!(c[1].abs_diff(2000) <= 1 && c[2].abs_diff(1000) <= 1, "{c:?}");
    }

    #[test]
    fn a_run_that_waits_neither_blocks_the_others_nor_comes_back_for_a_burst() {
        let mut s = Scheduler::default();
        s.add(1);
        s.add(2);
        // Run 2's limiter says wait for 600 steps: run 1 takes them all.
        let c = counts(&mut s, 600, |_| vec![(1, 1.0)]);
        assert_eq!(c, [0, 600, 0]);
        // Then both are ready: they alternate from here, run 2 has no 600-step credit.
        let c = counts(&mut s, 100, |_| vec![(1, 1.0), (2, 1.0)]);
        assert!(c[1].abs_diff(50) <= 1 && c[2].abs_diff(50) <= 1, "{c:?}");
        assert_eq!(s.pick(&[]), None);
    }

    #[test]
    fn a_group_steps_its_ready_runs_together_and_keeps_their_shares() {
        // Runs 1 (weight 2) and 2 (weight 1) train as one group: every grouped step
        // moves run 1, and run 2 in every other one.
        let mut s = Scheduler::default();
        s.add(1);
        s.add(2);
        let ready = [(1, 2.0), (2, 1.0)];
        let mut c = [0; 3];
        for _ in 0..1000 {
            let picked = s.pick(&ready).unwrap();
            for (m, moves) in [1, 2].into_iter().zip(s.with_group(picked, &[1, 2], &ready)) {
                c[m as usize] += moves as usize;
            }
        }
        assert!(c[1].abs_diff(1000) <= 1 && c[2].abs_diff(500) <= 2, "{c:?}");
        // Equal weights: both move in every step; a run not ready never does.
        let mut s = Scheduler::default();
        s.add(1);
        s.add(2);
        for _ in 0..10 {
            let picked = s.pick(&[(1, 1.0), (2, 1.0)]).unwrap();
            assert_eq!(s.with_group(picked, &[1, 2], &[(1, 1.0), (2, 1.0)]), [true, true]);
        }
        let picked = s.pick(&[(2, 1.0)]).unwrap();
        assert_eq!(s.with_group(picked, &[1, 2], &[(2, 1.0)]), [false, true]);
    }

    #[test]
    fn a_run_added_late_starts_level_with_the_others() {
        let mut s = Scheduler::default();
        s.add(1);
        counts(&mut s, 500, |_| vec![(1, 1.0)]);
        s.add(2);
        let c = counts(&mut s, 100, |_| vec![(1, 1.0), (2, 1.0)]);
        assert!(c[1].abs_diff(50) <= 1 && c[2].abs_diff(50) <= 1, "{c:?}");
        s.remove(1);
        assert_eq!(counts(&mut s, 10, |_| vec![(2, 1.0)]), [0, 0, 10]);
    }
}
