//! The Dueling DQN in tch (feature `torch`; only the manager turns it on).
//!
//! Var-store paths are the PyTorch attribute names of [`crate::model::TENSORS`], so
//! `vs.variables()` keys are exactly the `state_dict` keys of the model file.

use crate::model::{self, ModelMeta, TENSORS};
use crate::state::STATE_DIM;
use tch::{nn, nn::Module, Device, Kind, Tensor};

/// The paper's network: 27 -> 128 -> (value 512 -> 1, advantage 512 -> A).
#[derive(Debug)]
pub struct DuelingDqn {
    pub vs: nn::VarStore,
    shared: nn::Linear,
    value_hidden: nn::Linear,
    value: nn::Linear,
    advantage_hidden: nn::Linear,
    advantage: nn::Linear,
    actions: usize,
}

impl DuelingDqn {
    pub fn new(device: Device, actions: usize) -> Self {
        let vs = nn::VarStore::new(device);
        let root = vs.root();
        let lin = |name: &str, i, o| nn::linear(&root / name, i, o, Default::default());
        let shared = lin("shared", STATE_DIM as i64, model::SHARED as i64);
        let value_hidden = lin("value_hidden", model::SHARED as i64, model::STREAM as i64);
        let value = lin("value", model::STREAM as i64, 1);
        let advantage_hidden = lin("advantage_hidden", model::SHARED as i64, model::STREAM as i64);
        let advantage = lin("advantage", model::STREAM as i64, actions as i64);
        DuelingDqn { vs, shared, value_hidden, value, advantage_hidden, advantage, actions }
    }

    pub fn actions(&self) -> usize {
        self.actions
    }

    pub fn device(&self) -> Device {
        self.vs.device()
    }

    /// Weights in [`TENSORS`] order as host vectors (for the model file).
    pub fn weights(&self) -> Vec<Vec<f32>> {
        let vars = self.vs.variables();
        TENSORS
            .iter()
            .map(|name| {
                let t = vars[*name].to_device(Device::Cpu).to_kind(Kind::Float).contiguous().view([-1]);
                Vec::<f32>::try_from(&t).expect("f32 weights")
            })
            .collect()
    }

    /// Overwrite the weights (in [`TENSORS`] order, shapes as [`ModelMeta::shapes`]).
    pub fn set_weights(&mut self, weights: &[Vec<f32>]) {
        let mut vars = self.vs.variables();
        let shapes = ModelMeta::new("", self.actions).shapes();
        tch::no_grad(|| {
            for ((name, w), shape) in TENSORS.iter().zip(weights).zip(shapes.iter()) {
                let shape: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
                let src = Tensor::from_slice(w).view(shape.as_slice()).to_device(self.device());
                vars.get_mut(*name).expect("var-store holds every tensor").copy_(&src);
            }
        });
    }

    /// The model file for these weights.
    pub fn to_model_file(&self, meta: &ModelMeta) -> Result<Vec<u8>, model::ModelError> {
        model::save(meta, &self.weights())
    }
}

impl Module for DuelingDqn {
    fn forward(&self, x: &Tensor) -> Tensor {
        let h = x.apply(&self.shared).relu();
        let v = h.apply(&self.value_hidden).relu().apply(&self.value);
        let a = h.apply(&self.advantage_hidden).relu().apply(&self.advantage);
        // Q = V + A - mean(A): the mean keeps V and A identifiable (Wang et al.).
        v + &a - a.mean_dim(1, true, Kind::Float)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{QNet, Scratch};
    use crate::ActionSet;

    #[test]
    fn tch_forward_runs_on_the_cpu_and_has_the_dueling_shape() {
        let net = DuelingDqn::new(Device::Cpu, 5);
        let x = Tensor::rand([8, STATE_DIM as i64], (Kind::Float, Device::Cpu));
        let q = net.forward(&x);
        assert_eq!(q.size(), vec![8, 5]);
        let names: Vec<String> = { let mut v: Vec<_> = net.vs.variables().into_keys().collect(); v.sort(); v };
        let mut want: Vec<String> = TENSORS.iter().map(|s| s.to_string()).collect();
        want.sort();
        assert_eq!(names, want, "var-store names are the state_dict names");
    }

    #[test]
    fn pure_rust_inference_equals_tch_for_every_action_set() {
        tch::manual_seed(7);
        for set in ActionSet::ALL {
            let net = DuelingDqn::new(Device::Cpu, set.len());
            let meta = ModelMeta::new(set.name(), set.len());
            let rust = QNet::load(&net.to_model_file(&meta).unwrap()).unwrap();
            let n = 64;
            let x = Tensor::rand([n, STATE_DIM as i64], (Kind::Float, Device::Cpu)) * 2.0 - 0.5;
            let want = Vec::<f32>::try_from(&net.forward(&x).view([-1])).unwrap();
            let xs = Vec::<f32>::try_from(&x.view([-1])).unwrap();
            let mut got = vec![0.0; n as usize * set.len()];
            rust.forward(&xs, n as usize, &mut got, &mut Scratch::default());
            let worst = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
            assert!(worst < 1e-5, "{set}: largest difference {worst}");
        }
    }

    #[test]
    fn set_weights_round_trips() {
        let a = DuelingDqn::new(Device::Cpu, 5);
        let mut b = DuelingDqn::new(Device::Cpu, 5);
        assert_ne!(a.weights(), b.weights());
        b.set_weights(&a.weights());
        assert_eq!(a.weights(), b.weights());
    }
}
