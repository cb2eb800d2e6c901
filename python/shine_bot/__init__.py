"""shine-bot: run Shine's Melee bots (Dueling DQN models) in Slippi Dolphin through
libmelee, and compute the 27-float state Shine's models see from Slippi replays.

Modules: :mod:`.model` (the model file, the forward pass), :mod:`.actions` (action
sets as per-frame pad scripts), :mod:`.state` (the 27 floats from libmelee's
``GameState``), :mod:`.pad` (press a pad through libmelee's ``Controller``),
:mod:`.play` (the bot in Dolphin), :mod:`.dolphin_home` (the person's controller in
Dolphin's user folder), :mod:`.states` (a replay's states as CSV),
:mod:`.cli` (``python -m shine_bot``).
"""

__version__ = "0.1.0"
