"""The 27-float state of the "Untouchable" agent, from libmelee's ``GameState``.

The contract is Shine's ``agent/src/state.rs``: 13 floats per player, the opponent
first, the bot second, then the shine flag (index 26). Shine reads them from Melee's
RAM; here they come from the Slippi data libmelee parses (the post-frame update),
with float32 arithmetic done in the same order as Shine's, so the values are the same
float32 numbers.

Per player (``p`` = 0 opponent, 1 bot; index ``13p + i``):

====  =====================  =============================================  ======================
 i    field                  libmelee ``PlayerState``                       normalisation
====  =====================  =============================================  ======================
 0    x                      ``position.x``                                 (x + 250) / 500
 1    y                      ``position.y``                                 (y + 150) / 300
 2    self air speed x       ``speed_air_x_self``                           (v + 20) / 40
 3    self speed y           ``speed_y_self``                               (v + 20) / 40
 4    action state           ``action.value`` (the raw id)                  / 382
 5    facing                 ``facing`` (True = right)                      1 or 0
 6    charging smash         not in Slippi's data                           always 0
 7    in air                 ``not on_ground``                              1 or 0
 8    shield                 ``shield_strength``                            / 60
 9    jumps used             max jumps - ``jumps_left``                     / 2
 10   hitlag frames left     ``hitlag_left``                                / 60
 11   percent                ``int(percent)`` (the displayed percent)       / 1000
 12   frames in action       counted here, as Shine's ``StateReader``        / 3600
====  =====================  =============================================  ======================

Fields a replay's Slippi version does not record (see :func:`recorded_fields`) are
read as: speeds 0, in air 0, jumps used 0, hitlag 0 (libmelee itself would give
``jumps_left`` = 1, i.e. one jump used, which is not a fact).
"""

import csv
import os
from typing import Dict, FrozenSet, Optional, Tuple

import numpy as np

STATE_DIM = 27
PLAYER_FLOATS = 13
SHINE_FLAG = 26
#: Shine's ``action::NORMALISER`` (``bridge/src/melee.rs``).
ACTION_NORMALISER = 382.0

X, Y, SPEED_X, SPEED_Y, ACTION, FACING, CHARGING, IN_AIR, SHIELD, JUMPS, HITLAG, PERCENT, ACTION_FRAMES = range(13)
FIELD_NAMES = (
    "x",
    "y",
    "speed_x",
    "speed_y",
    "action",
    "facing",
    "charging",
    "in_air",
    "shield",
    "jumps",
    "hitlag",
    "percent",
    "action_frames",
)

#: The post-frame fields this state uses beyond the oldest replays', with the offset
#: and size Slippi's replay spec gives them: a replay whose post-frame event is
#: shorter than ``offset + size`` does not record the field.
OPTIONAL_FIELDS: Dict[str, Tuple[int, int]] = {
    "on_ground": (0x2F, 1),  # Slippi 2.0.0
    "jumps_left": (0x32, 1),  # 2.0.0
    "speed_air_x_self": (0x35, 4),  # 3.5.0
    "speed_y_self": (0x39, 4),  # 3.5.0
    "hitlag_left": (0x49, 4),  # 3.8.0
}
ALL_FIELDS: FrozenSet[str] = frozenset(OPTIONAL_FIELDS)
POST_FRAME = 0x38

_F = np.float32


def recorded_fields(console) -> FrozenSet[str]:
    """Which of :data:`OPTIONAL_FIELDS` the game ``console`` streams records, from
    the post-frame event's size libmelee learned from the replay's payload sizes
    (``console.eventsize``; libmelee's own test for each field is the same). Call it
    after the first frame. Unknown size (0): assume every field is there."""
    size = int(console.eventsize[POST_FRAME])
    if size <= 0:
        return ALL_FIELDS
    # eventsize counts the command byte; the spec's offsets do too.
    return frozenset(name for name, (off, n) in OPTIONAL_FIELDS.items() if off + n <= size)


def _load_max_jumps() -> Dict[int, int]:
    """Max jumps (ground jump included) per internal character id, from libmelee's
    character data (``characterdata.csv``: ``Jumps`` = air jumps)."""
    out: Dict[int, int] = {}
    try:
        import melee

        path = os.path.join(os.path.dirname(os.path.realpath(melee.__file__)), "characterdata.csv")
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                out[int(float(row["CharacterIndex"]))] = int(float(row["Jumps"])) + 1
    except (ImportError, OSError, KeyError, ValueError):
        pass
    return out


#: Max jumps by internal character id: libmelee's data where it has the character,
#: else Kirby (0x04) and Jigglypuff (0x0F) 6 and every other character 2 (what
#: libmelee's data says too).
MAX_JUMPS: Dict[int, int] = {0x04: 6, 0x0F: 6}
MAX_JUMPS.update(_load_max_jumps())


def max_jumps(character_id: int) -> int:
    return MAX_JUMPS.get(int(character_id), 2)


def action_id(player) -> int:
    """The raw action-state id. libmelee turns ids it has no name for into an
    ``UnknownAnimation`` whose ``value`` is still the raw id, so ``action.value`` is
    always the number the game wrote."""
    value = getattr(player.action, "value", None)
    if value is None or isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"libmelee gave no numeric action-state id ({player.action!r}); this libmelee is not supported")
    return int(value)


