"""The `asyncbench` command.

Each subcommand lives in a module that provides `add_arguments(parser)` and
`main(args) -> int`; nested commands (`score longbench`, `estimate longscore`) map a name
to such a module. Modules keep heavy imports inside `main` so `asyncbench --help` is fast.

User errors (`UserError`) print one line and exit 2; no traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
from typing import NoReturn

from . import __version__
from .errors import UserError

# command -> module, or command -> {subcommand -> module}
COMMANDS: dict[str, str | dict[str, str]] = {
    "run": "asyncbench.commands.run",
    "simulate": "asyncbench.commands.simulate",
    "cache": "asyncbench.commands.cache",
    "report": "asyncbench.commands.report",
    "samples": "asyncbench.commands.samples",
    "compare": "asyncbench.commands.compare",
    "view": "asyncbench.commands.view",
    "score": {
        "longbench": "asyncbench.commands.score_longbench",
        "bamboo": "asyncbench.commands.score_bamboo",
    },
    "estimate": {
        "minilongbench": "asyncbench.commands.estimate_minilongbench",
        "longscore": "asyncbench.commands.estimate_longscore",
    },
    "minilongbench": {
        "build": "asyncbench.commands.minilongbench_build",
    },
    "deploy": {
        "compose": "asyncbench.commands.deploy_compose",
    },
}

HELP = {
    "run": "run a benchmark against a model",
    "simulate": "start the local endpoint simulator (OpenAI, Anthropic, TGI wire formats)",
    "cache": "inspect, export or clear the response cache",
    "report": "show stored runs side by side (table, Markdown, JSON, HTML with plots)",
    "samples": "show or export every sample of a run: prompt, references, output, score, cost",
    "compare": "compare two runs of one benchmark: paired differences, intervals and p-values",
    "view": "browse every run of the cache in the browser, live while runs go",
    "score": "score predictions made elsewhere with the official metrics",
    "estimate": "estimate full-benchmark scores (MiniLongBench IRT, LongScore)",
    "minilongbench": "rebuild MiniLongBench anchors and IRT parameters",
    "deploy": "write deployment files (docker compose: TGI fleet, Ray, evaluator)",
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2
        self.exit(2, f"asyncbench: error: {message}{_suggestion(self, message)} (see {self.prog} --help)\n")


def _options(parser: argparse.ArgumentParser) -> list[str]:
    """Every --option of `parser` and of its subcommands, at any depth."""
    out = [o for a in parser._actions for o in a.option_strings if o.startswith("--")]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                out += [o for o in _options(child) if o not in out]
    return out


def _suggestion(parser: argparse.ArgumentParser, message: str) -> str:
    """"did you mean" for a mistyped option or command (argparse names neither)."""
    from .errors import did_you_mean

    if message.startswith("unrecognized arguments: "):
        typo = next((w.split("=")[0] for w in message.split(": ", 1)[1].split() if w.startswith("--")), None)
        return did_you_mean(typo, _options(parser)) if typo else ""
    found = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
    return did_you_mean(found.group(1), re.findall(r"'([^']*)'", found.group(2))) if found else ""


def _add_module(sub: argparse._SubParsersAction[_Parser], name: str, module: str, help: str | None) -> None:
    mod = importlib.import_module(module)
    doc = (mod.__doc__ or "").strip()
    parser = sub.add_parser(name, help=help or doc.splitlines()[0] if doc else help, description=doc)
    mod.add_arguments(parser)
    parser.set_defaults(_main=mod.main)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line, or (`only`) just that command's part: each command's
    module is imported to add its options, and a run needs none of the others (~25 ms
    of its start-up)."""
    parser = _Parser(prog="asyncbench", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--version", action="version", version=f"asyncbench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, target in COMMANDS.items():
        if only is not None and name != only:
            continue
        if isinstance(target, str):
            _add_module(sub, name, target, HELP.get(name))
        else:
            group = sub.add_parser(name, help=HELP.get(name))
            inner = group.add_subparsers(dest="target", metavar="TARGET", parser_class=_Parser)
            inner.required = True
            for sub_name, module in target.items():
                _add_module(inner, sub_name, module, None)
    return parser


def main(argv: list[str] | None = None) -> int:
    # numpy's OpenBLAS starts a thread per core on import, and they spin on the CPU for a
    # while: ~100 ms of CPU per process on 2 cores (more on large machines), for matrix
    # products of a few hundred rows that one thread does as fast. Before numpy is
    # imported (commands import it inside `main`); a value the user set is kept.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    args_in = sys.argv[1:] if argv is None else argv
    parser = build_parser(args_in[0] if args_in and args_in[0] in COMMANDS else None)
    args = parser.parse_args(argv)
    if not getattr(args, "_main", None):
        parser.print_help()
        return 2
    try:
        return int(args._main(args) or 0)
    except BrokenPipeError:  # `asyncbench samples ... | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 0
    except RecursionError:
        # a JSON input nested thousands deep that a reader let through: bad input, not a crash
        print("asyncbench: error: an input file is nested too deeply (JSON arrays/objects inside each other "
              "over ~900 levels); flatten it", file=sys.stderr)
        return 2
    except UserError as exc:
        from .secrets import redact
        from .terminal import shown

        print(f"asyncbench: error: {shown(redact(str(exc)))}", file=sys.stderr)
        return 2
    except Exception as exc:  # an exception group holding a UserError one of a run's tasks raised (a full disk)
        found = _user_error_in(exc)
        if found is None:
            raise
        from .secrets import redact

        print(f"asyncbench: error: {redact(str(found))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("asyncbench: interrupted; completed responses are saved in the cache", file=sys.stderr)
        return 130


def _user_error_in(exc: BaseException) -> UserError | None:
    """The first UserError inside an exception group (of any depth), if any; a plain
    exception is not searched (its cause may be one a command chose not to show)."""
    for inner in getattr(exc, "exceptions", ()):
        found = inner if isinstance(inner, UserError) else _user_error_in(inner)
        if found is not None:
            return found
    return None


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
