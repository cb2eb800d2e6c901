import re
import unittest

import numpy as np

import support
from shine_bot import actions
from shine_bot.actions import NEUTRAL, Pad

UNTOUCHABLE = ["nothing", "shine", "spot_dodge", "roll_left", "roll_right"]
FIGHT = [
    "nothing", "left", "right", "crouch", "jump", "jump_left", "jump_right", "jab",
    "ftilt_left", "ftilt_right", "utilt", "dtilt", "smash_left", "smash_right", "smash_up",
    "smash_down", "special", "shine", "up_special", "shield", "spot_dodge", "roll_left", "roll_right",
]  # fmt: skip
DOWN = (0.5, 0.0)
ROLL_Y = float(np.float32(89.0 / 255.0))


class ActionSetTest(unittest.TestCase):
    def test_counts_and_names_in_order(self):
        self.assertEqual([m.name for m in actions.ACTION_SETS["untouchable"]], UNTOUCHABLE)
        self.assertEqual([m.name for m in actions.ACTION_SETS["fight"]], FIGHT)
        self.assertEqual(sorted(actions.ACTION_SETS), ["fight", "untouchable"])

    def test_untouchable_scripts_are_shines(self):
        # Values of agent/src/actions.rs, untouchable_macros().
        u = actions.action_set("untouchable")
        self.assertEqual(u[0].script, (NEUTRAL,))
        shine = u[1].script
        self.assertEqual(len(shine), 8)
        self.assertEqual(shine[0], Pad(buttons={"B"}, main=DOWN))
        self.assertEqual(shine[1:3], (Pad(main=DOWN),) * 2)
        self.assertEqual(shine[3], Pad(buttons={"X"}))
        self.assertEqual(shine[4:], (NEUTRAL,) * 4)
        dodge = u[2].script
        self.assertEqual(len(dodge), 22)
        self.assertEqual(dodge[:10], (Pad(buttons={"L"}, main=DOWN, l=1.0),) * 10)
        self.assertEqual(dodge[10:], (NEUTRAL,) * 12)
        for i, x in ((3, 0.0), (4, 1.0)):
            roll = u[i].script
            self.assertEqual(len(roll), 30)
            self.assertEqual(roll[:10], (Pad(buttons={"L"}, main=(x, ROLL_Y), l=1.0),) * 10)
            self.assertEqual(roll[10:], (NEUTRAL,) * 20)
        self.assertEqual(u[3].script[0].main, (0.0, 0.34901961684226990))  # 89/255 as f32
        self.assertTrue(actions.is_shine(u, 1))
        self.assertFalse(actions.is_shine(u, 2))
        self.assertFalse(actions.is_shine(u, 5))

    def test_fight_scripts(self):
        f = actions.action_set("fight")
        self.assertTrue(all(len(m.script) == 4 for m in f))
        by = {m.name: m.script for m in f}
        self.assertEqual(by["left"], (Pad(main=(0.0, 0.5)),) * 4)
        self.assertEqual(by["crouch"], (Pad(main=DOWN),) * 4)
        self.assertEqual(by["jump_right"], (Pad(buttons={"X"}, main=(1.0, 0.5)),) + (Pad(main=(1.0, 0.5)),) * 3)
        self.assertEqual(by["ftilt_left"][0], Pad(buttons={"A"}, main=(0.2, 0.5)))
        self.assertEqual(by["ftilt_left"][0].main, (float(np.float32(0.2)), 0.5))
        self.assertEqual(by["dtilt"][1], Pad(main=(0.5, 0.2)))
        self.assertEqual(by["smash_down"], (Pad(c=(0.5, 0.0)),) + (NEUTRAL,) * 3)
        self.assertEqual(by["shine"], (Pad(buttons={"B"}, main=DOWN),) + (Pad(main=DOWN),) * 3)
        self.assertEqual(by["up_special"][0], Pad(buttons={"B"}, main=(0.5, 1.0)))
        self.assertEqual(by["shield"], (Pad(buttons={"R"}, r=1.0),) * 4)
        self.assertEqual(by["roll_right"], (Pad(buttons={"L"}, main=(1.0, 0.5), l=1.0),) * 4)
        self.assertTrue(actions.is_shine(f, 17))

    def test_unknown_action_set_is_a_clear_error(self):
        with self.assertRaisesRegex(ValueError, "unknown action set 'x'.*knows fight, untouchable"):
            actions.action_set("x")

    def test_pads_refuse_unknown_buttons(self):
        with self.assertRaisesRegex(ValueError, "unknown button"):
            Pad(buttons={"Q"})


class AgainstRustSourceTest(unittest.TestCase):
    """The names, in order, and the roll stick of agent/src/actions.rs itself (skipped
    outside a Shine checkout)."""

    def setUp(self):
        self.src = support.rust_source("agent", "src", "actions.rs")
        if self.src is None:
            self.skipTest("agent/src/actions.rs is not here")

    def fn_body(self, name):
        start = self.src.index(f"fn {name}()")
        end = self.src.index("\n}\n", start)
        return self.src[start:end]

    def test_untouchable_names(self):
        names = re.findall(r'Macro \{ name: "(\w+)"|name: "(\w+)",', self.fn_body("untouchable_macros"))
        self.assertEqual([a or b for a, b in names], UNTOUCHABLE)

    def test_fight_names(self):
        names = re.findall(r'(?:held|press|c)\("(\w+)"', self.fn_body("fight_macros"))
        self.assertEqual(names, FIGHT)
        self.assertIn("const HOLD: usize = 4;", self.fn_body("fight_macros"))

    def test_untouchable_frame_counts(self):
        body = self.fn_body("untouchable_macros")
        self.assertIn("repeat(shield_down, 10).chain(repeat(n, 12))", body)
        self.assertIn("repeat(roll(0.0), 10).chain(repeat(n, 20))", body)
        self.assertIn("repeat(roll(1.0), 10).chain(repeat(n, 20))", body)
        for part in (
            "repeat(Pad { main: DOWN, ..n.with(Button::B) }, 1)",
            ".chain(repeat(Pad { main: DOWN, ..n }, 2))",
            ".chain(repeat(n.with(Button::X), 1))",
            ".chain(repeat(n, 4))",
        ):
            self.assertIn(part, body)
        self.assertIn("const ROLL_Y: f32 = 89.0 / 255.0;", self.src)
        self.assertIn("const DOWN: Stick = Stick::new(0.5, 0.0);", self.src)


if __name__ == "__main__":
    unittest.main()
