"""Play a Shine model in Slippi Dolphin through libmelee.

The bot plays as Shine's worker does: on a frame where no macro is running it reads
the 27-float state, picks the greedy action, sets the shine flag when that action is
"shine", and then presses the macro's pads one per frame until the script ends; only
then does it decide again. The state is read on every frame (the frames-in-action
counters need every frame), whether or not a decision is due.

It takes over when Shine's Dolphin backend hands a match to its bot: once the bot's
fighter is past the entry animation (its action state outside Melee's Entry ids,
0x142-0x144, ``bridge/src/melee.rs``; ``bridge/src/dolphin/menu.rs`` waits for the
same). Until then it holds the pad neutral and reads nothing, so its first state, like
Shine's, starts both frames-in-action counters at 0.

The bot plays the model's side (its file's ``side``: Fox or Marth), on ``--port``, and
sees the game from there: the opponent's 13 floats first, its own second, as Shine's
``Side::view`` gives a bot of either side.
"""

import logging
import shutil
import sys
from typing import List, Optional

from . import actions as actions_mod
from . import dolphin_home as home_mod
from . import pad as pad_mod
from . import state as state_mod
from .model import OTHER_SIDE, SIDE_CHARACTERS, QNet, side_mismatch

log = logging.getLogger("shine_bot")

#: Melee's entry animation (the fighter appearing at the start of a game): Shine's
#: ``action::ENTRY..=action::ENTRY_END`` (``bridge/src/melee.rs``).
ENTRY = 0x142
ENTRY_END = 0x144


def in_entry(player) -> bool:
    """Whether ``player`` (a libmelee ``PlayerState``) is in the entry animation."""
    return ENTRY <= state_mod.action_id(player) <= ENTRY_END


def character(side: str):
    """libmelee's ``Character`` a ``side`` model plays (:data:`SIDE_CHARACTERS`)."""
    import melee

    return melee.Character[SIDE_CHARACTERS[side]]


class Bot:
    """The decision loop for one game, independent of Dolphin: :meth:`frame` takes
    each frame's libmelee ``GameState`` and returns the pad to press next."""

    def __init__(self, net: QNet, bot_port: int, opponent_port: int, fields=state_mod.ALL_FIELDS):
        self.net = net
        self.macros = net.macros
        self.bot_port = bot_port
        self.reader = state_mod.StateReader(opponent_port, bot_port, fields)
        self.pending: List[actions_mod.Pad] = []
        self.action: Optional[int] = None
        self.decisions = 0
        self.last_state = None
        #: The frame the bot took over on (its fighter past the entry animation).
        self.started_frame: Optional[int] = None

    def frame(self, gamestate) -> actions_mod.Pad:
        if self.started_frame is None:
            me = gamestate.players.get(self.bot_port)
            if me is None:
                raise KeyError(f"port {self.bot_port} is not in this frame (ports here: {sorted(gamestate.players)})")
            if in_entry(me):
                return actions_mod.NEUTRAL
            self.started_frame = int(gamestate.frame)
        state = self.reader.read(gamestate)
        self.last_state = state
        if not self.pending:
            a = self.net.greedy(state)
            self.action = a
            self.decisions += 1
            self.reader.set_shine_flag(actions_mod.is_shine(self.macros, a))
            self.pending = list(self.macros[a].script)
        return self.pending.pop(0)


