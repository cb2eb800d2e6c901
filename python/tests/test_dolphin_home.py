"""The person's controller in the Dolphin user folder: the ini files shine-bot writes,
on hand-made folders and on the ones libmelee itself makes (a real ``Console`` and
``Controller`` with a stand-in Dolphin executable, which is never started)."""

import configparser
import os
import platform
import stat
import tempfile
import unittest

import support  # noqa: F401 (the package beside the tests)
from shine_bot import dolphin_home as home_mod
from shine_bot import play

PROFILE = """\
[Profile]
Device = evdev/0/Xbox Wireless Controller
Buttons/A = `SOUTH`
Buttons/B = `WEST`
Main Stick/Up = `Axis 1-`
# a comment
Main Stick/Modifier/Range = 50.0
Triggers/L-Analog = `Full Axis 2+`
"""

#: A person's own Dolphin.ini and GCPadNew.ini: a keyboard on port 1, the adapter on
#: port 3, their display settings.
PERSON_DOLPHIN_INI = """\
[Core]
SIDevice0 = 6
SIDevice1 = 0
SIDevice2 = 12
SIDevice3 = 0
SlotA = 255
[Display]
Fullscreen = False
[Slippi]
ReplayDir = /home/me/Slippi
"""
PERSON_GCPAD_INI = """\
[GCPad1]
Device = XInput2/0/Virtual core pointer
Buttons/A = `X`
Main Stick/Up = `Up`
[GCPad2]
Device = XInput2/0/Virtual core pointer
Buttons/A = `Q`
[GCPad3]
Device = XInput2/0/Virtual core pointer
[GCPad4]
Device = XInput2/0/Virtual core pointer
"""


def read_ini(path):
    p = configparser.ConfigParser(interpolation=None, strict=False)
    p.optionxform = str
    p.read(path)
    return {s: dict(p.items(s)) for s in p.sections()}


def lower_keys(sections):
    """Sections with their keys in lower case (Dolphin reads keys without regard to case)."""
    return {s: {k.lower(): v for k, v in kv.items()} for s, kv in sections.items()}


def write_home(root, dolphin_ini=PERSON_DOLPHIN_INI, gcpad_ini=PERSON_GCPAD_INI):
    os.makedirs(os.path.join(root, "Config"), exist_ok=True)
    with open(os.path.join(root, "Config", "Dolphin.ini"), "w") as f:
        f.write(dolphin_ini)
    if gcpad_ini is not None:
        with open(os.path.join(root, "Config", "GCPadNew.ini"), "w") as f:
            f.write(gcpad_ini)
    return root


class ProfileTest(unittest.TestCase):
    def test_a_profile_gives_its_device_and_mapping(self):
        pad = home_mod.parse_profile(PROFILE, "pad.ini")
        self.assertEqual(pad.kind, home_mod.PROFILE)
        self.assertEqual(pad.device, "evdev/0/Xbox Wireless Controller")
        self.assertEqual(
            pad.mapping,
            (
                ("Buttons/A", "`SOUTH`"),
                ("Buttons/B", "`WEST`"),
                ("Main Stick/Up", "`Axis 1-`"),
                ("Main Stick/Modifier/Range", "50.0"),
                ("Triggers/L-Analog", "`Full Axis 2+`"),
            ),
        )
        self.assertIn("evdev/0/Xbox Wireless Controller (mapped by pad.ini)", pad.describe(1))

    def test_profiles_that_cannot_work_are_refused_with_what_to_do(self):
        cases = [
            ("", "no [Profile] section with button mappings"),
            ("[Other]\nButtons/A = `A`\n", "no [Profile] section"),
            ("[Profile]\nDevice = evdev/0/Pad\n", "no [Profile] section with button mappings"),
            ("[Profile]\nButtons/A = `A`\n", "names no Device"),
            ("[Profile]\nDevice = evdev/0/Pad\nButtons/A\n", "is not `key = value`"),
        ]
        for text, message in cases:
            with self.subTest(text=text):
                with self.assertRaises(home_mod.ConfigError) as cm:
                    home_mod.parse_profile(text, "pad.ini")
                self.assertIn(message, str(cm.exception))

    def test_load_profile(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "pad.ini")
            with open(path, "w") as f:
                f.write(PROFILE)
            self.assertEqual(home_mod.load_profile(path).source, path)
            with self.assertRaisesRegex(home_mod.ConfigError, "cannot read the GCPad profile"):
                home_mod.load_profile(os.path.join(d, "missing.ini"))


class ConfigurePortTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.home = write_home(self.tmp.name)
        self.before = {n: read_ini(os.path.join(self.home, "Config", n)) for n in ("Dolphin.ini", "GCPadNew.ini")}

    def tearDown(self):
        self.tmp.cleanup()

    def files(self):
        return {n: read_ini(os.path.join(self.home, "Config", n)) for n in ("Dolphin.ini", "GCPadNew.ini")}

    def test_the_adapter_sets_only_the_ports_sidevice(self):
        home_mod.configure_port(self.home, 2, home_mod.adapter())
        after = self.files()
        want = self.before["Dolphin.ini"]
        want["Core"]["SIDevice1"] = "12"
        self.assertEqual(after["Dolphin.ini"], want)
        # No mapping for the adapter: GCPadNew.ini is as it was.
        self.assertEqual(after["GCPadNew.ini"], self.before["GCPadNew.ini"])

    def test_a_profile_maps_the_port_and_plugs_a_standard_controller(self):
        home_mod.configure_port(self.home, 2, home_mod.parse_profile(PROFILE, "pad.ini"))
        after = self.files()
        want = self.before["Dolphin.ini"]
        want["Core"]["SIDevice1"] = "6"
        self.assertEqual(after["Dolphin.ini"], want)
        # The port's section is the profile's, whole: nothing of the old mapping.
        self.assertEqual(
            after["GCPadNew.ini"]["GCPad2"],
            {
                "Device": "evdev/0/Xbox Wireless Controller",
                "Buttons/A": "`SOUTH`",
                "Buttons/B": "`WEST`",
                "Main Stick/Up": "`Axis 1-`",
                "Main Stick/Modifier/Range": "50.0",
                "Triggers/L-Analog": "`Full Axis 2+`",
            },
        )
        for other in ("GCPad1", "GCPad3", "GCPad4"):
            self.assertEqual(after["GCPadNew.ini"][other], self.before["GCPadNew.ini"][other])

    def test_a_key_in_another_case_is_replaced_not_doubled(self):
        # libmelee's configparser writes keys in lower case; Dolphin reads either.
        write_home(self.home, "[Core]\nsidevice0 = 6\nsidevice1 = 6\n", None)
        home_mod.configure_port(self.home, 1, home_mod.adapter())
        with open(os.path.join(self.home, "Config", "Dolphin.ini")) as f:
            text = f.read()
        self.assertEqual(text.lower().count("sidevice0"), 1, text)
        self.assertEqual(read_ini(os.path.join(self.home, "Config", "Dolphin.ini")), {"Core": {"sidevice1": "6", "SIDevice0": "12"}})
        self.assertEqual(home_mod.si_device(self.home, 1), home_mod.SI_WIIU_ADAPTER)

    def test_an_empty_folder_gets_the_files(self):
        with tempfile.TemporaryDirectory() as d:
            home_mod.configure_port(d, 4, home_mod.parse_profile(PROFILE))
            self.assertEqual(read_ini(os.path.join(d, "Config", "Dolphin.ini")), {"Core": {"SIDevice3": "6"}})
            self.assertEqual(read_ini(os.path.join(d, "Config", "GCPadNew.ini"))["GCPad4"]["Device"], "evdev/0/Xbox Wireless Controller")

    def test_home_writes_nothing(self):
        home_mod.configure_port(self.home, 1, home_mod.home())
        self.assertEqual(self.files(), self.before)


