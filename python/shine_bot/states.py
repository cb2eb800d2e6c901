"""The ``states`` command: a Slippi replay's 27-float states as CSV, read with libmelee
without Dolphin.

CSV format (a contract other tools compare against): a header
``frame,s0,s1,...,s26`` (``,action`` appended when a model is given), then one row per
frame libmelee yields, in order, starting with Slippi's first frame (-123). ``frame``
is the game's frame number; ``s0..s12`` are the opponent's floats, ``s13..s25`` the
bot's, ``s26`` the shine flag (always 0 here: no macro was played); each float is
written with ``format(v, '.9g')``, which reads back as the same float32. ``action`` is
the model's greedy action on that row's state (ties to the lowest index).
"""

import os
import sys
import tempfile
from typing import List, Optional, Tuple

import numpy as np

from . import model as model_mod
from . import state as state_mod


class StatesError(ValueError):
    pass


def read_states(slp: str, port: int, opponent_port: Optional[int] = None, warn="stderr"):
    """``(frames, states [n, 27] float32, info)`` of the replay at ``slp`` from
    ``port``'s point of view."""
    import melee

    if warn == "stderr":
        warn = sys.stderr
    # allow_old_version: replays older than Slippi 3.0.0 have no frame bookends;
    # libmelee then ends each frame at the next frame's first event.
    console = melee.Console(path=slp, is_dolphin=False, allow_old_version=True)
    try:
        if not console.connect():
            raise StatesError(f"libmelee could not open the replay {slp!r}")
    except StatesError:
        raise
    except Exception as e:  # ubjson / OS errors: not a readable replay
        raise StatesError(f"libmelee could not read the replay {slp!r}: {type(e).__name__}: {e}") from None
    frames: List[int] = []
    states: List[np.ndarray] = []
    reader = None
    info = {}
    while True:
        try:
            gs = console.step()
        except Exception as e:  # a damaged replay: libmelee fails inside its parser
            raise StatesError(f"libmelee failed reading the replay {slp!r} after {len(frames)} frames: {type(e).__name__}: {e}") from None
        if gs is None:
            break
        if reader is None:
            opponent = state_mod.pick_opponent(gs, port, opponent_port)
            fields = state_mod.recorded_fields(console)
            reader = state_mod.StateReader(opponent, port, fields)
            missing = sorted(state_mod.ALL_FIELDS - fields)
            info = {
                "slp_version": getattr(console, "slp_version", "?"),
                "opponent_port": opponent,
                "bot_character": gs.players[port].character.name,
                "opponent_character": gs.players[opponent].character.name,
                "missing_fields": missing,
            }
            if missing and warn is not None:
                print(
                    f"shine-bot: note: this replay (Slippi {info['slp_version']}) does not record "
                    f"{', '.join(missing)}; written as speeds 0, in air 0, jumps used 0, hitlag 0",
                    file=warn,
                )
        try:
            states.append(reader.read(gs))
        except KeyError as e:
            raise StatesError(f"frame {int(gs.frame)}: {e.args[0]}") from None
        frames.append(int(gs.frame))
    if reader is None:
        raise StatesError(f"the replay {slp!r} holds no frames")
    return frames, np.stack(states).astype(np.float32), info


def header(with_action: bool) -> List[str]:
    cols = ["frame"] + [f"s{i}" for i in range(state_mod.STATE_DIM)]
    return cols + (["action"] if with_action else [])


def fmt(v) -> str:
    return format(float(v), ".9g")


def write_csv(path: str, frames, states: np.ndarray, actions: Optional[np.ndarray] = None) -> None:
    """Write the CSV (atomically: a temporary file renamed over ``path``)."""
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".shine-states-", suffix=".csv", dir=d)
    try:
        with os.fdopen(fd, "w", newline="") as f:
            f.write(",".join(header(actions is not None)) + "\n")
            for i, (frame, row) in enumerate(zip(frames, states)):
                cells = [str(int(frame))] + [fmt(v) for v in row]
                if actions is not None:
                    cells.append(str(int(actions[i])))
                f.write(",".join(cells) + "\n")
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def run(slp: str, port: int, out: str, opponent_port: Optional[int] = None, model: Optional[str] = None, log="stderr") -> Tuple[int, dict]:
    """The ``states`` command; returns ``(rows written, info)``."""
    net = model_mod.load(model) if model else None
    frames, states, info = read_states(slp, port, opponent_port, warn=log)
    why = model_mod.side_mismatch(net.meta.side, port, info["bot_character"]) if net is not None else None
    if why:
        # A model's actions on another fighter's states mean nothing.
        want = model_mod.SIDE_CHARACTERS[net.meta.side].title()
        raise StatesError(f"{why}: pass --port with {want}'s port in this replay, or leave out --model to write the states alone")
    actions = model_mod.argmax_rows(net.forward(states)) if net is not None else None
    write_csv(out, frames, states, actions)
    return len(frames), info
