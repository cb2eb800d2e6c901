"""``python -m shine_bot``: play a Shine model in Slippi Dolphin, or dump a replay's states."""

import argparse
import os
import sys
from typing import List, Optional

from . import __version__
from .dolphin_home import ADAPTER, HOME

STAGES = ("FINAL_DESTINATION", "BATTLEFIELD", "POKEMON_STADIUM", "DREAMLAND", "FOUNTAIN_OF_DREAMS", "YOSHIS_STORY")

DESCRIPTION = """\
Run a Shine model (a Dueling DQN trained by Shine, one .safetensors file) as a
Super Smash Bros. Melee bot in Slippi Dolphin through libmelee, or compute the
27-float states Shine's models see from a Slippi replay.

The bot plays the fighter its model was trained as (the file's side: Fox, or Marth).
Each model names its action set ("untouchable": 5 macro-actions, the paper's nothing /
shine / spot dodge / roll left / roll right; or "fight": 23 pad states held 4
frames). The bot decides when the macro it is playing ends, always greedily (the
action with the largest Q-value).

exit codes: 0 done, 1 failure while running (Dolphin, the game), 2 bad input
(missing files, bad ports, a model this adapter cannot use, a port not in a replay).
"""

PLAY_HELP = """\
Start Slippi Dolphin with the Melee image, let the bot pick the model's fighter (Fox
or Marth, the model file's side) on --port through the character menu (libmelee's
MenuHelper), and press the model's macro-actions, frame by frame, in
every game until Dolphin closes or Ctrl-C. The bot takes over once its fighter is
past the entry animation, as in Shine's own Dolphin backend; until then it holds
its pad neutral.

You play on --opponent-port with your own controller: pick your character, press
START and pick the stage (--autostart has the bot start the match once everyone is
ready, on --stage). Dolphin runs with
a temporary user folder: an empty one, or with --dolphin-home a copy of yours (your
folder itself is not changed). Your port is set up there for:
  --human-controller adapter  Nintendo's GameCube controller adapter (Dolphin.ini
                              SIDevice = 12 on your port; plug into the adapter's
                              port of the same number; on Linux Dolphin needs the
                              adapter's udev rule). The default without
                              --dolphin-home.
  --human-controller home     whatever your Dolphin home has on that port (needs
                              --dolphin-home; the default with it); refused if it
                              has nothing plugged there.
  --human-profile FILE        any other pad: a Dolphin GCPad profile (save one in
                              Dolphin: Controllers, Standard Controller, Configure,
                              Profile, Save; it is Config/Profiles/GCPad/NAME.ini
                              in the Dolphin user folder). Its [Profile] lines,
                              Device included, become your port's [GCPad<n>] in
                              GCPadNew.ini, with SIDevice = 6.
"""

STATES_HELP = """\
Read a Slippi replay (.slp) with libmelee, without Dolphin, and write one CSV row per
frame: the 27 floats Shine's model sees with --port as the bot (its 13 floats
second) and --opponent-port as the opponent (first).

CSV: header "frame,s0,...,s26" (plus ",action" with --model); "frame" is the game's
frame number, from Slippi's first frame (-123); s0-s12 the opponent, s13-s25 the
bot, s26 the shine flag (0: nothing was played); floats as format(v, '.9g'), which
reads back as the same float32; "action" the model's greedy action on the row
(ties to the lowest index). Fields a replay's Slippi version does not record are
written as: self speeds 0, in air 0, jumps used 0, hitlag 0 (a note says which).
Charging smash is never in Slippi's data: always 0.
"""


class UsageError(Exception):
    pass