class HomePortTest(unittest.TestCase):
    def test_what_a_home_plugs_into_each_port(self):
        with tempfile.TemporaryDirectory() as d:
            write_home(d)
            home_mod.check_home(d)
            self.assertEqual([home_mod.si_device(d, p) for p in (1, 2, 3, 4)], [6, 0, 12, 0])
            self.assertIn("a standard controller (XInput2/0/Virtual core pointer)", home_mod.home_port(d, 1))
            self.assertIn("the GameCube controller adapter (port 3 of the adapter)", home_mod.home_port(d, 3))
            with self.assertRaises(home_mod.ConfigError) as cm:
                home_mod.home_port(d, 2)
            msg = str(cm.exception)
            for words in ("nothing plugged into port 2 (SIDevice1 = 0)", "--opponent-port", "--human-controller adapter", "--human-profile"):
                self.assertIn(words, msg)

    def test_missing_keys_are_slippi_dolphins_defaults(self):
        # Issue 46: both Slippi Dolphins put the adapter on every port without a key
        # (mainline Dolphin: a standard controller on port 1, nothing on the others,
        # which refused ports 2-4 of a home that never set them).
        with tempfile.TemporaryDirectory() as d:
            write_home(d, "[Core]\nCPUCore = 1\n", None)
            self.assertEqual([home_mod.si_device(d, p) for p in (1, 2, 3, 4)], [12, 12, 12, 12])
            for p in (1, 2, 3, 4):
                self.assertIn(f"the GameCube controller adapter (port {p} of the adapter)", home_mod.home_port(d, p))
            # A key that is there still wins.
            write_home(d, "[Core]\nsidevice3 = 0\n", None)
            with self.assertRaisesRegex(home_mod.ConfigError, "nothing plugged into port 4"):
                home_mod.home_port(d, 4)

    def test_a_bots_pipe_is_not_the_persons_controller(self):
        with tempfile.TemporaryDirectory() as d:
            write_home(d, "[Core]\nSIDevice1 = 6\n", "[GCPad2]\nDevice = Pipe/0/slippibot2\n")
            with self.assertRaisesRegex(home_mod.ConfigError, "maps port 2 to a bot's pipe"):
                home_mod.home_port(d, 2)

    def test_a_folder_that_is_not_a_dolphin_home(self):
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaisesRegex(home_mod.ConfigError, "has no Config/Dolphin.ini"):
                home_mod.check_home(d)
            with self.assertRaisesRegex(home_mod.ConfigError, "does not exist"):
                home_mod.check_home(os.path.join(d, "none"))
            f = os.path.join(d, "file")
            open(f, "w").close()
            with self.assertRaisesRegex(home_mod.ConfigError, "is not a folder"):
                home_mod.check_home(f)


