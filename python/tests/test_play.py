"""The bot's decision loop, the pad through libmelee's Controller, and ``play`` with
Dolphin replaced by fakes."""

import contextlib
import io
import os
import tempfile
import unittest
from unittest import mock

import numpy as np

import support
from support import gamestate, player
from shine_bot import actions, cli, pad, play
from shine_bot import model as model_mod
from shine_bot.actions import NEUTRAL, Pad


class ScriptedNet:
    """Stands in for a QNet: returns Q-values that make ``choices`` the greedy
    actions, one per decision, and records the states it saw."""

    def __init__(self, action_set, choices):
        self.macros = actions.action_set(action_set)
        self.meta = model_mod.ModelMeta(action_set, len(self.macros))
        self.choices = list(choices)
        self.seen = []

    def greedy(self, state):
        self.seen.append(np.array(state))
        return self.choices.pop(0)


def frames(n, start=0):
    for f in range(start, start + n):
        yield gamestate(f, {1: player(action=0x0E), 2: player(action=0x0E)})


class BotTest(unittest.TestCase):
    def test_macros_play_to_the_end_before_the_next_decision(self):
        u = actions.action_set("untouchable")
        net = ScriptedNet("untouchable", [1, 2, 0, 0])  # shine (8), spot dodge (22), nothing, nothing
        bot = play.Bot(net, bot_port=2, opponent_port=1)
        pads = [bot.frame(gs) for gs in frames(32)]
        self.assertEqual(pads, list(u[1].script) + list(u[2].script) + [NEUTRAL, NEUTRAL])
        self.assertEqual(bot.decisions, 4)
        # Decisions on frames 0, 8, 30 and 31; the shine flag is the previous macro's.
        self.assertEqual([float(s[26]) for s in net.seen], [0.0, 1.0, 0.0, 0.0])
        # Frames in action counted on every frame, decision or not.
        self.assertEqual([round(float(s[25]) * 3600) for s in net.seen], [0, 8, 30, 31])

    def test_greedy_with_a_real_model(self):
        meta, w = support.make_model("fight", 23, seed=3)
        net = model_mod.load_bytes(model_mod.save_bytes(meta, w))
        bot = play.Bot(net, 2, 1)
        states = []
        for gs in frames(40):
            due = not bot.pending
            p = bot.frame(gs)
            if due:
                states.append((bot.last_state.copy(), bot.action))
            self.assertIsInstance(p, Pad)
        self.assertEqual(len(states), 10)  # fight macros are 4 frames each
        for s, a in states:
            self.assertEqual(a, model_mod.argmax(net.forward(s)))


    def test_the_bot_waits_until_its_fighter_is_past_the_entry_animation(self):
        u = actions.action_set("untouchable")
        net = ScriptedNet("untouchable", [2, 0])  # spot dodge, nothing
        bot = play.Bot(net, bot_port=2, opponent_port=1)
        # Entry, entry start, entry end; the opponent already out of it on frame 3.
        entry = [0x142, 0x143, 0x143, 0x144, 0x144]
        seq = [gamestate(f, {1: player(action=0x142 if f < 3 else 0x0E), 2: player(action=a)}) for f, a in enumerate(entry)]
        seq += [gamestate(f, {1: player(action=0x0E), 2: player(action=0x0E)}) for f in range(5, 5 + 23)]
        pads = [bot.frame(gs) for gs in seq]
        self.assertEqual(pads[:5], [NEUTRAL] * 5)
        self.assertEqual(pads[5:], list(u[2].script) + [NEUTRAL])
        self.assertEqual(bot.started_frame, 5)
        self.assertEqual(bot.decisions, 2)
        # Nothing was read during the entry: the first state starts both counters at
        # 0, as Shine's fresh reader does at hand-over.
        first = net.seen[0]
        self.assertEqual((float(first[12]), float(first[25])), (0.0, 0.0))
        self.assertEqual(round(float(net.seen[1][25]) * 3600), 22)

    def test_a_bot_that_joins_after_the_entry_plays_at_once(self):
        net = ScriptedNet("untouchable", [0])
        bot = play.Bot(net, bot_port=2, opponent_port=1)
        bot.frame(gamestate(100, {1: player(action=0x142), 2: player(action=0x0E)}))
        self.assertEqual((bot.started_frame, bot.decisions), (100, 1))

    def test_the_entry_ids_are_shines(self):
        self.assertEqual([play.in_entry(player(action=a)) for a in (0x141, 0x142, 0x143, 0x144, 0x145)], [False, True, True, True, False])
        src = support.rust_source("bridge", "src", "melee.rs")
        if src is None:
            self.skipTest("not in a Shine checkout")
        for name, value in (("ENTRY", play.ENTRY), ("ENTRY_END", play.ENTRY_END)):
            self.assertRegex(src, rf"pub const {name}: u32 = {value:#x};")

    def test_the_entry_on_a_real_replay(self):
        # tests/data/game.slp: Fox on port 2 appears in the entry animation from
        # Slippi's first frame; the bot's first decision is its first frame past it.
        import melee

        console = melee.Console(path=support.REPLAY, is_dolphin=False, allow_old_version=True)
        self.assertTrue(console.connect())
        net = ScriptedNet("fight", [0] * 100)
        bot = play.Bot(net, bot_port=2, opponent_port=1)
        actions_seen = []
        while bot.started_frame is None:
            gs = console.step()
            actions_seen.append(gs.players[2].action.value)
            bot.frame(gs)
        self.assertEqual(actions_seen[0], 0x142)
        self.assertTrue(all(play.ENTRY <= a <= play.ENTRY_END for a in actions_seen[:-1]), actions_seen)
        self.assertFalse(play.ENTRY <= actions_seen[-1] <= play.ENTRY_END)
        self.assertGreater(bot.started_frame, -123 + 30)
        self.assertEqual(bot.decisions, 1)


