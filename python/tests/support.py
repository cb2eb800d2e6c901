"""Shared helpers for the tests: import path, model files, fake game states."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)
REPO = os.path.dirname(PYTHON_DIR)
DATA = os.path.join(HERE, "data")
REPLAY = os.path.join(DATA, "game.slp")

# Run from a checkout without installing: the package beside this folder wins.
if PYTHON_DIR not in sys.path:
    sys.path.insert(0, PYTHON_DIR)

import numpy as np  # noqa: E402

from shine_bot import model as model_mod  # noqa: E402


def rust_source(*parts):
    """The text of a file of Shine's Rust source, or None outside a checkout."""
    path = os.path.join(REPO, *parts)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return f.read()


def make_model(action_set="untouchable", action_count=5, seed=1, shared=128, stream=512, **meta_kw):
    meta = model_mod.ModelMeta(action_set, action_count, shared=shared, stream=stream, model_version=3, train_step=1234, **meta_kw)
    weights = model_mod.random_weights(meta, np.random.default_rng(seed))
    return meta, weights


def raw_model_bytes(metadata, tensors):
    """A safetensors file from a metadata dict and ``[(name, dtype, shape, bytes)]``,
    with no checks: for malformed files."""
    import json
    import struct

    header = {"__metadata__": metadata}
    off = 0
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        off += len(raw)
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + b"".join(t[3] for t in tensors)


def player(x=0.0, y=0.0, action=0x0E, facing=True, percent=0.0, shield=60.0, jumps_left=2, on_ground=True,
           vx=0.0, vy=0.0, hitlag=0, character=None):
    """A libmelee PlayerState with the fields the state uses."""
    import melee

    p = melee.PlayerState()
    p.character = character if character is not None else melee.Character.FOX
    p.position.x = np.float32(x)
    p.position.y = np.float32(y)
    try:
        p.action = melee.Action(action)
    except ValueError:
        p.action = melee.gamestate.UnknownAnimation(action)
    p.facing = facing
    p.percent = np.float32(percent)
    p.shield_strength = np.float32(shield)
    p.jumps_left = jumps_left
    p.on_ground = on_ground
    p.speed_air_x_self = np.float32(vx)
    p.speed_y_self = np.float32(vy)
    p.hitlag_left = hitlag
    return p


def gamestate(frame, players):
    import melee

    gs = melee.GameState()
    gs.frame = frame
    gs.players = dict(players)
    return gs
