"""``python -m halfway``: the ``halfway`` command."""

import sys

from halfway.entry import main

if __name__ == "__main__":
    sys.exit(main())
