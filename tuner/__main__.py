"""``python -m tuner``: the same entry point as the ``tensortune`` command."""

import sys

from tuner.cli import main

sys.exit(main())
