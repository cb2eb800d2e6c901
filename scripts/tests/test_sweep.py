"""The sweep preset (scripts/experiment.py sweep, scripts/grid.py): a grid file's errors,
each naming its line, refused before anything starts; the pieces the driver decides
with (the runs' names and entries, where a free worker goes, the sweep's clock); and a
sweep killed with SIGKILL and resumed, which does not train its finished run again.

scripts/test.sh runs them: SHINE_BIN=target/debug python3 -m unittest discover -s scripts/tests
(SHINE_BIN: a folder with shine-manager and shine-worker; the tests that start them need it.)
"""
import glob
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
import unittest

SCRIPTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(SCRIPTS)
sys.path.insert(0, SCRIPTS)

import experiment  # noqa: E402
import grid  # noqa: E402
from harness import HANG_SECS, alive  # noqa: E402

BIN = os.environ.get("SHINE_BIN")
needs_bin = unittest.skipUnless(BIN, "SHINE_BIN (a folder with shine-manager and shine-worker) is not set")


def contents(path, mode="r"):
    with open(path, mode) as f:
        return f.read()


class GridFile(unittest.TestCase):
    """grid.read: the file's shape, each error with FILE:LINE."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def write(self, text):
        path = os.path.join(self.tmp.name, "grid.toml")
        with open(path, "w") as f:
            f.write(text)
        return path

    def refused(self, text, line, *says):
        path = self.write(text)
        with self.assertRaises(grid.GridError) as e:
            grid.read(path, ROOT)
        message = str(e.exception)
        self.assertTrue(message.startswith(f"{path}:{line}: " if line else f"{path}: "), message)
        for s in says:
            self.assertIn(s, message)

    GOOD = 'base = "configs/learn.toml"\nseeds = [1, 2]\n[grid]\ndqn.lr = [0.00025, 0.001]\n'

    def test_a_good_grid_has_its_axes_seeds_and_lines(self):
        g = grid.read(self.write(self.GOOD + "trainer.burn_in = [1000]\n[grid.workers]\nepsilon = [0.1, 0.4]\n"), ROOT)
        self.assertEqual([(a.key, a.values, a.line) for a in g.axes],
                         [("dqn.lr", [0.00025, 0.001], 4), ("trainer.burn_in", [1000], 5), ("workers.epsilon", [0.1, 0.4], 7)])
        self.assertEqual((g.seeds, g.sort, len(g.points())), ([1, 2], "final", 4))

    def test_each_mistake_names_its_line(self):
        self.refused('base = "configs/learn.toml"\nsed = [1]\n', 2, "unknown key sed")
        self.refused('seeds = [1]\nbase = "configs/nothing.toml"\n', 2, "no such file")
        self.refused('base = "configs/selfplay.toml"\nseeds = [1]\n', 1, "declares [[runs]]")
        self.refused('base = "configs/learn.toml"\n\nseeds = [1, 1]\n', 3, "a seed twice")
        self.refused('base = "configs/learn.toml"\nseeds = ["one"]\n', 2, "seeds must be")
        self.refused('sort = "fastest"\n' + self.GOOD, 1, "sort = 'fastest'", "final")
        self.refused(self.GOOD + "lr = [0.1]\n", 5, "SECTION.KEY")
        self.refused(self.GOOD + "dqm.lr = [0.1]\n", 5, "dqm", "game, dqn, replay, trainer, workers")
        self.refused(self.GOOD + "dqn.gamma = 0.9\n", 5, "dqn.gamma = 0.9", "as a list")
        self.refused(self.GOOD + "dqn.gamma = []\n", 5, "dqn.gamma = []")
        self.refused(self.GOOD + "dqn.gamma = [0.9, 0.99, 0.9]\n", 5, "a value twice")
        self.refused(self.GOOD + "dqn.gamma = [1979-05-27]\n", 5, "a date or time")
        self.refused(self.GOOD + "[grid.trainer]\nburn_in = [1, 3]\nsamples_per_insert = 2.0\n", 7, "trainer.samples_per_insert")
        self.refused(self.GOOD + "dqn.gamma = = 1\n", 5, "not valid TOML")
        self.refused('base = "configs/learn.toml"\nseeds = [1]\n', "", "no [grid]")

    def test_run_names_and_entries(self):
        g = grid.read(self.write(self.GOOD + "trainer.burn_in = [1000]\n"), ROOT)
        runs = g.runs()
        # The varying values name the runs (a value shared by all does not), each seed apart.
        self.assertEqual(runs, [("lr-0_00025-s1", 0, 1), ("lr-0_00025-s2", 0, 2), ("lr-0_001-s1", 1, 1), ("lr-0_001-s2", 1, 2)])
        entries = tomllib.loads(grid.runs_toml(g, runs))["runs"]
        self.assertEqual(entries[2], {"name": "lr-0_001-s1", "dqn": {"lr": 0.001}, "trainer": {"burn_in": 1000}})
        self.assertEqual(grid.label(g.points()[1]), "dqn.lr = 0.001")
        # Values that make no run name (or too long a one) give way to numbers.
        g = grid.read(self.write(self.GOOD + 'dqn.optimizer = ["adam", "RMSprop!"]\n'), ROOT)
        self.assertEqual(g.runs()[0][0], "lr-0_00025-optimizer-adam-s1")
        g = grid.read(self.write(self.GOOD.replace("seeds = [1, 2]", "seeds = [1]") + "dqn.adam_betas = [[0.9, 0.999], [0.5, 0.999]]\n"
                                 + "trainer.samples_per_insert_and_more_to_make_a_long_name = [1, 2]\n"), ROOT)
        self.assertEqual([n for n, _, _ in g.runs()][:2], ["p0-s1", "p1-s1"])

    def test_shapes_say_which_settings_can_group(self):
        settings = {"game": {"action_set": "untouchable"}, "replay": {"kind": "device", "sampling": "uniform"}, "trainer": {"grouped": None, "cuda_graph": None},
                    "dqn": {"batch_size": 32, "optimizer": "rmsprop", "double_dqn": True, "publish_average_tau": 0.0002, "lr": 0.001}}
        other_lr = json.loads(json.dumps(settings))
        other_lr["dqn"]["lr"] = 0.0005
        self.assertEqual(grid.shape(settings), grid.shape(other_lr), "a learning rate does not change the shape")
        bigger = json.loads(json.dumps(settings))
        bigger["dqn"]["batch_size"] = 64
        self.assertNotEqual(grid.shape(settings), grid.shape(bigger), "a batch size does")
        prioritized = json.loads(json.dumps(settings))
        prioritized["replay"]["sampling"] = "prioritized"
        self.assertNotEqual(grid.shape(settings), grid.shape(prioritized), "prioritized runs group among themselves")
        self.assertIsNotNone(grid.shape(prioritized))
        host = json.loads(json.dumps(settings))
        host["replay"]["kind"] = "host"
        no_graph = json.loads(json.dumps(settings))
        no_graph["trainer"]["cuda_graph"] = False
        self.assertNotEqual(grid.shape(settings), grid.shape(host), "the host replay keeps a group from its graph: it groups apart")
        self.assertEqual(grid.shape(host), grid.shape(no_graph), "runs that cannot be a graph group together")
        alone = json.loads(json.dumps(settings))
        alone["trainer"]["grouped"] = False
        self.assertIsNone(grid.shape(alone), "grouped = false trains alone")


class Driver(unittest.TestCase):
    """What the sweep decides with, without processes."""

    def test_workers_go_one_to_each_run_then_to_the_runs_behind(self):
        todo, workers, steps = ["a", "b", "c"], {}, {}
        picks = []
        for _ in range(5):
            run = experiment.pick_run(todo, workers, steps)
            workers[run] = workers.get(run, 0) + 1
            picks.append(run)
        self.assertEqual(picks, ["a", "b", "c", "a", "b"], "one each, then round again while none has trained")
        self.assertEqual(experiment.pick_run(todo, workers, {"a": 500, "b": 300, "c": 900}), "b", "the fewest train steps")
        self.assertEqual(experiment.pick_run(["c", "d"], {"c": 2}, {"c": 0, "d": 5000}), "d", "a run without a worker first")

    def test_the_sweep_s_clock_skips_the_time_between_sessions(self):
        sessions = [[1000.0, 1600.0], [5000.0, 5300.0]]
        self.assertEqual(experiment.trained_minutes(sessions, 1300.0), 5.0)
        self.assertEqual(experiment.trained_minutes(sessions, 3000.0), 10.0, "after a crash: where the first session ended")
        self.assertEqual(experiment.trained_minutes(sessions, 5060.0), 11.0, "the second session goes on from there")


def sweep_command(grid_path, out, *options):
    return [sys.executable, os.path.join(SCRIPTS, "experiment.py"), "sweep", grid_path, "--bin", BIN, "--out", out, "--port", "0",
            "--eval-episodes", "2", *options]


@needs_bin
class ManagerCheck(unittest.TestCase):
    """Keys and values are the manager's to judge (shine-manager --check-config); the
    error still names the grid's line, and nothing is started or written."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def refused(self, axis_line, says):
        path = os.path.join(self.tmp.name, "grid.toml")
        with open(path, "w") as f:
            f.write(GridFile.GOOD + axis_line + "\n")
        with self.assertRaises(grid.GridError) as e:
            grid.check(grid.read(path, ROOT), os.path.join(BIN, "shine-manager"))
        message = str(e.exception)
        self.assertTrue(message.startswith(f"{path}:5: "), message)
        for s in says:
            self.assertIn(s, message)

    def test_the_shipped_grids_pass(self):
        for path in ("configs/sweep-lr.toml", "scripts/tests/small-grid.toml"):
            g = grid.read(os.path.join(ROOT, path), ROOT)
            grid.check(g, os.path.join(BIN, "shine-manager"))
            self.assertEqual(len(g.runs()), 4, path)

    def test_an_unknown_key_or_a_bad_value_names_the_line(self):
        self.refused("dqn.lrr = [0.1]", ["dqn.lrr = 0.1", "the manager refuses it", "unknown field `lrr`"])
        self.refused("dqn.gamma = [0.99, 1.5]", ["dqn.gamma = 1.5", "gamma = 1.5 must be in (0, 1]"])
        self.refused("workers.heartbeat_secs = [1.0]", ["is the fleet's"])
        self.refused("trainer.threads = [2]", ["is the device's"])
        self.refused('dqn.optimizer = ["sgd"]', ['dqn.optimizer = "sgd"', "sgd"])

    def test_the_driver_refuses_a_bad_grid_before_it_starts_anything(self):
        path = os.path.join(self.tmp.name, "grid.toml")
        with open(path, "w") as f:
            f.write(GridFile.GOOD + "replay.capacity = [200000, 0]\n")
        out = os.path.join(self.tmp.name, "out")
        p = subprocess.run(sweep_command(path, out), capture_output=True, text=True, cwd=ROOT, timeout=HANG_SECS)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn(f"{path}:5: replay.capacity = 0: the manager refuses it", p.stderr)
        self.assertFalse(os.path.exists(out), "nothing written")
        self.assertNotIn("worker", p.stdout + p.stderr, "nothing started")