class SideTest(unittest.TestCase):
    def test_each_side_plays_its_fighter(self):
        import melee

        self.assertEqual(play.character("fox"), melee.Character.FOX)
        self.assertEqual(play.character("marth"), melee.Character.MARTH)
        self.assertEqual(set(model_mod.SIDE_CHARACTERS), {"fox", "marth"})

    def test_a_mismatch_names_the_side(self):
        self.assertIsNone(model_mod.side_mismatch("marth", 2, "MARTH"))
        self.assertEqual(
            model_mod.side_mismatch("marth", 2, "FOX"), "port 2 plays Fox, and this model plays Marth (its file's side is 'marth')"
        )
        self.assertEqual(
            model_mod.side_mismatch("fox", 1, "FALCO"), "port 1 plays Falco, and this model plays Fox (its file's side is 'fox')"
        )


class FakeConsole:
    is_dolphin = True
    logger = None

    def get_dolphin_pipes_path(self, port):
        return os.devnull

    def setup_dolphin_controller(self, port, type):
        pass


def apply_commands(text, start=NEUTRAL):
    """What Dolphin's pipe device makes of libmelee's commands (Shine's pad.rs
    ``apply_all``), as a Pad."""
    buttons, main, c, l, r = set(start.buttons), start.main, start.c, start.l, start.r  # noqa: E741
    for line in text.splitlines():
        w = line.split()
        if w[0] == "PRESS":
            buttons.add(w[1])
        elif w[0] == "RELEASE":
            buttons.discard(w[1])
        elif w[:2] == ["SET", "MAIN"]:
            main = (float(w[2]), float(w[3]))
        elif w[:2] == ["SET", "C"]:
            c = (float(w[2]), float(w[3]))
        elif w[:2] == ["SET", "L"]:
            l = float(w[2])  # noqa: E741
        elif w[:2] == ["SET", "R"]:
            r = float(w[2])
        elif w[0] != "FLUSH":
            raise AssertionError(f"unknown command {line!r}")
    return Pad(buttons=buttons, main=main, c=c, l=l, r=r)


