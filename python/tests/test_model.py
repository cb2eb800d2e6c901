import os
import struct
import tempfile
import unittest

import numpy as np

import support
from support import make_model, raw_model_bytes
from shine_bot import model as model_mod
from shine_bot.model import ModelError


def reference64(weights, x):
    """A straightforward float64 recomputation of the network."""
    w = [np.asarray(t, dtype=np.float64) for t in weights]
    x = np.asarray(x, dtype=np.float64)
    h = np.maximum(w[0] @ x + w[1], 0)
    v = (w[4] @ np.maximum(w[2] @ h + w[3], 0) + w[5])[0]
    a = w[8] @ np.maximum(w[6] @ h + w[7], 0) + w[9]
    return v + a - a.mean()


def rust_order32(weights, x):
    """Shine's QNet::forward for one row, written out scalar by scalar in float32:
    32 lane accumulators per dot product, lanes summed in order, then the tail."""
    f = np.float32

    def dot(a, b):
        lanes = 32
        acc = [f(0)] * lanes
        whole = len(a) - len(a) % lanes
        for c in range(0, whole, lanes):
            for i in range(lanes):
                acc[i] = f(acc[i] + f(a[c + i] * b[c + i]))
        tail = f(0)
        for i in range(whole, len(a)):
            tail = f(tail + f(a[i] * b[i]))
        s = f(0)
        for v in acc:
            s = f(s + v)
        return f(s + tail)

    def dense(w, b, x, relu):
        y = [f(b[o] + dot(w[o], x)) for o in range(len(b))]
        return [max(v, f(0)) for v in y] if relu else y

    w = [np.asarray(t, dtype=np.float32) for t in weights]
    x = np.asarray(x, dtype=np.float32)
    h = dense(w[0], w[1], x, True)
    v = dense(w[4], w[5], dense(w[2], w[3], h, True), False)[0]
    a = dense(w[8], w[9], dense(w[6], w[7], h, True), False)
    total = f(0)
    for ai in a:
        total = f(total + ai)
    mean = f(total / f(len(a)))
    return np.array([f(ai + f(v - mean)) for ai in a], dtype=np.float32)


def states(n, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(-0.2, 1.2, size=(n, 27)).astype(np.float32)


class ModelFileTest(unittest.TestCase):
    def test_round_trip_keeps_metadata_and_weights(self):
        meta, w = make_model()
        net = model_mod.load_bytes(model_mod.save_bytes(meta, w))
        self.assertEqual(net.meta, meta)
        self.assertEqual(net.action_set, "untouchable")
        np.testing.assert_array_equal(net.wa, w[8])

    def test_file_written_here_has_the_layout_shine_writes(self):
        meta, w = make_model("fight", 23)
        data = model_mod.save_bytes(meta, w)
        (n,) = struct.unpack("<Q", data[:8])
        metadata, tensors = model_mod.parse_safetensors(data)
        self.assertEqual(
            metadata,
            {
                "format": "shine-dueling-dqn",
                "format_version": "1",
                "state_dim": "27",
                "action_set": "fight",
                "action_count": "23",
                "layers": "27,128,512",
                "model_version": "3",
                "train_step": "1234",
                "side": "fox",
            },
        )
        self.assertEqual(tensors["advantage.weight"][:2], ("F32", (23, 512)))
        self.assertEqual(tensors["shared.weight"][:2], ("F32", (128, 27)))
        # Little-endian float32 rows, as PyTorch stores [out, in].
        raw = tensors["shared.weight"][2]
        self.assertEqual(struct.unpack("<f", raw[4:8])[0], float(w[0][0, 1]))
        self.assertEqual(len(data), 8 + n + sum(t.size * 4 for t in w))

    def test_the_side_is_kept_and_a_file_without_one_is_fox(self):
        meta, w = make_model("fight", 23)
        marth = model_mod.ModelMeta(**{**meta.__dict__, "side": "marth"})
        self.assertEqual(model_mod.load_bytes(model_mod.save_bytes(marth, w)).meta.side, "marth")
        tensors = [(n, "F32", s, np.asarray(t, "<f4").tobytes()) for n, s, t in zip(model_mod.TENSORS, meta.shapes(), w)]
        old = {k: v for k, v in meta.to_metadata().items() if k != "side"}
        self.assertEqual(model_mod.load_bytes(raw_model_bytes(old, tensors)).meta.side, "fox")

    def test_load_from_a_path(self):
        meta, w = make_model()
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "bot.safetensors")
            with open(path, "wb") as f:
                f.write(model_mod.save_bytes(meta, w))
            self.assertEqual(model_mod.load(path).meta, meta)
            with self.assertRaisesRegex(ModelError, "cannot read"):
                model_mod.load(os.path.join(d, "missing.safetensors"))


