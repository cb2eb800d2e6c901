"""Shine's model file and its forward pass, with numpy only.

A model is one safetensors file (``agent/src/model.rs``): ten float32 tensors named
as PyTorch's ``state_dict`` names them and string metadata::

    state (27) - shared 128, ReLU -+- value_hidden 512, ReLU - value 1 ------------+
                                   +- advantage_hidden 512, ReLU - advantage A - Q = V + A - mean(A)

The file is parsed here by hand (8-byte little-endian header length, JSON header,
raw little-endian bytes), so the ``safetensors`` package is not needed, and checked as
Shine's loader checks it. The forward pass repeats Shine's own float32 arithmetic
operation for operation (``QNet::forward`` for a batch of up to 4 rows, the path a
worker deciding for one game takes), so Q-values equal Shine's bit for bit.
"""

import json
import os
import struct
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import actions as actions_mod

FORMAT = "shine-dueling-dqn"
FORMAT_VERSION = 1
STATE_DIM = 27
SHARED = 128
STREAM = 512

#: Tensor names, in the order of Shine's ``TENSORS``.
TENSORS = (
    "shared.weight",
    "shared.bias",
    "value_hidden.weight",
    "value_hidden.bias",
    "value.weight",
    "value.bias",
    "advantage_hidden.weight",
    "advantage_hidden.bias",
    "advantage.weight",
    "advantage.bias",
)

#: The safetensors crate's limit on the JSON header.
MAX_HEADER_SIZE = 100_000_000


#: The fighter each side plays, as libmelee's ``Character`` names it, and the side it
#: was trained against (Shine's ``Side::other``): models learn Fox against Marth.
SIDE_CHARACTERS = {"fox": "FOX", "marth": "MARTH"}
OTHER_SIDE = {"fox": "marth", "marth": "fox"}


def side_mismatch(side: str, port: int, character: str) -> Optional[str]:
    """Why a ``side`` model cannot play port ``port``, whose fighter is libmelee's
    ``character`` (a ``Character`` name such as ``"MARTH"``), or None when it can: a
    model's actions and Q-values are its own fighter's, on another fighter they mean
    nothing."""
    if character == SIDE_CHARACTERS[side]:
        return None
    return f"port {port} plays {character.title()}, and this model plays {side.title()} (its file's side is {side!r})"


class ModelError(ValueError):
    """A model file that cannot be used, with what is wrong and what to do."""


@dataclass(frozen=True)
class ModelMeta:
    action_set: str
    action_count: int
    shared: int = SHARED
    stream: int = STREAM
    model_version: int = 0
    train_step: int = 0
    #: The fighter the model plays: "fox" or "marth" (files without the key: "fox").
    side: str = "fox"

    def shapes(self) -> List[Tuple[int, ...]]:
        """``[out, in]`` shape of each tensor in :data:`TENSORS` order (biases ``[out]``)."""
        h, s, a = self.shared, self.stream, self.action_count
        return [(h, STATE_DIM), (h,), (s, h), (s,), (1, s), (1,), (s, h), (s,), (a, s), (a,)]

    def to_metadata(self) -> Dict[str, str]:
        return {
            "format": FORMAT,
            "format_version": str(FORMAT_VERSION),
            "state_dim": str(STATE_DIM),
            "action_set": self.action_set,
            "action_count": str(self.action_count),
            "layers": f"{STATE_DIM},{self.shared},{self.stream}",
            "model_version": str(self.model_version),
            "train_step": str(self.train_step),
            "side": self.side,
        }


def _meta_from_map(m: Dict[str, str]) -> ModelMeta:
    """``ModelMeta::from_map``: the same checks, in the same order."""

    def get(k: str) -> str:
        if k not in m:
            raise ModelError(f"model metadata: missing key {k!r} (not a Shine model file?)")
        return m[k]

    def num(k: str) -> int:
        v = get(k)
        if not v.isascii() or not v.isdigit():
            raise ModelError(f"model metadata: {k!r} is not a number ({v!r})")
        return int(v)

    if get("format") != FORMAT:
        raise ModelError(f"model metadata: format is {m['format']!r}, expected {FORMAT!r} (not a Shine model file)")
    if num("format_version") != FORMAT_VERSION:
        raise ModelError(
            f"model metadata: format_version {m['format_version']} is not supported (expected {FORMAT_VERSION}); "
            "use a shine-bot release that matches the Shine version that wrote the model"
        )
    if num("state_dim") != STATE_DIM:
        raise ModelError(f"model metadata: state_dim {m['state_dim']} does not match {STATE_DIM}")
    try:
        layers = [int(s.strip()) for s in get("layers").split(",")]
    except ValueError:
        raise ModelError("model metadata: layers is not a list of numbers") from None
    if len(layers) != 3:
        raise ModelError(f"model metadata: layers {layers} must be [state, shared, stream]")
    _, shared, stream = layers
    action_count = num("action_count")
    if not (0 < action_count <= 4096 and 0 < shared <= 65536 and 0 < stream <= 65536):
        raise ModelError("model metadata: layer sizes out of range")
    # Files from before sides existed are Fox's: the only side there was.
    side = m.get("side", "fox")
    if side not in ("fox", "marth"):
        raise ModelError(f"model metadata: unknown side {side!r} (expected fox or marth)")
    return ModelMeta(
        action_set=get("action_set"),
        action_count=action_count,
        shared=shared,
        stream=stream,
        model_version=num("model_version"),
        train_step=num("train_step"),
        side=side,
    )


