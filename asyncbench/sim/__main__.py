"""`python -m asyncbench.sim [flags]`: the same as `asyncbench simulate [flags]`."""

from __future__ import annotations

import sys

from ..cli import main

if __name__ == "__main__":
    sys.exit(main(["simulate", *sys.argv[1:]]))
