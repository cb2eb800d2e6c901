//! The simulator with a bot on either side: the bot plays Fox or Marth
//! ([`Side`]), and the other fighter is played by the simulator's scripted CPU or by a
//! second policy through its own pad (a model, or a built-in policy), seeing the match
//! from its own side as the bot does. [`DolphinDuel`] seats such a policy on the
//! opponent's port of a real Melee, through that port's pipe.
//!
//! [`Duel`] is an [`Emulator`] whose setup is the bot's view of the match
//! ([`Side::view`]), so `shine_agent::Env` plays it unchanged: the state, the reward
//! and the episode end are the bot's side's. The opposing policy ([`Rival`]) sits in a
//! [`Seat`] of its own, which decides a macro-action whenever its last one has played
//! out and reads the RAM after every frame as the bot's does. The seat keeps score of
//! the task for its side, and the duel can keep what it played ([`Duel::take_moves`]):
//! its own transitions, one per macro-action, with the rewards of its side, which is
//! how a self-play match feeds the learner of each side.

use shine_agent::actions::ActionSet;
use shine_agent::policy::Policy;
use shine_agent::task::Task;
use shine_agent::{Move, Seat, Side};
use shine_bridge::dolphin::{Dolphin, DolphinError};
use shine_bridge::pad::Pad;
use shine_bridge::ram::{RamError, RamView};
use shine_bridge::sim::{Sim, SimError};
use shine_bridge::{Emulator, MatchSetup};

/// A policy to seat facing the bot: what it chooses among, and the model behind it.
pub struct Rival {
    pub policy: Box<dyn Policy>,
    pub actions: ActionSet,
    /// The model that chooses (0 for a built-in policy).
    pub model_version: u64,
}

/// One macro-action the seated rival played, with the model that chose it: a
/// transition of its side.
#[derive(Debug, Clone, Copy)]
pub struct RivalMove {
    pub played: Move,
    pub model_version: u64,
}

/// The rival in its seat, and what it played since it was last asked (with `record`).
struct Seated {
    seat: Seat<Box<dyn Policy>>,
    model_version: u64,
    record: bool,
    moves: Vec<RivalMove>,
}

impl Seated {
    /// `rival` seated on the side `view` describes, scoring `task` for that side, its
    /// random stream seeded with `seed`.
    fn new(rival: Rival, task: Task, view: MatchSetup, seed: u64, record: bool) -> Seated {
        let Rival { policy, actions, model_version } = rival;
        Seated { seat: Seat::new(policy, actions, view, seed).scoring(task), model_version, record, moves: Vec::new() }
    }

    /// A fresh match seen from `view`, its first frame read from `ram`; nothing kept.
    fn restart(&mut self, view: MatchSetup, ram: RamView) -> Result<(), RamError> {
        self.moves.clear();
        self.seat.restart(view, ram).map(drop)
    }

    /// Read the frame just played, keeping the macro it closed (with `record`).
    fn observe(&mut self, ram: RamView) -> Result<(), RamError> {
        if let Some(played) = self.seat.observe(ram)? {
            if self.record {
                self.moves.push(RivalMove { played, model_version: self.model_version });
            }
        }
        Ok(())
    }
}

/// The simulator, the bot on `side`, the opponent seated on the other.
pub struct Duel {
    sim: Sim,
    side: Side,
    /// The bot's view of the match in play.
    view: MatchSetup,
    task: Task,
    /// `Some(level)`: the scripted CPU plays the bot's side (the pads given to `step`
    /// are ignored): a baseline, what the game's own CPU does in the bot's place.
    bot_cpu: Option<u8>,
    /// The policy facing the bot, in its seat (`None`: the scripted CPU).
    rival: Option<Seated>,
    /// Whether the scripted CPU drives Marth this match (the simulator's own opponent).
    marth_cpu: bool,
}

impl Duel {
    /// A match on the simulator, seen by the bot from `view` ([`Side::view`] of the
    /// match's layout), playing `task`; the opponent is the scripted CPU until
    /// [`Duel::seat`] puts a policy there.
    pub fn new(side: Side, view: MatchSetup, task: Task, seed: u64) -> Duel {
        let mut duel = Duel { sim: Sim::new(side.view(view), seed), side, view, task, bot_cpu: None, rival: None, marth_cpu: true };
        // Infallible here: `Sim::new` repaired the setup.
        let _ = duel.arrange(view, seed);
        duel
    }

