"""``python -m helpers <command>``: the command line lives in :mod:`helpers.cli`."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