class PadTest(unittest.TestCase):
    def controller(self):
        import melee

        c = melee.Controller(FakeConsole(), 2, fix_analog_inputs=False)
        c.pipe = io.StringIO()
        return c

    def test_every_pad_of_every_macro_reaches_the_pipe_whole(self):
        c = self.controller()
        held = Pad(buttons=set(actions.BUTTONS), main=(1, 1), c=(0, 0), l=1, r=1)
        for macros in actions.ACTION_SETS.values():
            for m in macros:
                for p in m.script:
                    c.pipe = io.StringIO()
                    pad.press(c, p)
                    # Whatever was held before, the pad is the whole state.
                    self.assertEqual(apply_commands(c.pipe.getvalue(), held), p)
                    self.assertEqual({b.value for b, v in c.current.button.items() if v}, set(p.buttons))

    def test_values_are_written_as_shine_writes_them(self):
        c = self.controller()
        pad.press(c, actions.action_set("untouchable")[3].script[0])  # roll left
        text = c.pipe.getvalue()
        self.assertIn("SET MAIN 0.0 0.34901962\n", text)  # Shine: "SET MAIN 0 0.34901962"
        self.assertIn("SET L 1.0\n", text)
        self.assertIn("PRESS L\n", text)
        self.assertIn("RELEASE A\n", text)
        self.assertEqual(text.count("\n"), 16)


class FakeMenu:
    calls = []

    def menu_helper_simple(self, gs, controller, character, stage, **kw):
        FakeMenu.calls.append((gs.frame, character, stage, kw))


class PlayLoopTest(unittest.TestCase):
    def run_play(self, bot_character, side="fox", entry_frames=0, opponent_character=None, **run_kw):
        import melee

        seq = []
        for f in range(3):
            gs = gamestate(f, {})
            gs.menu_state = melee.Menu.CHARACTER_SELECT
            seq.append(gs)
        them = opponent_character or melee.Character.MARTH
        for i, f in enumerate(range(-123, -113)):
            me = player(character=bot_character, action=0x143 if i < entry_frames else 0x0E)
            seq.append(gamestate(f, {1: player(character=them), 2: me}))
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)

        class Console:
            eventsize = [0] * 0x100
            stopped = False
            made = []

            def __init__(self, path, **kw):
                self.path = path
                self.kw = kw
                self.eventsize[0x38] = 0x54
                self.dolphin_home_path = os.path.join(tmp.name, "User")
                self.temp_dir = None
                Console.made.append(self)

            def run(self, iso_path):
                self.iso = iso_path

            def connect(self):
                return True

            def step(self):
                if seq:
                    return seq.pop(0)
                raise KeyboardInterrupt

            def stop(self):
                Console.stopped = True

        pressed = []

        class Controller:
            def __init__(self, console, port, type, fix_analog_inputs):
                assert fix_analog_inputs is False
                self.port = port

            def connect(self):
                return True

            def __getattr__(self, name):
                return lambda *a: pressed.append((name,) + a)

        meta, w = support.make_model(side=side)
        net = model_mod.load_bytes(model_mod.save_bytes(meta, w))
        FakeMenu.calls = []
        out = io.StringIO()
        with mock.patch.object(melee, "Console", Console), mock.patch.object(melee, "Controller", Controller), mock.patch.object(
            melee, "MenuHelper", FakeMenu
        ):
            try:
                rc = play.run(net, "/dolphin", "/melee.iso", port=2, opponent_port=1, out=out, **run_kw)
            finally:
                self.log = out.getvalue()
        return rc, pressed, self.log, Console

    def test_menus_then_the_game(self):
        import melee

        rc, pressed, log, console = self.run_play(melee.Character.FOX)
        self.assertEqual(rc, 0)
        self.assertTrue(console.stopped)
        self.assertEqual([c[:3] for c in FakeMenu.calls], [(f, melee.Character.FOX, melee.Stage.FINAL_DESTINATION) for f in range(3)])
        self.assertEqual(FakeMenu.calls[0][3], {"cpu_level": 0, "autostart": False})
        # 10 frames in game, 16 controller calls each.
        self.assertEqual(len(pressed), 160)
        self.assertIn("game started (frame -123), opponent on port 1", log)
        self.assertIn("the bot plays from frame -123", log)
        self.assertIn("the bot is on port 2 (Fox), you on port 1 with the GameCube controller adapter (plug into its port 1)", log)
        self.assertNotIn("note:", log)

    def test_an_empty_home_gets_the_adapter_on_the_persons_port(self):
        import melee

        _, _, _, console = self.run_play(melee.Character.FOX)
        (made,) = console.made
        self.assertEqual(made.kw, {}, "libmelee's own temporary folder")
        with open(os.path.join(made.dolphin_home_path, "Config", "Dolphin.ini")) as f:
            self.assertEqual(f.read().split(), ["[Core]", "SIDevice0", "=", "12"])

    def test_a_dolphin_home_is_copied_with_the_persons_settings(self):
        import melee

        with tempfile.TemporaryDirectory() as home:
            os.makedirs(os.path.join(home, "Config"))
            with open(os.path.join(home, "Config", "Dolphin.ini"), "w") as f:
                f.write("[Core]\nSIDevice0 = 12\n")
            _, _, log, console = self.run_play(melee.Character.FOX, dolphin_home=home)
        (made,) = console.made
        self.assertEqual(
            made.kw, {"dolphin_home_path": home, "copy_home_directory": True, "fullscreen": None, "save_replays": None}
        )

    def test_the_bot_waits_for_the_entry_animation(self):
        import melee

        _, pressed, log, _ = self.run_play(melee.Character.FOX, entry_frames=4)
        self.assertIn("the bot plays from frame -119 (past the entry animation)", log)
        self.assertEqual(len(pressed), 160, "a neutral pad on every entry frame")

    def test_a_marth_model_picks_and_plays_marth(self):
        import melee

        rc, pressed, log, _ = self.run_play(melee.Character.MARTH, side="marth", opponent_character=melee.Character.FOX)
        self.assertEqual(rc, 0)
        self.assertEqual({c[1] for c in FakeMenu.calls}, {melee.Character.MARTH})
        self.assertIn("the bot is on port 2 (Marth)", log)
        self.assertEqual(len(pressed), 160)
        self.assertNotIn("note:", log)

    def test_the_bot_must_be_the_models_fighter(self):
        import melee

        with self.assertRaises(play.PlayError) as cm:
            self.run_play(melee.Character.MARTH)
        self.assertIn("port 2 plays Marth, and this model plays Fox (its file's side is 'fox')", str(cm.exception))
        self.assertIn("leave port 2's character to shine-bot", str(cm.exception))
        with self.assertRaises(play.PlayError) as cm:
            self.run_play(melee.Character.FOX, side="marth")
        self.assertIn("port 2 plays Fox, and this model plays Marth (its file's side is 'marth')", str(cm.exception))

    def test_an_opponent_the_model_was_not_trained_against_is_noted(self):
        import melee

        _, _, log, _ = self.run_play(melee.Character.FOX, opponent_character=melee.Character.PEACH)
        self.assertIn("note: the model was trained against Marth; port 1 plays Peach", log)