def _port(s: str) -> int:
    try:
        p = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"port {s!r} is not a number (1-4)") from None
    if not 1 <= p <= 4:
        raise argparse.ArgumentTypeError(f"port {p} is not a controller port (1-4)")
    return p


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m shine_bot", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--version", action="version", version=f"shine-bot {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    play = sub.add_parser(
        "play", help="play a model in Slippi Dolphin", description=PLAY_HELP, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    play.add_argument("--model", required=True, metavar="FILE", help="the model file (.safetensors) from Shine's manager or dashboard")
    play.add_argument(
        "--dolphin",
        required=True,
        metavar="PATH",
        help="Slippi Dolphin: its executable, or the folder holding it (libmelee's Console path)",
    )
    play.add_argument("--iso", required=True, metavar="PATH", help="the Melee NTSC 1.02 disc image")
    play.add_argument("--port", type=_port, default=2, metavar="N", help="the bot's controller port, 1-4 (default 2)")
    play.add_argument(
        "--opponent-port", type=_port, default=1, metavar="M", help="your controller port (the bot's opponent), 1-4 (default 1)"
    )
    play.add_argument(
        "--stage",
        choices=STAGES,
        help="with --autostart, the stage the bot picks (default FINAL_DESTINATION); without it you pick the stage",
    )
    play.add_argument(
        "--autostart", action="store_true", help="the bot starts the match once everyone is ready and picks --stage (for bot-only setups)"
    )
    play.add_argument(
        "--dolphin-home",
        metavar="DIR",
        help="your Slippi Dolphin user folder (the one holding Config/): Dolphin runs with a copy of it, your settings "
        "and controller included (default: an empty temporary folder)",
    )
    human = play.add_mutually_exclusive_group()
    human.add_argument(
        "--human-controller",
        choices=(ADAPTER, HOME),
        help="your controller on --opponent-port: the GameCube controller adapter, or what your --dolphin-home has "
        "there (default: home with --dolphin-home, adapter without)",
    )
    human.add_argument("--human-profile", metavar="FILE", help="your controller on --opponent-port from a Dolphin GCPad profile (a standard pad)")

    states = sub.add_parser(
        "states",
        help="write a replay's 27-float states as CSV",
        description=STATES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    states.add_argument("--slp", required=True, metavar="FILE", help="the Slippi replay")
    states.add_argument("--port", type=_port, required=True, metavar="N", help="the bot's port in the replay, 1-4")
    states.add_argument(
        "--opponent-port",
        type=_port,
        metavar="M",
        help="the opponent's port (default: the one other player; an error if there is not exactly one)",
    )
    states.add_argument(
        "--model", metavar="FILE", help="also write each frame's greedy action of this model (--port must play its side's fighter)"
    )
    states.add_argument("--out", required=True, metavar="FILE.csv", help="where to write the CSV")

    info = sub.add_parser("info", help="check a model file and print its metadata and action set")
    info.add_argument("--model", required=True, metavar="FILE", help="the model file (.safetensors)")
    return p


def _need_file(path: str, what: str) -> None:
    if not os.path.exists(path):
        raise UsageError(f"{what} {path!r} does not exist")


def _human_controller(args):
    """The person's controller from --dolphin-home, --human-controller and
    --human-profile, checked before Dolphin starts."""
    from . import dolphin_home as home_mod

    if args.dolphin_home is not None:
        home_mod.check_home(args.dolphin_home)
    if args.human_profile is not None:
        _need_file(args.human_profile, "GCPad profile (--human-profile)")
        return home_mod.load_profile(args.human_profile)
    kind = args.human_controller or (HOME if args.dolphin_home is not None else ADAPTER)
    if kind == HOME:
        if args.dolphin_home is None:
            raise UsageError("--human-controller home takes your controller from your Dolphin home: give it with --dolphin-home DIR")
        home_mod.home_port(args.dolphin_home, args.opponent_port)  # refuses a port with nothing plugged
        return home_mod.home()
    return home_mod.adapter()


def main(argv: Optional[List[str]] = None) -> int:
    args = parser().parse_args(argv)
    from . import model as model_mod

    try:
        if args.command == "info":
            _need_file(args.model, "model file")
            net = model_mod.load(args.model)
            m = net.meta
            print(f"{args.model}: {model_mod.FORMAT} v{model_mod.FORMAT_VERSION}, model_version {m.model_version}, train_step {m.train_step}")
            print(f"side {m.side} (plays {model_mod.SIDE_CHARACTERS[m.side].title()}, against {model_mod.OTHER_SIDE[m.side].title()})")
            print(f"layers {model_mod.STATE_DIM},{m.shared},{m.stream}; action set {m.action_set!r} ({m.action_count} actions):")
            for i, mac in enumerate(net.macros):
                print(f"  {i:2d} {mac.name} ({len(mac.script)} frames)")
            return 0
        if args.command == "states":
            from . import states as states_mod

            _need_file(args.slp, "replay")
            if args.opponent_port is not None and args.opponent_port == args.port:
                raise UsageError(f"--port and --opponent-port are both {args.port}: the bot and its opponent need different ports")
            if args.model:
                _need_file(args.model, "model file")
            out_dir = os.path.dirname(os.path.abspath(args.out))
            if not os.path.isdir(out_dir):
                raise UsageError(f"the folder of --out, {out_dir!r}, does not exist")
            rows, info = states_mod.run(args.slp, args.port, args.out, args.opponent_port, args.model)
            print(
                f"shine-bot: wrote {rows} frames to {args.out} (bot port {args.port} {info.get('bot_character')}, "
                f"opponent port {info.get('opponent_port')} {info.get('opponent_character')}, Slippi {info.get('slp_version')})",
                file=sys.stderr,
            )
            return 0
        if args.command == "play":
            from . import play as play_mod

            if args.port == args.opponent_port:
                raise UsageError(f"--port and --opponent-port are both {args.port}: the bot and its opponent need different ports")
            if args.stage is not None and not args.autostart:
                # libmelee's MenuHelper picks a stage only for the controller that starts
                # the match; without --autostart that is you.
                raise UsageError(f"--stage {args.stage} needs --autostart: without it you press START and pick the stage yourself")
            _need_file(args.model, "model file")
            _need_file(args.dolphin, "Dolphin path")
            _need_file(args.iso, "Melee image (--iso)")
            if not os.path.isfile(args.iso):
                raise UsageError(f"Melee image {args.iso!r} is not a file")
            human = _human_controller(args)
            net = model_mod.load(args.model)
            try:
                return play_mod.run(
                    net,
                    args.dolphin,
                    args.iso,
                    args.port,
                    args.opponent_port,
                    args.stage or "FINAL_DESTINATION",
                    args.autostart,
                    human=human,
                    dolphin_home=args.dolphin_home,
                )
            except play_mod.PlayError as e:
                print(f"shine-bot: error: {e}", file=sys.stderr)
                return e.exit_code
    except UsageError as e:
        print(f"shine-bot: error: {e}", file=sys.stderr)
        return 2
    except model_mod.ModelError as e:
        print(f"shine-bot: error: model: {e}", file=sys.stderr)
        return 2
    except ValueError as e:  # StatesError, a port not in the replay, an unknown action set
        print(f"shine-bot: error: {e}", file=sys.stderr)
        return 2
    return 2