    /// The scripted CPU at `level` plays the bot's side from the next reset on.
    pub fn with_bot_cpu(mut self, level: u8) -> Duel {
        self.bot_cpu = Some(level.clamp(1, 9));
        self
    }

    /// Who plays the other side from the next reset on: `rival` (its random stream
    /// seeded with `seed`), or with `None` the scripted CPU. With `record`, the duel
    /// keeps the rival's transitions for [`Duel::take_moves`].
    pub fn seat(&mut self, rival: Option<Rival>, seed: u64, record: bool) {
        let view = self.seat_view(self.view);
        self.rival = rival.map(|r| Seated::new(r, self.task, view, seed, record));
    }

    pub fn side(&self) -> Side {
        self.side
    }

    pub fn sim(&self) -> &Sim {
        &self.sim
    }

    /// The rival's transitions since the last call (only with `record`).
    pub fn take_moves(&mut self) -> Vec<RivalMove> {
        self.rival.as_mut().map(|s| std::mem::take(&mut s.moves)).unwrap_or_default()
    }

    /// The match from the seat's side, given the bot's view of it.
    fn seat_view(&self, view: MatchSetup) -> MatchSetup {
        self.side.other().view(self.side.view(view))
    }

    /// Start the match `view` describes (the bot's view): which scripted CPU drives
    /// which fighter at which level. `view.cpu_level` is the opponent's level when the
    /// CPU is the opponent; the simulator's own CPU plays Marth, its agent-side CPU Fox.
    fn arrange(&mut self, view: MatchSetup, seed: u64) -> Result<(), SimError> {
        let opponent_cpu = self.rival.is_none().then_some(view.cpu_level);
        let (fox_cpu, marth_cpu) = match self.side {
            Side::Fox => (self.bot_cpu, opponent_cpu),
            Side::Marth => (opponent_cpu, self.bot_cpu),
        };
        let game = MatchSetup { cpu_level: marth_cpu.unwrap_or(view.cpu_level), ..self.side.view(view) };
        self.sim.reset(game, seed)?;
        self.sim.set_agent_cpu(fox_cpu, seed);
        self.marth_cpu = marth_cpu.is_some();
        self.view = view;
        Ok(())
    }
}

/// What the actor asks of any emulator it plays: a seat for a policy on the other side
/// ([`Duel`]). Backends without one play the scripted CPU there and refuse a policy.
pub trait Seats {
    /// Who plays the other side from the next reset on ([`Duel::seat`]).
    fn seat_rival(&mut self, rival: Option<Rival>, seed: u64, record: bool) -> Result<(), String> {
        let _ = (seed, record);
        match rival {
            None => Ok(()),
            Some(_) => Err("this backend has no seat for a policy on the other side: self-play runs on the simulator".into()),
        }
    }
    /// The seated rival's transitions since the last call.
    fn take_moves(&mut self) -> Vec<RivalMove> {
        Vec::new()
    }
}

impl Seats for Duel {
    fn seat_rival(&mut self, rival: Option<Rival>, seed: u64, record: bool) -> Result<(), String> {
        self.seat(rival, seed, record);
        Ok(())
    }
    fn take_moves(&mut self) -> Vec<RivalMove> {
        Duel::take_moves(self)
    }
}

impl Seats for Sim {}
impl Seats for shine_bridge::dolphin::Dolphin {}

impl Emulator for Duel {
    type Error = SimError;

    fn reset(&mut self, view: MatchSetup, seed: u64) -> Result<(), SimError> {
        self.arrange(view, seed)?;
        let seat_view = self.seat_view(view);
        if let Some(rival) = self.rival.as_mut() {
            rival.restart(seat_view, self.sim.ram())?;
        }
        Ok(())
    }