class ForwardTest(unittest.TestCase):
    def test_forward_matches_float64_recomputation(self):
        for action_set, count in (("untouchable", 5), ("fight", 23)):
            meta, w = make_model(action_set, count, seed=count)
            net = model_mod.load_bytes(model_mod.save_bytes(meta, w))
            xs = states(40, seed=count)
            q = net.forward(xs)
            self.assertEqual(q.dtype, np.float32)
            self.assertEqual(q.shape, (40, count))
            for x, row in zip(xs, q):
                np.testing.assert_allclose(row, reference64(w, x), rtol=0, atol=1e-5)
            # One state at a time gives the same numbers as a batch.
            np.testing.assert_array_equal(net.forward(xs[3]), q[3])

    def test_forward_repeats_shines_float32_order_bit_for_bit(self):
        meta, w = make_model(seed=7)
        net = model_mod.load_bytes(model_mod.save_bytes(meta, w))
        for x in states(3, seed=9):
            np.testing.assert_array_equal(net.forward(x), rust_order32(w, x))

    def test_hand_sized_network(self):
        # 27 -> 2 -> 3 with weights chosen by hand: Q = V + A - mean(A).
        meta = model_mod.ModelMeta("untouchable", 5, shared=2, stream=3)
        ws = np.zeros((2, 27), np.float32)
        ws[0, 0], ws[1, 1] = 1.0, -1.0
        bs = np.array([0.0, 0.5], np.float32)
        wvh = np.ones((3, 2), np.float32)
        bvh = np.zeros(3, np.float32)
        wv = np.array([[1.0, 0.0, 0.0]], np.float32)
        bv = np.array([0.25], np.float32)
        wah = np.eye(3, 2, dtype=np.float32)
        bah = np.zeros(3, np.float32)
        wa = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0], [0, 0, 0]], np.float32)
        ba = np.array([0, 0, 0, 0, 1], np.float32)
        net = model_mod.QNet(meta, [ws, bs, wvh, bvh, wv, bv, wah, bah, wa, ba])
        x = np.zeros(27, np.float32)
        x[0], x[1] = 2.0, 0.25
        # h = relu([2, -0.25 + 0.5]) = [2, 0.25]; vh = [2.25]*3; v = 2.5
        # ah = [2, 0.25, 0]; a = [2, 0.25, 0, 2.25, 1]; mean 1.1
        np.testing.assert_allclose(net.forward(x), [3.4, 1.65, 1.4, 3.65, 2.4], atol=1e-6)
        self.assertEqual(net.greedy(x), 3)

    def test_argmax_takes_the_lowest_index_on_ties(self):
        self.assertEqual(model_mod.argmax(np.array([0.0, 2.0, 2.0, -1.0], np.float32)), 1)
        self.assertEqual(model_mod.argmax(np.array([5.0, 5.0], np.float32)), 0)
        self.assertEqual(model_mod.argmax(np.array([-3.0], np.float32)), 0)
        self.assertEqual(list(model_mod.argmax_rows(np.array([[1, 3, 3], [2, 2, 1]], np.float32))), [1, 0])


class BadFileTest(unittest.TestCase):
    def assert_refused(self, data, *patterns):
        with self.assertRaises(ModelError) as cm:
            model_mod.load_bytes(data)
        for p in patterns:
            self.assertRegex(str(cm.exception), p)
        return str(cm.exception)

    def test_unknown_action_set_names_the_known_ones(self):
        meta, w = make_model("jump_only", 5)
        msg = self.assert_refused(model_mod.save_bytes(meta, w), "unknown action set 'jump_only'", "fight", "untouchable")
        self.assertIn("knows", msg)

    def test_action_count_must_match_the_action_set(self):
        meta, w = make_model("untouchable", 6)
        self.assert_refused(model_mod.save_bytes(meta, w), "action_count 6", "has 5 actions")

    def test_truncated_files(self):
        meta, w = make_model()
        data = model_mod.save_bytes(meta, w)
        self.assert_refused(data[:-1], "truncated")
        self.assert_refused(data[:5000], "truncated")
        self.assert_refused(data[:6], "truncated")
        self.assert_refused(b"", "too short")
        self.assert_refused(b"not a model", "not a safetensors file")

    def test_wrong_metadata(self):
        meta, w = make_model()
        good = meta.to_metadata()
        tensors = [(n, "F32", s, np.asarray(t, "<f4").tobytes()) for n, s, t in zip(model_mod.TENSORS, meta.shapes(), w)]
        cases = [
            ({**good, "format": "something-else"}, "format is 'something-else'"),
            ({**good, "format_version": "2"}, "format_version 2 is not supported"),
            ({**good, "state_dim": "28"}, "state_dim 28"),
            ({**good, "layers": "27,128"}, "must be \\[state, shared, stream\\]"),
            ({**good, "layers": "27,a,512"}, "not a list of numbers"),
            ({**good, "action_count": "five"}, "'action_count' is not a number"),
            ({k: v for k, v in good.items() if k != "train_step"}, "missing key 'train_step'"),
            ({**good, "side": "falco"}, "unknown side 'falco'"),
        ]
        for metadata, pattern in cases:
            with self.subTest(pattern=pattern):
                self.assert_refused(raw_model_bytes(metadata, tensors), pattern)
        self.assert_refused(raw_model_bytes({}, tensors), "no metadata")

    def test_bad_tensors(self):
        meta, w = make_model()
        good = meta.to_metadata()
        tensors = [(n, "F32", s, np.asarray(t, "<f4").tobytes()) for n, s, t in zip(model_mod.TENSORS, meta.shapes(), w)]
        self.assert_refused(raw_model_bytes(good, tensors[:-1]), "tensor advantage.bias: missing")
        nan = list(tensors)
        arr = w[0].copy()
        arr[0, 0] = np.nan
        nan[0] = (nan[0][0], "F32", nan[0][2], arr.astype("<f4").tobytes())
        self.assert_refused(raw_model_bytes(good, nan), "tensor shared.weight: holds NaN")
        f64 = list(tensors)
        f64[1] = ("shared.bias", "F64", (128,), w[1].astype("<f8").tobytes())
        self.assert_refused(raw_model_bytes(good, f64), "tensor shared.bias: dtype F64, expected F32")
        shape = list(tensors)
        shape[0] = ("shared.weight", "F32", (27, 128), w[0].T.astype("<f4").tobytes())
        self.assert_refused(raw_model_bytes(good, shape), r"tensor shared.weight: shape \[27, 128\], expected \[128, 27\]")


if __name__ == "__main__":
    unittest.main()