class PlayArgumentsTest(unittest.TestCase):
    def run_cli(self, *argv):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                rc = cli.main(list(argv))
            except SystemExit as e:
                rc = e.code
        return rc, err.getvalue()

    def test_bad_input_exits_2(self):
        with tempfile.TemporaryDirectory() as d:
            model = os.path.join(d, "m.safetensors")
            meta, w = support.make_model()
            with open(model, "wb") as f:
                f.write(model_mod.save_bytes(meta, w))
            iso = os.path.join(d, "melee.iso")
            open(iso, "wb").close()
            ok = ["play", "--model", model, "--dolphin", d, "--iso", iso]
            cases = [
                (["play", "--model", os.path.join(d, "none"), "--dolphin", d, "--iso", iso], "model file .* does not exist"),
                (["play", "--model", model, "--dolphin", os.path.join(d, "nodolphin"), "--iso", iso], "Dolphin path .* does not exist"),
                (["play", "--model", model, "--dolphin", d, "--iso", os.path.join(d, "no.iso")], "Melee image .* does not exist"),
                (ok + ["--port", "1"], "both 1"),
                (ok + ["--port", "2", "--opponent-port", "2"], "both 2"),
                (ok + ["--port", "0"], "not a controller port"),
                (ok + ["--opponent-port", "5"], "not a controller port"),
                (ok + ["--port", "two"], "not a number"),
                # Issue 46: libmelee picks a stage only for the controller that starts
                # the match, so --stage alone did nothing.
                (ok + ["--stage", "BATTLEFIELD"], "--stage BATTLEFIELD needs --autostart"),
                (["play", "--model", model], "required"),
            ]
            for argv, pattern in cases:
                with self.subTest(argv=argv[-2:]):
                    rc, err = self.run_cli(*argv)
                    self.assertEqual(rc, 2, err)
                    self.assertRegex(err, pattern)
            # The person's controller: a home that is not one, or has nothing on their
            # port; a profile that is missing or maps nothing; flags that do not go together.
            home = os.path.join(d, "home")
            os.makedirs(os.path.join(home, "Config"))
            with open(os.path.join(home, "Config", "Dolphin.ini"), "w") as f:
                f.write("[Core]\nSIDevice0 = 0\nSIDevice2 = 12\n")
            bad_profile = os.path.join(d, "pad.ini")
            with open(bad_profile, "w") as f:
                f.write("[Profile]\nDevice = evdev/0/Pad\n")
            cases = [
                (ok + ["--dolphin-home", os.path.join(d, "nohome")], "--dolphin-home .* does not exist"),
                (ok + ["--dolphin-home", d], "has no Config/Dolphin.ini"),
                (ok + ["--dolphin-home", home], r"nothing plugged into port 1 \(SIDevice0 = 0\)"),
                (ok + ["--dolphin-home", home, "--human-controller", "home"], "nothing plugged into port 1"),
                (ok + ["--human-controller", "home"], "--human-controller home .* give it with --dolphin-home"),
                (ok + ["--human-controller", "usb"], "invalid choice"),
                (ok + ["--human-profile", os.path.join(d, "none.ini")], "GCPad profile .* does not exist"),
                (ok + ["--human-profile", bad_profile], "no \\[Profile\\] section with button mappings"),
                (ok + ["--human-controller", "adapter", "--human-profile", bad_profile], "not allowed with"),
            ]
            for argv, pattern in cases:
                with self.subTest(argv=argv[-2:]):
                    rc, err = self.run_cli(*argv)
                    self.assertEqual(rc, 2, err)
                    self.assertRegex(err, pattern)
            # A home with the person's controller on their port gets past the checks
            # (to libmelee, which refuses the folder as Dolphin).
            rc, err = self.run_cli(*ok, "--dolphin-home", home, "--opponent-port", "3")
            self.assertEqual(rc, 2, err)
            self.assertIn("as Slippi Dolphin", err)
            # --stage with --autostart gets past the checks (to libmelee, as above).
            rc, err = self.run_cli(*ok, "--stage", "BATTLEFIELD", "--autostart")
            self.assertEqual(rc, 2, err)
            self.assertIn("as Slippi Dolphin", err)
            # A folder that holds no Slippi Dolphin: libmelee refuses it, exit 2.
            rc, err = self.run_cli(*ok)
            self.assertEqual(rc, 2, err)
            self.assertIn("cannot use", err)
            self.assertIn("as Slippi Dolphin", err)
            # A model this adapter cannot use: exit 2 before Dolphin starts.
            bad = os.path.join(d, "bad.safetensors")
            with open(bad, "wb") as f:
                f.write(model_mod.save_bytes(meta, w)[:-10])
            rc, err = self.run_cli("play", "--model", bad, "--dolphin", d, "--iso", iso)
            self.assertEqual(rc, 2)
            self.assertIn("truncated", err)

    def test_info(self):
        with tempfile.TemporaryDirectory() as d:
            model = os.path.join(d, "m.safetensors")
            for side, says in [("fox", "side fox (plays Fox, against Marth)"), ("marth", "side marth (plays Marth, against Fox)")]:
                meta, w = support.make_model("fight", 23, side=side)
                with open(model, "wb") as f:
                    f.write(model_mod.save_bytes(meta, w))
                out = io.StringIO()
                with contextlib.redirect_stdout(out):
                    self.assertEqual(cli.main(["info", "--model", model]), 0)
                self.assertIn("action set 'fight' (23 actions)", out.getvalue())
                self.assertIn("17 shine (4 frames)", out.getvalue())
                self.assertIn(says, out.getvalue())

    def test_help_explains_the_commands(self):
        for argv, words in ((["--help"], ["play", "states", "exit codes"]), (["play", "--help"], ["--dolphin", "--iso", "default 2", "default 1", "Fox", "Marth", "entry animation", "--dolphin-home", "--human-controller adapter", "--human-controller home", "--human-profile FILE", "SIDevice = 12", "SIDevice = 6", "GCPadNew.ini"]), (["states", "--help"], ["frame,s0,...,s26", "-123", ".9g", "--opponent-port"])):
            out = io.StringIO()
            with contextlib.redirect_stdout(out), self.assertRaises(SystemExit) as cm:
                cli.main(argv)
            self.assertEqual(cm.exception.code, 0)
            for word in words:
                self.assertIn(word, out.getvalue())