def character_id(player) -> int:
    return int(getattr(player.character, "value", player.character))


def player_floats(player, frames_in_action: int, fields: FrozenSet[str] = ALL_FIELDS) -> np.ndarray:
    """One player's 13 floats (float32), Shine's ``player_state`` with a fighter."""
    out = np.zeros(PLAYER_FLOATS, dtype=np.float32)
    out[X] = (_F(player.position.x) + _F(250.0)) / _F(500.0)
    out[Y] = (_F(player.position.y) + _F(150.0)) / _F(300.0)
    vx = _F(player.speed_air_x_self) if "speed_air_x_self" in fields else _F(0.0)
    vy = _F(player.speed_y_self) if "speed_y_self" in fields else _F(0.0)
    out[SPEED_X] = (vx + _F(20.0)) / _F(40.0)
    out[SPEED_Y] = (vy + _F(20.0)) / _F(40.0)
    out[ACTION] = _F(action_id(player)) / _F(ACTION_NORMALISER)
    # facing is +1 / -1 in the game, clamped to [0, 1]; libmelee keeps facing > 0.
    out[FACING] = _F(1.0) if player.facing else _F(0.0)
    # Charging smash (fighter +0x2174 bit 0x2) is not in Slippi's data.
    out[CHARGING] = _F(0.0)
    in_air = ("on_ground" in fields) and not player.on_ground
    out[IN_AIR] = _F(1.0) if in_air else _F(0.0)
    out[SHIELD] = _F(player.shield_strength) / _F(60.0)
    used = max(0, max_jumps(character_id(player)) - int(player.jumps_left)) if "jumps_left" in fields else 0
    out[JUMPS] = _F(used) / _F(2.0)
    hitlag = _F(player.hitlag_left) if "hitlag_left" in fields else _F(0.0)
    out[HITLAG] = hitlag / _F(60.0)
    # The displayed percent is a u16: the float's integer part.
    out[PERCENT] = _F(int(player.percent)) / _F(1000.0)
    out[ACTION_FRAMES] = _F(frames_in_action) / _F(3600.0)
    return out


class StateReader:
    """Reads 27-float states frame after frame for one game (Shine's ``StateReader``):
    keeps the frames-in-action counters and the shine flag. Call :meth:`read` exactly
    once per frame so the counters stay true."""

    def __init__(self, opponent_port: int, bot_port: int, fields: FrozenSet[str] = ALL_FIELDS):
        if opponent_port == bot_port:
            raise ValueError("the opponent and the bot must be on different ports")
        self.ports = (opponent_port, bot_port)
        self.fields = fields
        self.reset()

    def reset(self):
        self.last_action: list = [None, None]
        self.frames_in_action = [0, 0]
        self.shine_flag = False

    def set_shine_flag(self, shine: bool):
        """Set by the player: whether the macro-action just taken was "shine"."""
        self.shine_flag = bool(shine)

    def read(self, gamestate) -> np.ndarray:
        state = np.zeros(STATE_DIM, dtype=np.float32)
        for p, port in enumerate(self.ports):
            player = gamestate.players.get(port)
            if player is None:
                raise KeyError(f"port {port} is not in this frame (ports here: {sorted(gamestate.players)})")
            act = action_id(player)
            if act == self.last_action[p]:
                self.frames_in_action[p] = min(self.frames_in_action[p] + 1, 0xFFFFFFFF)
            else:
                self.frames_in_action[p] = 0
            self.last_action[p] = act
            state[p * PLAYER_FLOATS : (p + 1) * PLAYER_FLOATS] = player_floats(player, self.frames_in_action[p], self.fields)
        state[SHINE_FLAG] = _F(1.0) if self.shine_flag else _F(0.0)
        return state


def describe(state: np.ndarray) -> Dict[str, float]:
    """Named floats of a state, for logs."""
    out = {}
    for p, who in enumerate(("opponent", "bot")):
        for i, name in enumerate(FIELD_NAMES):
            out[f"{who}.{name}"] = float(state[p * PLAYER_FLOATS + i])
    out["shine"] = float(state[SHINE_FLAG])
    return out


def ports_in(gamestate) -> Tuple[int, ...]:
    return tuple(sorted(int(p) for p in gamestate.players))


def pick_opponent(gamestate, bot_port: int, opponent_port: Optional[int] = None) -> int:
    """The opponent's port: the one given, or the one other player in the game."""
    ports = ports_in(gamestate)
    if bot_port not in ports:
        raise ValueError(f"port {bot_port} is not in the game; the ports in it are {', '.join(map(str, ports))}")
    if opponent_port is not None:
        if opponent_port not in ports:
            raise ValueError(f"port {opponent_port} is not in the game; the ports in it are {', '.join(map(str, ports))}")
        return opponent_port
    others = [p for p in ports if p != bot_port]
    if len(others) != 1:
        raise ValueError(
            f"the game has {len(others)} players besides port {bot_port} (ports {', '.join(map(str, ports))}); "
            "name the opponent with --opponent-port"
        )
    return others[0]