@needs_bin
class Resume(unittest.TestCase):
    """A sweep killed (SIGKILL to the driver, its manager and workers at once, as a
    crash) after one run finished: the same command resumes it, trains the other run
    to its end, and does not train the finished one again."""

    def test_a_killed_sweep_resumes_without_training_a_finished_run_again(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        path = os.path.join(tmp.name, "grid.toml")
        with open(path, "w") as f:
            # Run "burn_in-500" trains at once and finishes at 200 train steps; run
            # "burn_in-900000" needs 900,000 transitions before its first step, so it
            # cannot finish by steps in this test, only by time, which the first session
            # sets at a limit only a hang reaches and the second at one second.
            f.write('base = "configs/learn.toml"\nseeds = [3]\n[grid]\ntrainer.burn_in = [500, 900000]\n'
                    "trainer.checkpoint_every = [100]\n")
        out = os.path.join(tmp.name, "out")
        done, waiting = "burn_in-500-s3", "burn_in-900000-s3"
        log = open(os.path.join(tmp.name, "first.log"), "w")
        self.addCleanup(log.close)
        first = subprocess.Popen(sweep_command(path, out, "--stop-at-steps", "200", "--minutes", "10"), cwd=ROOT,
                                 stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.addCleanup(lambda: first.poll() is None and os.killpg(first.pid, signal.SIGKILL))
        state = self.wait_for_state(first, out, os.path.join(tmp.name, "first.log"), f"{done} finished",
                                    lambda state: state["runs"][done]["finished"])
        self.assertIsNone(state["runs"][waiting]["finished"])
        os.killpg(first.pid, signal.SIGKILL)  # the driver, its manager and its workers
        first.wait(timeout=HANG_SECS)
        before = self.snapshot(out, done)
        finished = state["runs"][done]["finished"]
        self.assertGreaterEqual(finished["train_steps"], 200)

        second = subprocess.run(sweep_command(path, out, "--stop-at-steps", "200", "--seconds", "1"), cwd=ROOT,
                                capture_output=True, text=True, timeout=HANG_SECS)
        self.assertEqual(second.returncode, 0, second.stdout + second.stderr)
        self.assertIn(f"resuming the sweep in {out}: {done} finished, {waiting} to train", second.stdout)
        # The finished run: no worker started for it, its model, settings and curve as
        # they were, and its steps in the resumed manager those of its checkpoint (200 or
        # more: its own, not a fresh run's) and no more than when it finished.
        self.assertEqual(self.snapshot(out, done), before)
        with open(os.path.join(out, "sweep.json")) as f:
            after = json.load(f)
        self.assertEqual(after["runs"][done], state["runs"][done])
        self.assertEqual(len(after["sessions"]), 2)
        with open(os.path.join(out, "logs", "runs-1.json")) as f:
            resumed = {r["name"]: r for r in json.load(f)["runs"]}
        self.assertTrue(resumed[done]["paused"])
        self.assertTrue(200 <= resumed[done]["train_steps"] <= finished["train_steps"], (resumed[done], finished))
        # The other run trained on in the second session (a worker of its own) and
        # stopped at its time limit.
        self.assertGreater(after["runs"][waiting]["workers_started"], state["runs"][waiting]["workers_started"])
        self.assertIn("trained", after["runs"][waiting]["finished"]["reason"])
        summary = contents(os.path.join(out, "summary.md"))
        for setting in ("trainer.burn_in = 500", "trainer.burn_in = 900000"):
            self.assertRegex(summary, rf"(?m)^\| {setting} \| ", summary)

    def test_a_killed_driver_takes_its_manager_and_workers_with_it(self):
        # Else they would train on, holding the port and the data folder that the
        # sweep, started again, needs.
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        path = os.path.join(tmp.name, "grid.toml")
        with open(path, "w") as f:
            f.write('base = "configs/learn.toml"\nseeds = [1, 2]\n[grid]\ntrainer.burn_in = [900000]\n')
        out = os.path.join(tmp.name, "out")
        log = open(os.path.join(tmp.name, "driver.log"), "w")
        self.addCleanup(log.close)
        driver = subprocess.Popen(sweep_command(path, out, "--minutes", "10"), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                  start_new_session=True)
        self.addCleanup(lambda: driver.poll() is None and os.killpg(driver.pid, signal.SIGKILL))
        self.wait_for_state(driver, out, os.path.join(tmp.name, "driver.log"), "the sweep's workers started",
                            lambda state: state["sessions"] and all(r["workers_started"] for r in state["runs"].values()))
        children = [int(p) for p in contents(f"/proc/{driver.pid}/task/{driver.pid}/children").split()]
        self.assertEqual(len(children), 3, "the manager and a worker for each of the two runs")
        driver.kill()
        driver.wait(timeout=HANG_SECS)
        deadline = time.monotonic() + HANG_SECS
        while any(alive(p) for p in children):
            self.assertLess(time.monotonic(), deadline, f"still running after the driver was killed: {[p for p in children if alive(p)]}")
            time.sleep(0.2)

    def wait_for_state(self, proc, out, log, what, ok):
        """sweep.json once `ok(state)` holds (the driver writes it whole), the driver
        `proc` (its output in `log`) running all the while."""
        deadline = time.monotonic() + HANG_SECS
        while time.monotonic() < deadline:
            self.assertIsNone(proc.poll(), contents(log))
            try:
                state = json.loads(contents(os.path.join(out, "sweep.json")))
                if ok(state):
                    return state
            except (OSError, ValueError):
                pass
            time.sleep(0.5)
        self.fail(f"not within {HANG_SECS} s: {what}")

    @staticmethod
    def snapshot(out, run):
        """A run's kept files (their bytes' digests) and its workers' logs (their names)."""
        d = os.path.join(out, "runs", run)
        files = {n: hashlib.sha256(contents(os.path.join(d, n), "rb")).hexdigest() for n in ("final.safetensors", "run.json", "curve.csv")}
        return files, sorted(glob.glob(os.path.join(out, "logs", f"{run}-worker-*.log")))


if __name__ == "__main__":
    unittest.main()