@unittest.skipUnless(__import__("platform").system() == "Linux", "the stand-in Dolphin answers libmelee's Linux version check")
class GuideCommandTest(unittest.TestCase):
    """docs/play-your-bot.md, "In Slippi Dolphin": its command line as written, run
    through the CLI with libmelee's real ``Console`` and ``Controller`` on a stand-in
    Slippi Dolphin in a folder named as the Slippi Launcher's; where Dolphin would
    start, the config files libmelee and shine-bot left for it are checked instead."""

    def test_the_guides_command_sets_up_the_bot_on_port_2_and_you_on_the_adapters_port_1(self):
        import stat

        with tempfile.TemporaryDirectory() as d:
            # python -m shine_bot play --model ~/fight.safetensors --dolphin "$HOME/.config/Slippi Launcher/netplay" --iso ~/games/melee.iso
            netplay = os.path.join(d, ".config", "Slippi Launcher", "netplay")
            os.makedirs(netplay)
            exe = os.path.join(netplay, "Slippi_Online-x86_64.AppImage")
            with open(exe, "w") as f:
                f.write("#!/bin/sh\necho 'Faster Melee - Slippi (3.4.0)'\nexit 255\n")
            os.chmod(exe, os.stat(exe).st_mode | stat.S_IXUSR)
            model = os.path.join(d, "fight.safetensors")
            meta, w = support.make_model("fight", 23)
            with open(model, "wb") as f:
                f.write(model_mod.save_bytes(meta, w))
            os.makedirs(os.path.join(d, "games"))
            iso = os.path.join(d, "games", "melee.iso")
            open(iso, "wb").close()
            seen = {}

            def run(net, dolphin, iso_path, port, opponent_port, stage, autostart, human=None, dolphin_home=None):
                console, _, you = play.prepare(dolphin, port, opponent_port, human, dolphin_home)
                try:
                    home = console.dolphin_home_path
                    seen.update(port=port, opponent_port=opponent_port, stage=stage, autostart=autostart, you=you)
                    for name in ("Dolphin.ini", "GCPadNew.ini"):
                        with open(os.path.join(home, "Config", name)) as f:
                            seen[name] = {k.lower(): v for k, v in (line.split(" = ", 1) for line in f.read().splitlines() if " = " in line)}
                    seen["pipe"] = stat.S_ISFIFO(os.stat(os.path.join(home, "Pipes", f"slippibot{port}")).st_mode)
                finally:
                    play.discard(console)
                return 0

            with mock.patch.object(play, "run", run):
                rc = cli.main(["play", "--model", model, "--dolphin", netplay, "--iso", iso])
        self.assertEqual(rc, 0)
        self.assertEqual((seen["port"], seen["opponent_port"], seen["stage"], seen["autostart"]), (2, 1, "FINAL_DESTINATION", False))
        # You: the adapter on port 1 (SIDevice0 = 12), nothing to map; the bot: a
        # standard controller on port 2 mapped to its pipe.
        self.assertEqual(seen["Dolphin.ini"]["sidevice0"], "12")
        self.assertEqual(seen["Dolphin.ini"]["sidevice1"], "6")
        self.assertEqual(seen["GCPadNew.ini"]["device"], "Pipe/0/slippibot2")
        self.assertTrue(seen["pipe"])
        self.assertIn("GameCube controller adapter (plug into its port 1)", seen["you"])


if __name__ == "__main__":
    unittest.main()
