"""Action sets: each action is a macro, a short script of pads, one per frame.

A copy of Shine's ``agent/src/actions.rs`` (and of the pad of ``bridge/src/pad.rs``):
the same action sets, the same macros in the same order, the same pads frame by frame.
A model's output index ``i`` means macro ``i`` of the action set named in its metadata.

- ``untouchable``: the paper's five macro-actions: nothing, shine then jump out,
  spot dodge, roll left, roll right.
- ``fight``: discrete pad states for fighting, each held 4 frames.
"""

from dataclasses import dataclass
from typing import Dict, List, Tuple

import numpy as np

#: The 12 digital buttons, in the spelling of Dolphin's pipe protocol (and of
#: libmelee's ``Button`` values), in Shine's ``Button::ALL`` order.
BUTTONS = ("A", "B", "X", "Y", "Z", "START", "L", "R", "D_UP", "D_DOWN", "D_LEFT", "D_RIGHT")


def f32(v: float) -> float:
    """``v`` rounded to the nearest float32, as a Python float (Shine's pads are f32)."""
    return float(np.float32(v))


@dataclass(frozen=True)
class Pad:
    """One frame's controller state.

    Sticks are ``(x, y)`` with each axis in [0, 1], 0.5 neutral (0 left / down,
    1 right / up); ``l`` and ``r`` are the analog triggers in [0, 1]. ``buttons`` holds
    the names (from :data:`BUTTONS`) of the digital buttons held.
    """

    buttons: frozenset = frozenset()
    main: Tuple[float, float] = (0.5, 0.5)
    c: Tuple[float, float] = (0.5, 0.5)
    l: float = 0.0  # noqa: E741 (the trigger's name)
    r: float = 0.0

    def __post_init__(self):
        unknown = set(self.buttons) - set(BUTTONS)
        if unknown:
            raise ValueError(f"unknown button(s) {sorted(unknown)}; expected some of {' '.join(BUTTONS)}")
        object.__setattr__(self, "buttons", frozenset(self.buttons))
        object.__setattr__(self, "main", (f32(self.main[0]), f32(self.main[1])))
        object.__setattr__(self, "c", (f32(self.c[0]), f32(self.c[1])))
        object.__setattr__(self, "l", f32(self.l))
        object.__setattr__(self, "r", f32(self.r))

    def pressed(self, button: str) -> bool:
        return button in self.buttons

    def with_(self, *buttons: str, main=None, c=None, l=None, r=None) -> "Pad":  # noqa: E741
        """This pad with ``buttons`` also held and the given sticks / triggers."""
        return Pad(
            buttons=self.buttons | frozenset(buttons),
            main=self.main if main is None else main,
            c=self.c if c is None else c,
            l=self.l if l is None else l,
            r=self.r if r is None else r,
        )


NEUTRAL = Pad()

#: Stick y docs/melee-reference.md (section 1) gives for rolls: ``(0, 89/255)`` and ``(1, 89/255)``.
ROLL_Y = 89.0 / 255.0
DOWN = (0.5, 0.0)
STICK_NEUTRAL = (0.5, 0.5)


@dataclass(frozen=True)
class Macro:
    name: str
    script: Tuple[Pad, ...]

    def __len__(self):
        return len(self.script)


def _macro(name: str, *parts: Tuple[Pad, int]) -> Macro:
    """A macro from ``(pad, frames)`` runs."""
    script: List[Pad] = []
    for pad, n in parts:
        script.extend([pad] * n)
    return Macro(name, tuple(script))


def _untouchable() -> List[Macro]:
    n = NEUTRAL
    shield_down = n.with_("L", main=DOWN, l=1.0)

    def roll(x: float) -> Pad:
        return n.with_("L", main=(x, ROLL_Y), l=1.0)

    return [
        _macro("nothing", (n, 1)),
        # B + down, hold the reflector briefly, jump out (X), let the jump start.
        _macro("shine", (n.with_("B", main=DOWN), 1), (n.with_(main=DOWN), 2), (n.with_("X"), 1), (n, 4)),
        # Reference: 10 frames L + down, 12 neutral.
        _macro("spot_dodge", (shield_down, 10), (n, 12)),
        _macro("roll_left", (roll(0.0), 10), (n, 20)),
        _macro("roll_right", (roll(1.0), 10), (n, 20)),
    ]


def _fight() -> List[Macro]:
    hold = 4
    n = NEUTRAL

    def held(name: str, pad: Pad) -> Macro:
        return _macro(name, (pad, hold))

    def press(name: str, button: str, main) -> Macro:
        # A button press on the first frame with the stick held throughout.
        return _macro(name, (n.with_(button, main=main), 1), (n.with_(main=main), hold - 1))

    def cstick(name: str, x: float, y: float) -> Macro:
        return _macro(name, (n.with_(c=(x, y)), 1), (n, hold - 1))

    left, right, up, mid = (0.0, 0.5), (1.0, 0.5), (0.5, 1.0), STICK_NEUTRAL
    return [
        held("nothing", n),
        held("left", n.with_(main=left)),
        held("right", n.with_(main=right)),
        held("crouch", n.with_(main=DOWN)),
        press("jump", "X", mid),
        press("jump_left", "X", left),
        press("jump_right", "X", right),
        press("jab", "A", mid),
        press("ftilt_left", "A", (0.2, 0.5)),
        press("ftilt_right", "A", (0.8, 0.5)),
        press("utilt", "A", (0.5, 0.8)),
        press("dtilt", "A", (0.5, 0.2)),
        cstick("smash_left", 0.0, 0.5),
        cstick("smash_right", 1.0, 0.5),
        cstick("smash_up", 0.5, 1.0),
        cstick("smash_down", 0.5, 0.0),
        press("special", "B", mid),
        press("shine", "B", DOWN),
        press("up_special", "B", up),
        held("shield", n.with_("R", r=1.0)),
        held("spot_dodge", n.with_("L", main=DOWN, l=1.0)),
        held("roll_left", n.with_("L", main=left, l=1.0)),
        held("roll_right", n.with_("L", main=right, l=1.0)),
    ]


#: Every action set this adapter knows, by the name models carry in their metadata.
ACTION_SETS: Dict[str, Tuple[Macro, ...]] = {
    "untouchable": tuple(_untouchable()),
    "fight": tuple(_fight()),
}

#: Index of "nothing" in every action set.
NOTHING = 0
SHINE_NAME = "shine"


class UnknownActionSet(ValueError):
    pass


def action_set(name: str) -> Tuple[Macro, ...]:
    """The macros of the action set ``name``; a clear error for one this adapter lacks."""
    try:
        return ACTION_SETS[name]
    except KeyError:
        raise UnknownActionSet(
            f"unknown action set {name!r}: this adapter knows {', '.join(sorted(ACTION_SETS))}; "
            "use a model trained with one of those, or a newer shine-bot that knows this one"
        ) from None


def is_shine(macros: Tuple[Macro, ...], action: int) -> bool:
    """Whether ``action`` is the shine (sets the state's shine flag), as Shine decides it:
    by the macro's name."""
    return 0 <= action < len(macros) and macros[action].name == SHINE_NAME
