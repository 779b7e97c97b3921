"""`python -m asyncbench.sim [flags]`: the same as `asyncbench simulate [flags]`."""

from __future__ import annotations

import argparse
import sys

from ..errors import UserError
from . import cli


def run(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m asyncbench.sim", description=cli.__doc__)
    cli.add_arguments(parser)
    try:
        return cli.main(parser.parse_args(argv))
    except UserError as exc:
        print(f"asyncbench: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(run())
