use super::*;
use rand::SeedableRng;
use shine_agent::model::{random_weights, save, ModelMeta};

/// A model of `actions` with random weights, playing `side`.
fn model(actions: ActionSet, side: Side, seed: u64) -> QNet {
    let meta = ModelMeta::new(actions.name(), actions.len()).with_side(side);
    let weights = random_weights(&meta, &mut rand::rngs::StdRng::seed_from_u64(seed));
    QNet::load(&save(&meta, &weights).unwrap()).unwrap()
}

/// A clock that moves only when the match sleeps, and hands the person the pad of the
/// frame due next (`pads`, by frame: a change every so often).
struct Scripted<'a> {
    now: Instant,
    person: &'a Person,
    pads: &'a dyn Fn(u64) -> Option<Pad>,
    frame: u64,
}

impl Clock for Scripted<'_> {
    fn now(&self) -> Instant {
        self.now
    }
    fn sleep_until(&mut self, t: Instant) {
        self.now = self.now.max(t);
        self.frame += 1;
        if let Some(pad) = (self.pads)(self.frame) {
            self.person.hold(pad, self.now);
        }
    }
}

fn cfg(match_secs: f64) -> PlayConfig {
    PlayConfig { match_secs, ..PlayConfig::default() }
}

/// Plays `m` with the person's pads from `pads` (frame 0's before the first frame).
fn played(m: &Match, cfg: &PlayConfig, pads: &dyn Fn(u64) -> Option<Pad>) -> (Outcome, Vec<Frame>) {
    let person = Person::new();
    let start = Instant::now();
    if let Some(p) = pads(0) {
        person.hold(p, start);
    }
    let mut clock = Scripted { now: start, person: &person, pads, frame: 0 };
    let mut frames = vec![];
    let outcome = play_browser_match(m, cfg, &person, &mut clock, &mut |f| {
        frames.push(f);
        true
    })
    .unwrap();
    (outcome, frames)
}

/// Runs right for a second, jumps, shields, runs left: a pad that changes.
fn busy_person(frame: u64) -> Option<Pad> {
    let pad = match (frame / 60) % 4 {
        0 => Pad::NEUTRAL.with_main(1.0, 0.5),
        1 => Pad::NEUTRAL.with(Button::X),
        2 => Input { stick: [0.0, 0.0], buttons: vec!["l".into()] }.pad().unwrap(),
        _ => Pad::NEUTRAL.with_main(0.0, 0.5),
    };
    frame.is_multiple_of(15).then_some(pad)
}

#[test]
fn the_persons_pads_and_the_bots_greedy_actions_give_the_frames_the_simulator_gives() {
    for side in Side::ALL {
        let m = Match { net: model(ActionSet::Fight, side, 3), actions: ActionSet::Fight, seed: 17 };
        let (outcome, frames) = played(&m, &cfg(20.0), &busy_person);
        assert_eq!(outcome.ending, Ending::Time, "{outcome:?}");
        assert_eq!(frames.len() as u64, 20 * 60);
        // The same match natively, frame by frame, and every decision greedy.
        check(&m.net, m.actions, 17, &frames).unwrap();
        // Holding right moved the person's fighter right.
        let moved = frames.windows(2).any(|w| w[1].pad.stick[0] > 0.5 && w[1].opponent.x > w[0].opponent.x && w[1].opponent.y == 0.0);
        assert!(moved, "{side:?}: holding right moved the person's fighter right");
        let decisions = frames.iter().filter(|f| f.state.is_some()).count();
        assert!(decisions > 100, "{decisions} decisions in 20 s");
        // The check can fail: a fighter not where the simulator puts it, an action that
        // is not greedy, a frame missing.
        let mut off = frames.clone();
        off[300].opponent.x += 1.0;
        assert!(check(&m.net, m.actions, 17, &off).unwrap_err().starts_with("frame 301:"));
        assert!(check(&m.net, m.actions, 17, &frames[1..]).unwrap_err().contains("missing"));
        let mut wrong = frames.clone();
        let at = wrong.iter().position(|f| f.state.is_some() && f.frame > 100).unwrap();
        wrong[at].action = (wrong[at].action + 1) % ActionSet::Fight.len() as u32;
        assert!(check(&m.net, m.actions, 17, &wrong).unwrap_err().contains("greedy"));
    }
}

