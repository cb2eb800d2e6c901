"""Press a :class:`~shine_bot.actions.Pad` through libmelee's ``Controller``.

Every call sets the whole pad (all 12 buttons pressed or released, both sticks, both
analog triggers), as Shine's pipe writer does, so nothing from an earlier frame
lingers. libmelee sends the commands when ``console.step()`` flushes the controller.

Make the controller with ``fix_analog_inputs=False``: libmelee's default remaps stick
and trigger values (e.g. a trigger at 1.0 becomes 0.549), while Shine's macros are
written for Dolphin's plain pipe values, the ones Shine itself sends.
"""

import numpy as np

from .actions import BUTTONS, Pad


def _arg(v: float):
    # A float32: libmelee writes str(value), which for a numpy float32 is the
    # shortest text that reads back as the same float32, what Shine writes.
    return np.float32(v)


def press(controller, pad: Pad) -> None:
    """Set ``controller`` to ``pad`` for the next frame."""
    from melee import Button

    for name in BUTTONS:
        button = Button(name)
        if pad.pressed(name):
            controller.press_button(button)
        else:
            controller.release_button(button)
    controller.tilt_analog(Button.BUTTON_MAIN, _arg(pad.main[0]), _arg(pad.main[1]))
    controller.tilt_analog(Button.BUTTON_C, _arg(pad.c[0]), _arg(pad.c[1]))
    controller.press_shoulder(Button.BUTTON_L, _arg(pad.l))
    controller.press_shoulder(Button.BUTTON_R, _arg(pad.r))
