import unittest

import numpy as np

import support
from support import gamestate, player
from shine_bot import state as state_mod

F = np.float32


class PlayerFloatsTest(unittest.TestCase):
    def test_hand_computed_floats(self):
        # The opponent of agent/src/state.rs's state_matches_hand_computed_floats (but
        # charging smash, which Slippi does not record: always 0 here).
        import melee

        opp = player(x=50.0, y=30.0, vx=2.0, vy=-4.0, action=0x0E, facing=False, on_ground=False, shield=30.0,
                     jumps_left=1, hitlag=6, percent=120.0, character=melee.Character.MARTH)  # fmt: skip
        bot = player(x=-100.0, y=0.0, action=0x169, facing=True, jumps_left=2, percent=12.9)
        reader = state_mod.StateReader(opponent_port=1, bot_port=2)
        reader.set_shine_flag(True)
        s = reader.read(gamestate(0, {1: opp, 2: bot}))
        self.assertEqual(s.dtype, np.float32)
        want = [
            F(300) / F(500), F(180) / F(300), F(22) / F(40), F(16) / F(40), F(14) / F(382), 0, 0, 1, 0.5, 0.5, F(6) / F(60), F(120) / F(1000), 0,
            F(150) / F(500), F(150) / F(300), 0.5, 0.5, F(0x169) / F(382), 1, 0, 0, 1, 0, 0, F(12) / F(1000), 0,
            1,
        ]  # fmt: skip
        np.testing.assert_array_equal(s, np.array(want, dtype=np.float32))
        self.assertAlmostEqual(float(s[11]), 0.12, places=6)
        self.assertAlmostEqual(float(s[24]), 0.012, places=6)  # 12.9 % shows as 12

    def test_float32_arithmetic_is_shines(self):
        # (x + 250) / 500 in float32, not in float64 then rounded.
        x = F(0.1)
        s = state_mod.player_floats(player(x=float(x)), 0)
        self.assertEqual(s[state_mod.X], (x + F(250)) / F(500))
        self.assertEqual(s[state_mod.X].dtype, np.float32)

    def test_unknown_action_ids_keep_their_raw_value(self):
        p = player(action=392)  # an id libmelee's Action enum has no name for
        self.assertEqual(type(p.action).__name__, "UnknownAnimation")
        self.assertEqual(state_mod.action_id(p), 392)
        self.assertEqual(state_mod.player_floats(p, 0)[state_mod.ACTION], F(392) / F(382))

    def test_jumps_used_from_jumps_left(self):
        import melee

        self.assertEqual(state_mod.max_jumps(melee.Character.FOX.value), 2)
        self.assertEqual(state_mod.max_jumps(melee.Character.MARTH.value), 2)
        self.assertEqual(state_mod.max_jumps(melee.Character.KIRBY.value), 6)
        self.assertEqual(state_mod.max_jumps(melee.Character.JIGGLYPUFF.value), 6)
        self.assertEqual(state_mod.player_floats(player(jumps_left=0), 0)[state_mod.JUMPS], 1.0)
        self.assertEqual(state_mod.player_floats(player(jumps_left=2), 0)[state_mod.JUMPS], 0.0)
        kirby = player(jumps_left=1, character=melee.Character.KIRBY)
        self.assertEqual(state_mod.player_floats(kirby, 0)[state_mod.JUMPS], 2.5)

    def test_fields_a_replay_lacks_read_as_zero(self):
        p = player(vx=3.0, vy=-1.0, on_ground=False, jumps_left=1, hitlag=4)
        full = state_mod.player_floats(p, 0)
        self.assertEqual(list(full[[2, 3, 7, 9, 10]]), [F(23) / F(40), F(19) / F(40), 1, 0.5, F(4) / F(60)])
        bare = state_mod.player_floats(p, 0, frozenset())
        self.assertEqual(list(bare[[2, 3, 7, 9, 10]]), [0.5, 0.5, 0, 0, 0])

    def test_recorded_fields_from_the_post_frame_size(self):
        class Console:
            eventsize = [0] * 0x100

        c = Console()
        c.eventsize[0x38] = 0x26  # Slippi 1.0.0: up to the action frame counter
        self.assertEqual(state_mod.recorded_fields(c), frozenset())
        c.eventsize[0x38] = 0x35  # 2.x: in air and jumps, no speeds
        self.assertEqual(state_mod.recorded_fields(c), {"on_ground", "jumps_left"})
        c.eventsize[0x38] = 0x49  # 3.5: speeds, no hitlag
        self.assertEqual(state_mod.recorded_fields(c), {"on_ground", "jumps_left", "speed_air_x_self", "speed_y_self"})
        c.eventsize[0x38] = 0x54
        self.assertEqual(state_mod.recorded_fields(c), state_mod.ALL_FIELDS)


class StateReaderTest(unittest.TestCase):
    def test_frames_in_action_count_and_reset(self):
        reader = state_mod.StateReader(1, 2)
        frames = []
        for frame, act in enumerate([0x0E] * 5 + [0x14] * 2 + [0x0E]):
            s = reader.read(gamestate(frame, {1: player(action=act), 2: player(action=0x0E)}))
            frames.append(round(float(s[12]) * 3600))
            self.assertEqual(s[25], F(frame) / F(3600))
        self.assertEqual(frames, [0, 1, 2, 3, 4, 0, 1, 0])

    def test_opponent_first_bot_second(self):
        reader = state_mod.StateReader(opponent_port=3, bot_port=1)
        s = reader.read(gamestate(0, {1: player(x=10.0), 3: player(x=-10.0)}))
        self.assertEqual(s[0], F(240) / F(500))
        self.assertEqual(s[13], F(260) / F(500))
        self.assertEqual(s[26], 0)

    def test_missing_port_is_an_error(self):
        reader = state_mod.StateReader(1, 2)
        with self.assertRaisesRegex(KeyError, "port 2 is not in this frame"):
            reader.read(gamestate(0, {1: player(), 4: player()}))

    def test_pick_opponent(self):
        gs = gamestate(0, {1: player(), 2: player()})
        self.assertEqual(state_mod.pick_opponent(gs, 2), 1)
        self.assertEqual(state_mod.pick_opponent(gs, 1), 2)
        with self.assertRaisesRegex(ValueError, "port 3 is not in the game; the ports in it are 1, 2"):
            state_mod.pick_opponent(gs, 3)
        with self.assertRaisesRegex(ValueError, "port 4 is not in the game"):
            state_mod.pick_opponent(gs, 2, 4)
        three = gamestate(0, {1: player(), 2: player(), 3: player()})
        with self.assertRaisesRegex(ValueError, "2 players besides port 2.*--opponent-port"):
            state_mod.pick_opponent(three, 2)
        self.assertEqual(state_mod.pick_opponent(three, 2, 3), 3)


if __name__ == "__main__":
    unittest.main()