    fn step(&mut self, pad: &Pad) -> Result<(), SimError> {
        let theirs = self.rival.as_mut().map_or(Pad::NEUTRAL, |r| r.seat.pad());
        let (fox, marth) = match self.side {
            Side::Fox => (*pad, theirs),
            Side::Marth => (theirs, *pad),
        };
        // A Fox driven by the agent-side CPU ignores its pad; a Marth driven by the
        // simulator's CPU gets its pad from `step`.
        if self.marth_cpu {
            self.sim.step(&fox)?;
        } else {
            self.sim.step_both(&fox, &marth)?;
        }
        match self.rival.as_mut() {
            Some(rival) => Ok(rival.observe(self.sim.ram())?),
            None => Ok(()),
        }
    }

    fn ram(&self) -> shine_bridge::ram::RamView<'_> {
        self.sim.ram()
    }

    fn setup(&self) -> MatchSetup {
        self.view
    }
}

/// Real Melee with a policy on the opponent's port ([`shine_bridge::dolphin::menu::Opponent::Bot`]):
/// the bot plays Fox through its pipe, the seated policy Marth through the opponent
/// port's, each reading the match from its own port.
pub struct DolphinDuel {
    dolphin: Dolphin,
    rival: Seated,
    stream: u64,
}

impl DolphinDuel {
    /// `dolphin` must have been launched against an opponent bot (two pipes, the
    /// opponent's port a human one); `rival` is the policy. Each match reseeds its
    /// random stream with the reset's seed XOR `stream`, as a fresh [`Duel`] seat would
    /// be seeded for that match.
    pub fn new(dolphin: Dolphin, rival: Rival, task: Task, stream: u64) -> DolphinDuel {
        let view = Side::Marth.view(dolphin.setup());
        DolphinDuel { dolphin, rival: Seated::new(rival, task, view, stream, false), stream }
    }

    pub fn dolphin(&self) -> &Dolphin {
        &self.dolphin
    }
    pub fn dolphin_mut(&mut self) -> &mut Dolphin {
        &mut self.dolphin
    }
}

impl Emulator for DolphinDuel {
    type Error = DolphinError;

    fn reset(&mut self, setup: MatchSetup, seed: u64) -> Result<(), DolphinError> {
        self.dolphin.reset(setup, seed)?;
        self.rival.seat.reseed(seed ^ self.stream);
        Ok(self.rival.restart(Side::Marth.view(setup), self.dolphin.ram())?)
    }

    fn step(&mut self, pad: &Pad) -> Result<(), DolphinError> {
        let theirs = self.rival.seat.pad();
        self.dolphin.step_both(pad, &theirs)?;
        Ok(self.rival.observe(self.dolphin.ram())?)
    }

