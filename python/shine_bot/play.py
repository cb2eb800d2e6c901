"""Play a Shine model in Slippi Dolphin through libmelee.

The bot plays as Shine's worker does: on a frame where no macro is running it reads
the 27-float state, picks the greedy action, sets the shine flag when that action is
"shine", and then presses the macro's pads one per frame until the script ends; only
then does it decide again. The state is read on every frame (the frames-in-action
counters need every frame), whether or not a decision is due.
"""

import logging
import sys
from typing import List, Optional

from . import actions as actions_mod
from . import pad as pad_mod
from . import state as state_mod
from .model import QNet

log = logging.getLogger("shine_bot")


class Bot:
    """The decision loop for one game, independent of Dolphin: :meth:`frame` takes
    each frame's libmelee ``GameState`` and returns the pad to press next."""

    def __init__(self, net: QNet, bot_port: int, opponent_port: int, fields=state_mod.ALL_FIELDS):
        self.net = net
        self.macros = net.macros
        self.reader = state_mod.StateReader(opponent_port, bot_port, fields)
        self.pending: List[actions_mod.Pad] = []
        self.action: Optional[int] = None
        self.decisions = 0
        self.last_state = None

    def frame(self, gamestate) -> actions_mod.Pad:
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


def run(
    net: QNet,
    dolphin: str,
    iso: str,
    port: int = 2,
    opponent_port: int = 1,
    stage: str = "FINAL_DESTINATION",
    autostart: bool = False,
    out=sys.stderr,
) -> int:
    """Start Dolphin, walk the menus (the bot picks Fox), and play every game until
    Dolphin closes or Ctrl-C. Returns an exit code."""
    import melee

    stage_enum = melee.Stage[stage]
    try:
        console = melee.Console(path=dolphin)
        controller = melee.Controller(
            console=console, port=port, type=melee.ControllerType.STANDARD, fix_analog_inputs=False
        )
    except Exception as e:  # libmelee's checks of the Dolphin build (asserts, FileNotFoundError, ...)
        raise PlayError(
            f"libmelee cannot use {dolphin!r} as Slippi Dolphin ({type(e).__name__}: {e}); "
            "give --dolphin the Slippi Dolphin executable (e.g. the AppImage) or its folder",
            exit_code=2,
        ) from None
    console.run(iso_path=iso)
    print("shine-bot: starting Dolphin and connecting to it", file=out)
    if not console.connect():
        console.stop()
        raise PlayError("could not connect to Dolphin's Slippi stream (is this Slippi Dolphin?)")
    if not controller.connect():
        console.stop()
        raise PlayError(f"could not connect the controller on port {port}")
    print(
        f"shine-bot: connected; the bot is on port {port} (Fox), the opponent on port {opponent_port}; "
        f"model {net.meta.action_set} v{net.meta.model_version}",
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
                pad_mod.press(controller, bot.frame(gs))
            else:
                if bot is not None:
                    print(f"shine-bot: game over after {bot.decisions} decisions", file=out)
                bot, last_frame = None, None
                menu.menu_helper_simple(
                    gs, controller, melee.Character.FOX, stage_enum, cpu_level=0, autostart=autostart
                )
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
    me = gs.players[port]
    if me.character != melee.Character.FOX:
        raise PlayError(
            f"the bot on port {port} is {me.character.name}, not Fox: Shine's models play Fox "
            "(leave port {port}'s character to shine-bot)".format(port=port)
        )
    fields = state_mod.recorded_fields(console)
    missing = sorted(state_mod.ALL_FIELDS - fields)
    if missing:
        print(f"shine-bot: warning: this Slippi stream lacks {', '.join(missing)}; they read as 0", file=out)
    print(f"shine-bot: game started (frame {gs.frame}), opponent on port {opponent}", file=out)
    return Bot(net, port, opponent, fields)
