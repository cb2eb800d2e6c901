"""The ``states`` command on a real replay (tests/data/game.slp: Slippi 1.0.0,
Yoshi's Story, port 1 Marth, port 2 Fox)."""

import contextlib
import csv
import io
import os
import re
import subprocess
import sys
import tempfile
import unittest

import numpy as np

import support
from shine_bot import cli
from shine_bot import model as model_mod
from shine_bot import states as states_mod

FRAMES = 5209
FIRST, LAST = -123, 5085
#: Fox's (port 2) action-state ids in the replay, as libmelee reads them.
FOX_ACTIONS = {
    0x00, 0x02, 0x0C, 0x0D, 0x0E, 0x0F, 0x10, 0x12, 0x18, 0x19, 0x1B, 0x1D, 0x23, 0x26, 0x27, 0x29, 0x2A,
    0x2B, 0x2C, 0x39, 0x4C, 0x4D, 0x4F, 0x50, 0x56, 0x57, 0x58, 0x59, 0x5A, 0x5B, 0xB6, 0xB7, 0xBF, 0xC1,
    0xC2, 0xE2, 0xE3, 0xE4, 0xE9, 0xEF, 0xF1, 0xF4, 0xF5, 0xF6, 0x142, 0x143, 0x144, 0x155, 0x156, 0x157,
    0x162, 0x164, 0x165, 0x166,
}  # fmt: skip
#: bridge/src/melee.rs: FIRST_SPECIAL and FOX_SPECIALS' ids (checked against the
#: source below when it is here).
FIRST_SPECIAL = 0x155
FOX_SPECIALS = set(range(0x155, 0x172))


def run_cli(*argv):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            rc = cli.main(list(argv))
        except SystemExit as e:  # argparse
            rc = e.code
    return rc, err.getvalue()


def read_csv(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]


class ReplayStatesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.out = os.path.join(cls.tmp.name, "states.csv")
        rc, cls.err = run_cli("states", "--slp", support.REPLAY, "--port", "2", "--opponent-port", "1", "--out", cls.out)
        assert rc == 0, cls.err
        cls.header, cls.rows = read_csv(cls.out)
        cls.frames = [int(r[0]) for r in cls.rows]
        cls.s = np.array([[np.float32(v) for v in r[1:]] for r in cls.rows], dtype=np.float32)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_header_and_frames(self):
        self.assertEqual(self.header, ["frame"] + [f"s{i}" for i in range(27)])
        self.assertEqual(len(self.rows), FRAMES)
        self.assertEqual(self.frames, list(range(FIRST, LAST + 1)))
        self.assertIn(f"wrote {FRAMES} frames", self.err)
        self.assertIn("bot port 2 FOX, opponent port 1 MARTH, Slippi 1.0.0", self.err)

    def test_floats_are_finite_and_sane(self):
        s = self.s
        self.assertEqual(s.shape, (FRAMES, 27))
        self.assertTrue(np.all(np.isfinite(s)))
        for p in (0, 13):
            self.assertTrue(np.all((s[:, p + 0] > -0.5) & (s[:, p + 0] < 1.5)), "x")
            self.assertTrue(np.all((s[:, p + 1] > -0.5) & (s[:, p + 1] < 1.5)), "y")
            self.assertTrue(np.all((s[:, p + 4] >= 0) & (s[:, p + 4] <= 400 / 382)), "action")
            self.assertTrue(set(np.unique(s[:, p + 5])) <= {0.0, 1.0}, "facing")
            self.assertTrue(np.all((s[:, p + 8] >= 0) & (s[:, p + 8] <= 1)), "shield")
            self.assertTrue(np.all((s[:, p + 11] >= 0) & (s[:, p + 11] < 1)), "percent")
            self.assertTrue(np.all((s[:, p + 12] >= 0) & (s[:, p + 12] < 1)), "frames in action")
            # Slippi 1.0.0 records no speeds, in-air flag, jumps or hitlag; no charging.
            self.assertTrue(np.all(s[:, p + 2] == 0.5) and np.all(s[:, p + 3] == 0.5))
            for i in (6, 7, 9, 10):
                self.assertTrue(np.all(s[:, p + i] == 0), f"index {i}")
        self.assertTrue(np.all(s[:, 26] == 0), "no macro was played: shine flag 0")
        self.assertIn("does not record hitlag_left, jumps_left, on_ground, speed_air_x_self, speed_y_self", self.err)
        # The game itself: Fox took damage (140 % at most), Marth 7 %.
        self.assertAlmostEqual(float(s[:, 24].max()), 0.14, places=6)
        self.assertAlmostEqual(float(s[:, 11].max()), 0.007, places=6)

    def test_first_frame_is_the_entry(self):
        s = self.s[0]
        self.assertEqual(s[0], (np.float32(-42.0) + np.float32(250)) / np.float32(500))
        self.assertEqual(s[13], (np.float32(42.0) + np.float32(250)) / np.float32(500))
        self.assertEqual(s[4], np.float32(0x142) / np.float32(382))  # Entry
        self.assertEqual((s[5], s[18]), (1.0, 0.0))  # Marth faces right, Fox left
        self.assertEqual((s[12], s[25]), (0.0, 0.0))
        self.assertEqual(self.s[1][12], np.float32(1) / np.float32(3600))

    def test_fox_action_ids_are_known_to_shine(self):
        ids = {int(round(float(v) * 382)) for v in self.s[:, 17]}
        # The CSV's action floats give back the ids libmelee read.
        self.assertTrue(np.all(np.float32(np.round(self.s[:, 17] * 382)) / np.float32(382) == self.s[:, 17]))
        self.assertEqual(ids, FOX_ACTIONS)
        src = support.rust_source("bridge", "src", "melee.rs")
        first, specials = FIRST_SPECIAL, FOX_SPECIALS
        if src is not None:
            first = int(re.search(r"pub const FIRST_SPECIAL: u32 = 0x([0-9A-Fa-f]+);", src).group(1), 16)
            block = src[src.index("pub const FOX_SPECIALS") :]
            block = block[: block.index("];")]
            specials = {int(h, 16) for h in re.findall(r"\(0x([0-9A-Fa-f]+), \"", block)}
            self.assertEqual((first, specials), (FIRST_SPECIAL, FOX_SPECIALS))
        unknown = sorted(a for a in ids if a >= first and a not in specials)
        self.assertEqual(unknown, [], f"Fox action ids Shine's bridge/src/melee.rs does not know: {[hex(a) for a in unknown]}")

    def test_frames_in_action_follow_the_action_column(self):
        for p in (4, 17):
            act = np.round(self.s[:, p] * 382).astype(int)
            count = np.round(self.s[:, p + 8] * 3600).astype(int)
            want = [0]
            for i in range(1, len(act)):
                want.append(want[-1] + 1 if act[i] == act[i - 1] else 0)
            self.assertEqual(list(count), want)

    def test_opponent_port_defaults_to_the_other_player(self):
        out = os.path.join(self.tmp.name, "default.csv")
        rc, err = run_cli("states", "--slp", support.REPLAY, "--port", "2", "--out", out)
        self.assertEqual(rc, 0, err)
        with open(out) as a, open(self.out) as b:
            self.assertEqual(a.read(), b.read())

    def test_marths_point_of_view_swaps_the_blocks(self):
        out = os.path.join(self.tmp.name, "marth.csv")
        rc, err = run_cli("states", "--slp", support.REPLAY, "--port", "1", "--out", out)
        self.assertEqual(rc, 0, err)
        _, rows = read_csv(out)
        marth = np.array([[np.float32(v) for v in r[1:]] for r in rows], dtype=np.float32)
        np.testing.assert_array_equal(marth[:, :13], self.s[:, 13:26])
        np.testing.assert_array_equal(marth[:, 13:26], self.s[:, :13])

    def test_model_column(self):
        meta, w = support.make_model("untouchable", 5, seed=5)
        path = os.path.join(self.tmp.name, "m.safetensors")
        with open(path, "wb") as f:
            f.write(model_mod.save_bytes(meta, w))
        out = os.path.join(self.tmp.name, "with-model.csv")
        rc, err = run_cli("states", "--slp", support.REPLAY, "--port", "2", "--opponent-port", "1", "--model", path, "--out", out)
        self.assertEqual(rc, 0, err)
        header, rows = read_csv(out)
        self.assertEqual(header, self.header + ["action"])
        self.assertEqual([r[:-1] for r in rows], self.rows)
        got = np.array([int(r[-1]) for r in rows])
        net = model_mod.load(path)
        np.testing.assert_array_equal(got, model_mod.argmax_rows(net.forward(self.s)))
        self.assertTrue(set(got) <= set(range(5)))

    def test_floats_round_trip_as_float32(self):
        for r in self.rows[:50]:
            for v in r[1:]:
                self.assertEqual(states_mod.fmt(np.float32(v)), v)


class ReplayErrorsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = os.path.join(self.tmp.name, "x.csv")

    def tearDown(self):
        self.tmp.cleanup()

    def test_port_not_in_the_game(self):
        rc, err = run_cli("states", "--slp", support.REPLAY, "--port", "3", "--out", self.out)
        self.assertEqual(rc, 2)
        self.assertIn("port 3 is not in the game; the ports in it are 1, 2", err)
        rc, err = run_cli("states", "--slp", support.REPLAY, "--port", "2", "--opponent-port", "4", "--out", self.out)
        self.assertEqual(rc, 2)
        self.assertIn("port 4 is not in the game; the ports in it are 1, 2", err)
        self.assertFalse(os.path.exists(self.out), "no CSV on an error")

    def test_bad_arguments(self):
        rc, err = run_cli("states", "--slp", support.REPLAY, "--port", "2", "--opponent-port", "2", "--out", self.out)
        self.assertEqual(rc, 2)
        self.assertIn("both 2", err)
        rc, err = run_cli("states", "--slp", support.REPLAY, "--port", "5", "--out", self.out)
        self.assertEqual(rc, 2)
        self.assertIn("not a controller port (1-4)", err)
        rc, err = run_cli("states", "--slp", os.path.join(self.tmp.name, "none.slp"), "--port", "2", "--out", self.out)
        self.assertEqual(rc, 2)
        self.assertIn("does not exist", err)
        rc, err = run_cli("states", "--slp", support.REPLAY, "--port", "2", "--model", "/nonexistent/m.safetensors", "--out", self.out)
        self.assertEqual(rc, 2)
        self.assertIn("model file", err)

    def test_truncated_replay(self):
        bad = os.path.join(self.tmp.name, "cut.slp")
        with open(support.REPLAY, "rb") as f:
            data = f.read()
        with open(bad, "wb") as f:
            f.write(data[: len(data) // 2])
        rc, err = run_cli("states", "--slp", bad, "--port", "2", "--out", self.out)
        self.assertEqual(rc, 2, err)
        self.assertIn("could not read the replay", err)
        self.assertFalse(os.path.exists(self.out))

    def model_file(self, action_set, side="fox"):
        meta, w = support.make_model(action_set, 5, side=side)
        path = os.path.join(self.tmp.name, "m.safetensors")
        with open(path, "wb") as f:
            f.write(model_mod.save_bytes(meta, w))
        return path

    def test_model_with_an_unknown_action_set(self):
        path = self.model_file("jump_only")
        rc, err = run_cli("states", "--slp", support.REPLAY, "--port", "2", "--model", path, "--out", self.out)
        self.assertEqual(rc, 2)
        self.assertIn("unknown action set 'jump_only': this adapter knows fight, untouchable", err)

    def test_model_on_a_port_that_is_not_its_sides(self):
        path = self.model_file("untouchable")
        rc, err = run_cli("states", "--slp", support.REPLAY, "--port", "1", "--model", path, "--out", self.out)
        self.assertEqual(rc, 2, err)
        self.assertIn("port 1 plays Marth, and this model plays Fox (its file's side is 'fox'): pass --port with Fox's port", err)
        self.assertFalse(os.path.exists(self.out))
        path = self.model_file("untouchable", side="marth")
        rc, err = run_cli("states", "--slp", support.REPLAY, "--port", "2", "--model", path, "--out", self.out)
        self.assertEqual(rc, 2, err)
        self.assertIn("port 2 plays Fox, and this model plays Marth (its file's side is 'marth'): pass --port with Marth's port", err)
        self.assertFalse(os.path.exists(self.out))

    def test_a_marth_model_on_marths_port(self):
        path = self.model_file("untouchable", side="marth")
        rc, err = run_cli("states", "--slp", support.REPLAY, "--port", "1", "--model", path, "--out", self.out)
        self.assertEqual(rc, 0, err)
        header, rows = read_csv(self.out)
        self.assertEqual(header[-1], "action")
        # Marth's view: the states are Fox's with the blocks swapped, the actions the
        # Marth model's greedy ones on them.
        marth = np.array([[np.float32(v) for v in r[1:-1]] for r in rows], dtype=np.float32)
        net = model_mod.load(path)
        np.testing.assert_array_equal(np.array([int(r[-1]) for r in rows]), model_mod.argmax_rows(net.forward(marth)))


class EntryPointTest(unittest.TestCase):
    def test_python_dash_m(self):
        env = dict(os.environ, PYTHONPATH=support.PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "s.csv")
            r = subprocess.run(
                [sys.executable, "-m", "shine_bot", "states", "--slp", support.REPLAY, "--port", "2", "--out", out],
                env=env, capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out) as f:
                self.assertEqual(sum(1 for _ in f), FRAMES + 1)
            r = subprocess.run([sys.executable, "-m", "shine_bot", "--help"], env=env, capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0)
            for word in ("play", "states", "exit codes"):
                self.assertIn(word, r.stdout)


if __name__ == "__main__":
    unittest.main()
