"""``python -m shine_bot``: see :mod:`shine_bot.cli`."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
