"""``python -m halfway``: the ``halfway`` command."""

import sys

from .cli.entry import main

if __name__ == "__main__":
    sys.exit(main())