    fn ram(&self) -> RamView<'_> {
        self.dolphin.ram()
    }

    fn setup(&self) -> MatchSetup {
        self.dolphin.setup()
    }

    fn skipped_frames(&self) -> u64 {
        self.dolphin.skipped_frames()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use shine_agent::policy::{Idle, RandomPolicy};
    use shine_agent::{Env, Observation, STATE_DIM};

    fn fight_view(side: Side) -> MatchSetup {
        side.view(MatchSetup::default())
    }

    /// Every pad of a few random macro-actions, the same for any run.
    fn pads(n: usize) -> Vec<Pad> {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut random = RandomPolicy(ActionSet::Fight);
        let obs = Observation { state: [0.0; STATE_DIM], frame: 0, opponent: Default::default(), agent: Default::default() };
        let mut out = Vec::new();
        while out.len() < n {
            out.extend_from_slice(ActionSet::Fight.script(random.act(&obs, &mut rng)).unwrap());
        }
        out.truncate(n);
        out
    }

    #[test]
    fn a_fox_bot_against_the_cpu_plays_the_simulator_frame_for_frame() {
        let setup = MatchSetup::default();
        let mut sim = Sim::new(setup, 11);
        let mut duel = Duel::new(Side::Fox, fight_view(Side::Fox), Task::Fight, 11);
        sim.reset(setup, 11).unwrap();
        duel.reset(setup, 11).unwrap();
        for pad in pads(600) {
            sim.step(&pad).unwrap();
            duel.step(&pad).unwrap();
            assert_eq!(duel.ram().bytes(), sim.ram().bytes());
        }
    }

    #[test]
    fn a_marth_bot_faces_the_cpu_playing_fox() {
        // The bot's pads drive Marth; Fox is the agent-side CPU at the view's level.
        let game = MatchSetup { cpu_level: 9, ..MatchSetup::default() };
        let mut sim = Sim::new(game, 3).with_agent_cpu(9, 3);
        let view = Side::Marth.view(game);
        let mut duel = Duel::new(Side::Marth, view, Task::Fight, 3);
        duel.reset(view, 3).unwrap();
        sim.reset(game, 3).unwrap();
        for pad in pads(900) {
            sim.step_both(&Pad::NEUTRAL, &pad).unwrap();
            duel.step(&pad).unwrap();
            assert_eq!(duel.ram().bytes(), sim.ram().bytes());
        }
        assert!(sim.agent().percent() > 0.0 || sim.opponent().percent() > 0.0, "the two fought");
        assert_eq!(duel.setup(), view, "the emulator's setup is the bot's view");
    }

    #[test]
    fn the_seat_plays_its_side_and_records_its_own_rewards() {
        for side in Side::ALL {
            let view = fight_view(side);
            let mut duel = Duel::new(side, view, Task::Fight, 21);
            duel.seat(Some(Rival { policy: Box::new(RandomPolicy(ActionSet::Fight)), actions: ActionSet::Fight, model_version: 7 }), 99, true);
            let mut env = Env::new(duel, view, Task::Fight, ActionSet::Fight);
            let first = env.reset(9, 21).unwrap();
            let mut rng = ChaCha8Rng::seed_from_u64(1);
            let mut bot = RandomPolicy(ActionSet::Fight);
            let mut obs = first;
            let mut moves = Vec::new();
            let end = loop {
                let step = env.step(bot.act(&obs, &mut rng)).unwrap();
                moves.extend(env_duel(&mut env).take_moves());
                obs = step.next;
                if let Some(end) = step.end {
                    break end;
                }
            };
            let bot_total = env.episode().unwrap().total_reward;
            assert!(moves.len() > 100, "{side}: the seat decided all match long ({} moves)", moves.len());
            // The fight is zero-sum: the seat's rewards are the bot's, negated.
            let seat_total: f32 = moves.iter().map(|m| m.played.reward).sum();
            assert!(bot_total.abs() > 0.1, "{side}: somebody took damage ({bot_total})");
            assert!((seat_total + bot_total).abs() < 1e-3, "{side}: seat {seat_total} vs bot {bot_total}");
            // Its first state is the bot's first state with the roles swapped.
            let mut swapped = first.state;
            swapped[..13].copy_from_slice(&first.state[13..26]);
            swapped[13..26].copy_from_slice(&first.state[..13]);
            swapped[26] = 0.0;
            assert_eq!(moves[0].played.state, swapped, "{side}");
            // Moves chain, and only the last one carries the end.
            for w in moves.windows(2) {
                assert_eq!(w[0].played.next.state[..26], w[1].played.state[..26], "{side}");
                assert_eq!(w[0].played.end, None);
            }
            assert_eq!(moves.last().unwrap().played.end, Some(end));
            assert!(moves.iter().all(|m| m.model_version == 7 && m.played.action < ActionSet::Fight.len()));
        }
    }

    #[test]
    fn a_seated_policy_replaces_the_cpu_and_keeps_nothing_unasked() {
        // An idle Fox bot: the level-9 CPU Marth hits it within seconds, an idle seat
        // in Marth's place never does.
        let view = fight_view(Side::Fox);
        let mut alone = Duel::new(Side::Fox, view, Task::Fight, 4);
        let mut seated = Duel::new(Side::Fox, view, Task::Fight, 4);
        seated.seat(Some(Rival { policy: Box::new(Idle), actions: ActionSet::Fight, model_version: 0 }), 1, false);
        for d in [&mut alone, &mut seated] {
            d.reset(view, 4).unwrap();
            for _ in 0..600 {
                d.step(&Pad::NEUTRAL).unwrap();
            }
        }
        assert!(alone.sim().agent().percent() > 0.0, "the CPU attacks");
        assert_eq!(seated.sim().agent().percent(), 0.0, "an idle seat does not");
        assert!(seated.take_moves().is_empty(), "moves are kept only when asked");
    }

    fn env_duel(env: &mut Env<Duel>) -> &mut Duel {
        env.emulator_mut()
    }
}