def parse_safetensors(data: bytes) -> Tuple[Dict[str, str], Dict[str, Tuple[str, Tuple[int, ...], bytes]]]:
    """The metadata and the tensors ``name -> (dtype, shape, raw bytes)`` of a
    safetensors file, checked as the ``safetensors`` crate checks it."""

    def bad(why: str) -> ModelError:
        return ModelError(f"not a safetensors file: {why}")

    if len(data) < 8:
        raise bad(f"{len(data)} bytes, too short for the 8-byte header length (truncated file?)")
    (n,) = struct.unpack("<Q", data[:8])
    if n > MAX_HEADER_SIZE:
        raise bad(f"header length {n} is too large")
    if 8 + n > len(data):
        raise bad(f"header of {n} bytes does not fit in {len(data)} bytes (truncated file?)")
    try:
        header = json.loads(data[8 : 8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise bad(f"header is not JSON: {e}") from None
    if not isinstance(header, dict):
        raise bad("header is not a JSON object")
    metadata = header.pop("__metadata__", None)
    if metadata is not None and (
        not isinstance(metadata, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())
    ):
        raise bad("__metadata__ must map strings to strings")
    body = memoryview(data)[8 + n :]
    sizes = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}
    tensors = {}
    spans = []
    for name, info in header.items():
        try:
            dtype, shape, (start, end) = info["dtype"], tuple(info["shape"]), info["data_offsets"]
            if not all(isinstance(d, int) and d >= 0 for d in shape) or not isinstance(start, int) or not isinstance(end, int):
                raise TypeError
        except (KeyError, TypeError, ValueError):
            raise bad(f"tensor {name!r} has a malformed entry") from None
        if not 0 <= start <= end:
            raise bad(f"tensor {name!r}: invalid offsets [{start}, {end})")
        if dtype in sizes and (end - start) != int(np.prod(shape, dtype=np.int64)) * sizes[dtype]:
            raise bad(f"tensor {name!r}: {end - start} bytes do not hold shape {list(shape)} of {dtype}")
        spans.append((start, end, name))
        tensors[name] = (dtype, shape, (start, end))
    # Tensors must tile the data exactly, as the crate requires.
    at = 0
    for start, end, name in sorted(spans):
        if start != at:
            raise bad(f"tensor {name!r} starts at byte {start}, expected {at}")
        at = end
    if at != len(body):
        raise bad(f"the tensors cover {at} bytes of data but the file holds {len(body)} (truncated or padded file?)")
    out = {name: (dtype, shape, bytes(body[s:e])) for name, (dtype, shape, (s, e)) in tensors.items()}
    return (metadata or {}), out


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, np.float32(0.0))