@unittest.skipUnless(platform.system() == "Linux", "the stand-in Dolphin answers libmelee's Linux version check")
class WithLibmeleeTest(unittest.TestCase):
    """:func:`play.prepare` with libmelee's real ``Console`` and ``Controller``: the
    temporary folder libmelee makes (or copies), the bot's port as libmelee sets it
    up, the person's as shine-bot does. Dolphin is never started."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        # libmelee runs `dolphin --version`; Slippi's Ishiiruka prints its version and
        # exits 255.
        self.dolphin = os.path.join(self.tmp.name, "Slippi_Online-x86_64.AppImage")
        with open(self.dolphin, "w") as f:
            f.write("#!/bin/sh\necho 'Faster Melee - Slippi (3.4.0)'\nexit 255\n")
        os.chmod(self.dolphin, os.stat(self.dolphin).st_mode | stat.S_IXUSR)
        self.consoles = []

    def tearDown(self):
        for c in self.consoles:
            play.discard(c)
        self.tmp.cleanup()

    def prepare(self, *args, **kw):
        console, controller, you = play.prepare(self.dolphin, *args, **kw)
        self.consoles.append(console)
        return console, controller, you

    def ini(self, console, name):
        return lower_keys(read_ini(os.path.join(console.dolphin_home_path, "Config", name)))

    def assert_bot_port_as_libmelee_sets_it(self, console, port):
        self.assertEqual(self.ini(console, "Dolphin.ini")["Core"][f"sidevice{port - 1}"], "6")
        pad = self.ini(console, "GCPadNew.ini")[f"GCPad{port}"]
        self.assertEqual(pad["device"], f"Pipe/0/slippibot{port}")
        self.assertEqual(pad["buttons/a"], "Button A")
        self.assertEqual(pad["main stick/up"], "Axis MAIN Y +")
        self.assertTrue(stat.S_ISFIFO(os.stat(os.path.join(console.dolphin_home_path, "Pipes", f"slippibot{port}")).st_mode))

    def test_an_empty_home_gets_the_adapter_on_the_persons_port(self):
        console, _, you = self.prepare(2, 1)
        home = console.dolphin_home_path
        self.assertTrue(home.startswith(tempfile.gettempdir()), home)
        core = self.ini(console, "Dolphin.ini")["Core"]
        self.assertEqual(core["sidevice0"], "12")
        self.assertNotIn("sidevice2", core)
        self.assertNotIn("sidevice3", core)
        self.assert_bot_port_as_libmelee_sets_it(console, 2)
        # The adapter needs no mapping: only the bot's section.
        self.assertEqual(sorted(self.ini(console, "GCPadNew.ini")), ["GCPad2"])
        self.assertIn("GameCube controller adapter (plug into its port 1)", you)
        play.discard(console)
        self.assertFalse(os.path.exists(home), "discard() removes the temporary folder")

    def test_a_copied_home_with_a_profile(self):
        person = write_home(os.path.join(self.tmp.name, "me"))
        kept = {}
        for n in ("Dolphin.ini", "GCPadNew.ini"):
            with open(os.path.join(person, "Config", n)) as f:
                kept[n] = f.read()
        pad = home_mod.parse_profile(PROFILE, "pad.ini")
        console, _, you = self.prepare(2, 1, human=pad, dolphin_home=person)
        self.assertNotEqual(os.path.realpath(console.dolphin_home_path), os.path.realpath(person))
        dolphin, pads = self.ini(console, "Dolphin.ini"), self.ini(console, "GCPadNew.ini")
        self.assertEqual([dolphin["Core"][f"sidevice{i}"] for i in range(4)], ["6", "6", "12", "0"])
        self.assert_bot_port_as_libmelee_sets_it(console, 2)
        # The person's port is the profile's, whole (their keyboard's mapping is gone).
        self.assertEqual(pads["GCPad1"], {"device": pad.device, **{k.lower(): v for k, v in pad.mapping}})
        for other in ("GCPad3", "GCPad4"):
            self.assertEqual(pads[other], lower_keys(read_ini(os.path.join(person, "Config", "GCPadNew.ini")))[other])
        # The person's display setting is kept (libmelee would force full screen).
        self.assertEqual(dolphin["Display"]["fullscreen"], "False")
        self.assertIn("evdev/0/Xbox Wireless Controller", you)
        # Their own folder is not changed.
        for n, text in kept.items():
            with open(os.path.join(person, "Config", n)) as f:
                self.assertEqual(f.read(), text)

    def test_a_copied_home_as_it_is(self):
        person = write_home(os.path.join(self.tmp.name, "me"))
        console, _, you = self.prepare(2, 3, dolphin_home=person)  # default: home
        dolphin = self.ini(console, "Dolphin.ini")
        self.assertEqual([dolphin["Core"][f"sidevice{i}"] for i in range(4)], ["6", "6", "12", "0"])
        self.assert_bot_port_as_libmelee_sets_it(console, 2)
        self.assertIn("the GameCube controller adapter (port 3 of the adapter), from your Dolphin home", you)
        # ... and the adapter asked for on a copied home.
        console, _, you = self.prepare(2, 4, human=home_mod.adapter(), dolphin_home=person)
        self.assertEqual(self.ini(console, "Dolphin.ini")["Core"]["sidevice3"], "12")

    def test_a_copied_home_with_nothing_on_the_persons_port_is_refused(self):
        person = write_home(os.path.join(self.tmp.name, "me"))
        before = set(os.listdir(tempfile.gettempdir()))
        with self.assertRaises(play.PlayError) as cm:
            self.prepare(1, 2, dolphin_home=person)
        self.assertEqual(cm.exception.exit_code, 2)
        self.assertIn("nothing plugged into port 2", str(cm.exception))
        # The temporary copy is removed.
        self.assertEqual({n for n in set(os.listdir(tempfile.gettempdir())) - before if n.startswith("libmelee_")}, set())

    def test_home_needs_a_home(self):
        with self.assertRaises(play.PlayError) as cm:
            self.prepare(2, 1, human=home_mod.home())
        self.assertEqual(cm.exception.exit_code, 2)


if __name__ == "__main__":
    unittest.main()