class PlayError(RuntimeError):
    """A failure while playing; ``exit_code`` 2 when it is the user's input (e.g. a
    Dolphin path libmelee cannot use), 1 otherwise."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code


def discard(console) -> None:
    """Throw away a ``Console`` whose Dolphin never connected: remove its temporary
    user folder. (libmelee's ``stop()`` fails on a Slippi stream that never started.)"""
    temp = getattr(console, "temp_dir", None)
    if temp:
        shutil.rmtree(temp, ignore_errors=True)
        console.temp_dir = None


def prepare(
    dolphin: str,
    port: int,
    opponent_port: int,
    human: Optional[home_mod.HumanController] = None,
    dolphin_home: Optional[str] = None,
):
    """libmelee's ``Console`` with its temporary Dolphin user folder, the bot's
    ``Controller`` on ``port`` and the person's port set up, Dolphin not started yet:
    ``(console, controller, what the person plays with)``.

    ``dolphin_home``: the person's own Dolphin user folder, which libmelee copies into
    the temporary folder (their settings; the copy is thrown away by
    ``console.stop()``, their folder is not changed); None: an empty folder. ``human``:
    the person's controller on ``opponent_port`` (:mod:`.dolphin_home`); default the
    GameCube controller adapter without ``dolphin_home``, what the home has with it."""
    import melee

    if human is None:
        human = home_mod.home() if dolphin_home else home_mod.adapter()
    if human.kind == home_mod.HOME and not dolphin_home:
        raise PlayError("the person's controller from their Dolphin home needs --dolphin-home", exit_code=2)
    # With the person's own home, keep their display and replay settings (libmelee's
    # None); its defaults (fullscreen, replays saved) apply to an empty folder.
    home_kw = (
        dict(dolphin_home_path=dolphin_home, copy_home_directory=True, fullscreen=None, save_replays=None) if dolphin_home else {}
    )
    try:
        console = melee.Console(path=dolphin, **home_kw)
    except shutil.Error as e:  # copying the home: unreadable files in it
        raise PlayError(f"libmelee could not copy your Dolphin home {dolphin_home!r}: {e}", exit_code=2) from None
    except Exception as e:  # libmelee's checks of the Dolphin build (asserts, FileNotFoundError, ...)
        raise PlayError(
            f"libmelee cannot use {dolphin!r} as Slippi Dolphin ({type(e).__name__}: {e}); "
            "give --dolphin the Slippi Dolphin executable (e.g. the AppImage) or its folder",
            exit_code=2,
        ) from None
    home_dir = getattr(console, "dolphin_home_path", None)
    try:
        controller = melee.Controller(
            console=console, port=port, type=melee.ControllerType.STANDARD, fix_analog_inputs=False
        )
        # After libmelee's own setup of the bot's port, which rewrites GCPadNew.ini.
        if human.kind == home_mod.HOME:
            you = home_mod.home_port(home_dir, opponent_port)
        else:
            home_mod.configure_port(home_dir, opponent_port, human)
            you = human.describe(opponent_port)
    except home_mod.ConfigError as e:
        discard(console)
        raise PlayError(str(e), exit_code=2) from None
    except Exception as e:
        discard(console)
        raise PlayError(f"could not set up Dolphin's controllers in {home_dir!r}: {type(e).__name__}: {e}") from None
    return console, controller, you


def run(
    net: QNet,
    dolphin: str,
    iso: str,
    port: int = 2,
    opponent_port: int = 1,
    stage: str = "FINAL_DESTINATION",
    autostart: bool = False,
    human: Optional[home_mod.HumanController] = None,
    dolphin_home: Optional[str] = None,
    out=sys.stderr,
) -> int:
    """Start Dolphin (set up by :func:`prepare`), walk the menus (the bot picks the
    model's fighter), and play every game until Dolphin closes or Ctrl-C. Returns an
    exit code."""
    import melee

    stage_enum = melee.Stage[stage]
    fighter = character(net.meta.side)
    console, controller, you = prepare(dolphin, port, opponent_port, human, dolphin_home)
    try:
        console.run(iso_path=iso)
    except OSError as e:  # the executable cannot be run
        discard(console)
        raise PlayError(f"could not start Dolphin {dolphin!r}: {e}", exit_code=2) from None
    print("shine-bot: starting Dolphin and connecting to it", file=out)
    if not console.connect():
        console.stop()
        raise PlayError("could not connect to Dolphin's Slippi stream (is this Slippi Dolphin?)")
    if not controller.connect():
        console.stop()
        raise PlayError(f"could not connect the controller on port {port}")
    print(
        f"shine-bot: connected; the bot is on port {port} ({net.meta.side.title()}), you on port {opponent_port} "
        f"with {you}; model {net.meta.action_set} v{net.meta.model_version}",
        file=out,
    )
    menu = melee.MenuHelper()
    bot: Optional[Bot] = None
    last_frame = None
    try:
        while True:
            gs = console.step()
            if gs is None:
                continue
            if gs.menu_state in (melee.Menu.IN_GAME, melee.Menu.SUDDEN_DEATH):
                if bot is None or (last_frame is not None and gs.frame <= last_frame):
                    bot = _new_game(melee, gs, net, port, opponent_port, console, out)
                last_frame = gs.frame
                waiting = bot.started_frame is None
                pad_mod.press(controller, bot.frame(gs))
                if waiting and bot.started_frame is not None:
                    print(f"shine-bot: the bot plays from frame {bot.started_frame} (past the entry animation)", file=out)
            else:
                if bot is not None:
                    print(f"shine-bot: game over after {bot.decisions} decisions", file=out)
                bot, last_frame = None, None
                menu.menu_helper_simple(gs, controller, fighter, stage_enum, cpu_level=0, autostart=autostart)
    except KeyboardInterrupt:
        print("shine-bot: stopped", file=out)
    finally:
        console.stop()
    return 0


def _new_game(melee, gs, net: QNet, port: int, opponent_port: int, console, out) -> Bot:
    try:
        opponent = state_mod.pick_opponent(gs, port, opponent_port)
    except ValueError as e:
        raise PlayError(f"{e} (check --port / --opponent-port)") from None
    side = net.meta.side
    why = side_mismatch(side, port, gs.players[port].character.name)
    if why:
        raise PlayError(f"{why}: leave port {port}'s character to shine-bot, or play a model trained for that fighter")
    theirs = gs.players[opponent].character.name
    if theirs != SIDE_CHARACTERS[OTHER_SIDE[side]]:
        print(
            f"shine-bot: note: the model was trained against {OTHER_SIDE[side].title()}; port {opponent} plays {theirs.title()}",
            file=out,
        )
    fields = state_mod.recorded_fields(console)
    missing = sorted(state_mod.ALL_FIELDS - fields)
    if missing:
        print(f"shine-bot: warning: this Slippi stream lacks {', '.join(missing)}; they read as 0", file=out)
    print(f"shine-bot: game started (frame {gs.frame}), opponent on port {opponent}", file=out)
    return Bot(net, port, opponent, fields)