def _dense(w: np.ndarray, b: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``y[n, out] = b + dot(w[out], x[n])`` with Shine's float32 ``dot``: products
    summed into 32 lanes chunk by chunk, the lanes summed in order, then the tail
    (inputs past the last whole chunk of 32) summed in order and added."""
    lanes = 32
    n_in = w.shape[1]
    whole = n_in - n_in % lanes
    acc = np.zeros((x.shape[0], w.shape[0], lanes), dtype=np.float32)
    for c in range(0, whole, lanes):
        acc = acc + x[:, None, c : c + lanes] * w[None, :, c : c + lanes]
    s = np.zeros((x.shape[0], w.shape[0]), dtype=np.float32)
    for i in range(lanes):
        s = s + acc[:, :, i]
    tail = np.zeros_like(s)
    for i in range(whole, n_in):
        tail = tail + x[:, None, i] * w[None, :, i]
    return b[None, :] + (s + tail)


class QNet:
    """The Dueling DQN of a model file, for inference."""

    def __init__(self, meta: ModelMeta, weights: Sequence[np.ndarray]):
        self.meta = meta
        try:
            self.macros = actions_mod.action_set(meta.action_set)
        except actions_mod.UnknownActionSet as e:
            raise ModelError(f"model metadata: {e}") from None
        if meta.action_count != len(self.macros):
            raise ModelError(
                f"model metadata: action_count {meta.action_count} does not match the {meta.action_set!r} action set, "
                f"which has {len(self.macros)} actions in this adapter; the model and this shine-bot disagree "
                "on that action set: use a shine-bot from the same Shine version as the model"
            )
        w = [np.ascontiguousarray(t, dtype=np.float32) for t in weights]
        for name, t, shape in zip(TENSORS, w, meta.shapes()):
            if t.shape != shape:
                raise ModelError(f"tensor {name}: shape {list(t.shape)}, expected {list(shape)}")
        (self.ws, self.bs, self.wvh, self.bvh, self.wv, self.bv, self.wah, self.bah, self.wa, self.ba) = w

    @property
    def action_set(self) -> str:
        return self.meta.action_set

    @property
    def action_count(self) -> int:
        return self.meta.action_count

    def forward(self, states: np.ndarray, batch: int = 256) -> np.ndarray:
        """Q-values ``[n, actions]`` (float32) for states ``[n, 27]`` (or one ``[27]``
        state, giving ``[actions]``)."""
        x = np.asarray(states, dtype=np.float32)
        single = x.ndim == 1
        x = x.reshape(-1, STATE_DIM)
        out = np.empty((x.shape[0], self.action_count), dtype=np.float32)
        for i in range(0, x.shape[0], batch):
            out[i : i + batch] = self._forward(x[i : i + batch])
        return out[0] if single else out

    def _forward(self, x: np.ndarray) -> np.ndarray:
        h = _relu(_dense(self.ws, self.bs, x))
        v = _dense(self.wv, self.bv, _relu(_dense(self.wvh, self.bvh, h)))[:, 0]
        a = _dense(self.wa, self.ba, _relu(_dense(self.wah, self.bah, h)))
        # Shine: mean = sum in order / A; then each q += v - mean.
        total = np.zeros(a.shape[0], dtype=np.float32)
        for j in range(a.shape[1]):
            total = total + a[:, j]
        mean = total / np.float32(self.action_count)
        return a + (v - mean)[:, None]

    def greedy(self, state: np.ndarray) -> int:
        """The greedy action for one state."""
        return argmax(self.forward(state))


def argmax(q: np.ndarray) -> int:
    """Index of the largest Q-value, the first (lowest index) on ties: ``QNet::argmax``
    (a strict ``>`` scan from negative infinity; all-NaN gives 0)."""
    best, best_v = 0, -np.inf
    for i, v in enumerate(np.asarray(q, dtype=np.float32).tolist()):
        if v > best_v:
            best, best_v = i, v
    return best


def argmax_rows(q: np.ndarray) -> np.ndarray:
    """:func:`argmax` of each row of ``q [n, actions]``."""
    return np.array([argmax(row) for row in np.asarray(q)], dtype=np.int64)


def load_bytes(data: bytes) -> QNet:
    """Load and check a model file's bytes (``QNet::load``)."""
    metadata, tensors = parse_safetensors(data)
    if not metadata:
        raise ModelError("model metadata: no metadata (not a Shine model file)")
    meta = _meta_from_map(metadata)
    weights = []
    for name, shape in zip(TENSORS, meta.shapes()):
        if name not in tensors:
            raise ModelError(f"tensor {name}: missing")
        dtype, got_shape, raw = tensors[name]
        if dtype != "F32":
            raise ModelError(f"tensor {name}: dtype {dtype}, expected F32")
        if got_shape != shape:
            raise ModelError(f"tensor {name}: shape {list(got_shape)}, expected {list(shape)}")
        t = np.frombuffer(raw, dtype="<f4").astype(np.float32).reshape(shape)
        if not np.all(np.isfinite(t)):
            raise ModelError(f"tensor {name}: holds NaN or infinity")
        weights.append(t)
    return QNet(meta, weights)


def load(path: str) -> QNet:
    """Load and check the model file at ``path``."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ModelError(f"cannot read the model file {path!r}: {e.strerror or e}") from None
    try:
        return load_bytes(data)
    except ModelError as e:
        raise ModelError(f"{path}: {e}") from None


def save_bytes(meta: ModelMeta, weights: Sequence[np.ndarray]) -> bytes:
    """A model file (safetensors, little-endian float32, Shine's metadata) for
    ``weights`` in :data:`TENSORS` order. For tests and tools; Shine's manager writes
    the real ones."""
    if len(weights) != len(TENSORS):
        raise ModelError(f"{len(weights)} tensors given, {len(TENSORS)} expected")
    header: Dict[str, object] = {"__metadata__": meta.to_metadata()}
    blobs = []
    offset = 0
    for name, w, shape in zip(TENSORS, weights, meta.shapes()):
        a = np.asarray(w, dtype="<f4")
        if a.shape != shape:
            raise ModelError(f"tensor {name}: shape {list(a.shape)}, expected {list(shape)}")
        raw = a.tobytes()
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * (-len(h) % 8)  # align the data to 8 bytes, as the crate does
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def random_weights(meta: ModelMeta, rng: Optional[np.random.Generator] = None) -> List[np.ndarray]:
    """PyTorch's default ``nn.Linear`` init (uniform +/- 1/sqrt(in)), as Shine's
    ``random_weights``."""
    rng = rng or np.random.default_rng(0)
    shapes = meta.shapes()
    out = []
    for i, shape in enumerate(shapes):
        fan_in = shape[1] if i % 2 == 0 else shapes[i - 1][1]
        bound = 1.0 / np.sqrt(fan_in)
        out.append(rng.uniform(-bound, bound, size=shape).astype(np.float32))
    return out


def check_path(path: str) -> Optional[str]:
    """Why ``path`` cannot be a model file, or None."""
    if not os.path.exists(path):
        return f"model file {path!r} does not exist"
    if not os.path.isfile(path):
        return f"model path {path!r} is not a file"
    return None
