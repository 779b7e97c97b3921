"""`python -m asyncbench.sim [flags]`: the same as `asyncbench simulate [flags]`."""

from __future__ import annotations

import sys

from ..cli import main
from .testing import die_with_parent

if __name__ == "__main__":
    die_with_parent()  # when started by start_sim_subprocess (--model sim, tests)
    sys.exit(main(["simulate", *sys.argv[1:]]))
