//! Hand-written policies: the baselines a learned bot must beat, and the greedy policy
//! that plays a trained model.

use crate::actions::{untouchable, ActionSet, NOTHING};
use crate::model::{QNet, Scratch};
use crate::state::Observation;
use rand::Rng;
use shine_bridge::melee::action;

/// How a bot picks its next macro-action.
pub trait Policy {
    fn act(&mut self, obs: &Observation, rng: &mut dyn rand::RngCore) -> usize;
}

/// A borrowed policy plays as the policy itself (a seat may hold it for one match).
impl<P: Policy + ?Sized> Policy for &mut P {
    fn act(&mut self, obs: &Observation, rng: &mut dyn rand::RngCore) -> usize {
        (**self).act(obs, rng)
    }
}

/// A boxed policy plays as the policy inside.
impl<P: Policy + ?Sized> Policy for Box<P> {
    fn act(&mut self, obs: &Observation, rng: &mut dyn rand::RngCore) -> usize {
        (**self).act(obs, rng)
    }
}

/// Always "nothing": the floor.
pub struct Idle;
impl Policy for Idle {
    fn act(&mut self, _: &Observation, _: &mut dyn rand::RngCore) -> usize {
        NOTHING
    }
}

/// Uniformly random macro-actions.
pub struct RandomPolicy(pub ActionSet);
impl Policy for RandomPolicy {
    fn act(&mut self, _: &Observation, rng: &mut dyn rand::RngCore) -> usize {
        rng.random_range(0..self.0.len())
    }
}

/// A simple reactive heuristic for the Untouchable set: spot dodge when the opponent
/// starts an attack within reach, otherwise stand still (which is what pays).
pub struct Dodge;

/// Horizontal distance within which an opponent's attack is treated as a threat.
const THREAT_RANGE: f32 = 40.0;

fn is_attack(a: u32) -> bool {
    (action::NEUTRAL_ATTACK_1..=action::DAIR).contains(&a)
}

impl Policy for Dodge {
    fn act(&mut self, obs: &Observation, _: &mut dyn rand::RngCore) -> usize {
        let (me, opp) = (&obs.agent, &obs.opponent);
        let close = (me.x - opp.x).abs() < THREAT_RANGE && (me.y - opp.y).abs() < 30.0;
        match opp.action {
            Some(a) if close && is_attack(a) => untouchable::SPOT_DODGE,
            _ => untouchable::NOTHING,
        }
    }
}

/// Plays a trained model: the action with the largest Q-value.
pub struct Greedy {
    net: QNet,
    q: Vec<f32>,
    scratch: Scratch,
}

impl Greedy {
    pub fn new(net: QNet) -> Self {
        let q = vec![0.0; net.action_count()];
        Greedy { net, q, scratch: Scratch::default() }
    }
    /// Q-values of the last decision.
    pub fn q_values(&self) -> &[f32] {
        &self.q
    }
}

impl Policy for Greedy {
    fn act(&mut self, obs: &Observation, _: &mut dyn rand::RngCore) -> usize {
        self.net.forward(&obs.state, 1, &mut self.q, &mut self.scratch);
        QNet::argmax(&self.q)
    }
}

/// A shared model's greedy action, or a uniformly random one with probability
/// `epsilon`: how a self-play opponent plays (and explores) its side.
pub struct EpsilonGreedy {
    net: std::sync::Arc<QNet>,
    epsilon: f64,
    q: Vec<f32>,
    scratch: Scratch,
}

impl EpsilonGreedy {
    pub fn new(net: std::sync::Arc<QNet>, epsilon: f64) -> Self {
        let q = vec![0.0; net.action_count()];
        EpsilonGreedy { net, epsilon, q, scratch: Scratch::default() }
    }
}

impl Policy for EpsilonGreedy {
    fn act(&mut self, obs: &Observation, rng: &mut dyn rand::RngCore) -> usize {
        if self.epsilon > 0.0 && rng.random::<f64>() < self.epsilon {
            return rng.random_range(0..self.q.len());
        }
        self.net.forward(&obs.state, 1, &mut self.q, &mut self.scratch);
        QNet::argmax(&self.q)
    }
}