#[test]
fn a_match_ends_on_its_clock_without_input_and_when_the_page_goes() {
    let m = Match { net: model(ActionSet::Untouchable, Side::Fox, 1), actions: ActionSet::Untouchable, seed: 5 };
    // Nothing pressed for the idle time: the match ends then, not at its clock.
    let c = PlayConfig { idle_secs: 2.0, match_secs: 60.0, ..PlayConfig::default() };
    let (outcome, frames) = played(&m, &c, &|_| None);
    assert_eq!((outcome.ending, frames.len()), (Ending::Idle, 120), "{outcome:?}");
    assert!(!outcome.ending.finished());
    // A pad held without a change is no input either; a change every second keeps it on.
    let (outcome, _) = played(&m, &c, &|f| (f == 0).then_some(Pad::NEUTRAL.with_main(1.0, 0.5)));
    assert_eq!(outcome.ending, Ending::Idle);
    let (outcome, frames) = played(&m, &PlayConfig { match_secs: 5.0, ..c.clone() }, &busy_person);
    assert_eq!((outcome.ending, frames.len()), (Ending::Time, 300));
    assert!(outcome.ending.finished());
    // Nobody listens: it ends at once.
    let person = Person::new();
    let mut clock = Scripted { now: Instant::now(), person: &person, pads: &busy_person, frame: 0 };
    let outcome = play_browser_match(&m, &c, &person, &mut clock, &mut |f| f.frame < 10).unwrap();
    assert_eq!((outcome.ending, outcome.frames), (Ending::Closed, 10));
    person.leave();
    let outcome = play_browser_match(&m, &c, &person, &mut clock, &mut |_| true).unwrap();
    assert_eq!((outcome.ending, outcome.frames), (Ending::Closed, 0));
}

#[test]
fn more_stocks_win_then_more_damage_dealt() {
    assert_eq!(winner(2, 1, 0.0, 300.0), "bot");
    assert_eq!(winner(0, 3, 250.0, 10.0), "you");
    assert_eq!(winner(2, 2, 80.0, 40.0), "bot");
    assert_eq!(winner(2, 2, 40.0, 80.0), "you");
    assert_eq!(winner(4, 4, 0.0, 0.0), "draw");
}

#[test]
fn inputs_become_pads_and_nonsense_is_refused_naming_it() {
    let pad = Input { stick: [1.0, -1.0], buttons: vec!["a".into(), "l".into()] }.pad().unwrap();
    assert_eq!((pad.main.x, pad.main.y), (1.0, 0.0));
    assert!(pad.pressed(Button::A) && pad.pressed(Button::L) && pad.l == 1.0 && !pad.pressed(Button::B));
    assert_eq!(Input::of(&pad), Input { stick: [1.0, -1.0], buttons: vec!["a".into(), "l".into()] });
    assert!(Input { stick: [1.5, 0.0], buttons: vec![] }.pad().unwrap_err().contains("-1..1"));
    assert!(Input { stick: [f32::NAN, 0.0], buttons: vec![] }.pad().is_err());
    assert!(Input { stick: [0.0, 0.0], buttons: vec!["turbo".into()] }.pad().unwrap_err().contains("\"turbo\""));
    assert!(serde_json::from_str::<Input>(r#"{"stick": [0, 0], "extra": 1}"#).is_err(), "unknown fields are refused");
}

#[test]
fn one_match_per_browser_and_at_most_max_at_once() {
    let plays = Arc::new(Plays::default());
    let a = plays.take("page-a", 2).unwrap();
    assert_eq!(plays.take("page-a", 2).err(), Some(Refusal::AlreadyPlaying));
    let b = plays.take("page-b", 2).unwrap();
    assert_eq!(plays.take("page-c", 2).err(), Some(Refusal::Full(2)));
    assert_eq!(plays.playing(), 2);
    drop(a);
    assert_eq!(plays.playing(), 1);
    let _a = plays.take("page-a", 2).expect("its place is free again once its match ended");
    drop(b);
    assert!(PlayConfig { max_matches: 65, ..PlayConfig::default() }.validate().is_err());
    assert!(PlayConfig { idle_secs: 0.0, ..PlayConfig::default() }.validate().is_err());
    assert!(PlayConfig::default().validate().is_ok());
}
