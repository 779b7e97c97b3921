"""Run a benchmark against a model: `asyncbench run BENCHMARK --model SPEC`.

BENCHMARK: longbench[:tasks], longbench-e, minilongbench, bamboo, 100-longbench, or
jsonl:PATH. SPEC: openai:MODEL, anthropic:MODEL, tgi:NAME, openai-compat:MODEL, sim
(the built-in simulator's baseline, started on 127.0.0.1), or auto (a real API when its
key is set, else sim). Several benchmarks (comma-separated), a repeated --model, or
--set FILE.toml make an eval set: every (model, benchmark) run together (run_set.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config import RunConfig, RunOption
    from ..run_summary import DryRunSummary, RunSummary


# --help lists the flags in this order: the run options (config.py declares them) by
# name, and the command's own flags. A run option not named here follows the named ones.
HELP_ORDER = ("--model", "--set", "base_urls", "endpoint_id", "api", "data_dir", "cache", "out", "--resume",
              "limit", "concurrency", "rpm", "tpm", "max_cost", "dry_run", "timeout_s", "max_attempts",
              "max_response_bytes", "max_input_tokens", "tokenizer", "official_model", "temperature", "repeat",
              "judge", "judge_base_urls", "prices", "--base-urls-file", "backend", "ray_address", "ray_workers",
              "ray_shared_limiter", "batch", "no_wait", "batch_fallback", "prompt_cache", "stream", "progress")


def add_arguments(p: argparse.ArgumentParser) -> None:
    from ..config import run_options

    p.add_argument("benchmark", nargs="?",
                   help="longbench[:t1,t2] | longbench-e | minilongbench | bamboo | 100-longbench | jsonl:PATH "
                        "(not needed with --resume); several, comma-separated, make an eval set")
    own: dict[str, Callable[[], object]] = {
        "--model": lambda: p.add_argument(
            "--model", action="append", default=None,
            help="provider:model, 'sim', or 'auto' (default); repeat for an eval set of several models"),
        "--set": lambda: p.add_argument(
            "--set", dest="set_file", metavar="FILE.toml",
            help="an eval set file: models (with their own base_url, rpm, tpm) x benchmarks, shared options "
                 "(examples/eval_set.toml)"),
        "--resume": lambda: p.add_argument(
            "--resume", metavar="RUN_ID", help="continue a stored run (id or unique prefix) with its stored settings"),
        "--base-urls-file": lambda: p.add_argument(
            "--base-urls-file", metavar="FILE",
            help="a fleet of endpoints: one URL per line (# comments allowed), added to --base-url"),
    }
    options = run_options()
    for name in [*HELP_ORDER, *(n for n in options if n not in HELP_ORDER)]:
        if name in own:
            own[name]()
        elif name in options:
            _add_option(p, options[name])
    p.add_argument("--json", action="store_true", help="print run.json (or the dry run) as JSON instead of a table")
    _add_benchmark_options(p)


def _add_option(p: argparse.ArgumentParser, opt: RunOption) -> None:
    """A run option's flag, as its declaration says (config.py)."""
    from ..config import Kind

    shape, how = opt.shape, opt.how
    helped, metavar = how.help, how.metavar
    if shape.kind is Kind.BOOL:
        if how.off_flag:  # yes, no, or unset (None): the "no" flag first, so unset stays the default
            p.add_argument(how.off_flag, action="store_false", dest=opt.name, default=opt.default, help=how.off_help)
        p.add_argument(opt.flag, action="store_true", dest=opt.name, help=helped)
    elif shape.kind is Kind.LIST:
        p.add_argument(opt.flag, action="append", default=[], dest=opt.name, help=helped, metavar=metavar)
    elif shape.kind is Kind.CHOICE:
        p.add_argument(opt.flag, choices=shape.choices, default=opt.default, dest=opt.name, help=helped,
                       metavar=metavar)
    else:
        parse: type[int] | type[float] | type[str] = {Kind.INT: int, Kind.FLOAT: float}.get(shape.kind, str)
        p.add_argument(opt.flag, type=parse, default=opt.default, dest=opt.name, help=helped, metavar=metavar)


def given_options(args: argparse.Namespace) -> dict[str, object]:
    """Every run option's value on the command line (its default where not given)."""
    from ..config import run_options

    return {name: getattr(args, name) for name in run_options()}


def _add_benchmark_options(p: argparse.ArgumentParser) -> None:
    """Each benchmark's own flags, as it declares them (benchmarks/*: OPTIONS)."""
    from ..benchmarks import benchmark_classes

    seen: set[str] = set()
    for name, cls in benchmark_classes().items():
        group = None
        for opt in cls.OPTIONS:
            if opt.flag in seen:
                continue
            seen.add(opt.flag)
            group = group or p.add_argument_group(f"{name} options")
            if opt.kind == "flag":
                group.add_argument(opt.flag, action="store_true", dest=opt.key, help=opt.help)
            else:
                kind = {"int": int, "float": float}.get(opt.kind, str)
                group.add_argument(opt.flag, type=kind, dest=opt.key, choices=opt.choices or None, help=opt.help)


def _extra(args: argparse.Namespace) -> dict[str, object]:
    """The chosen benchmark's options, as it declares them (benchmarks.benchmark_options)."""
    from ..benchmarks import benchmark_options, option_keys

    model = args.model[0] if isinstance(args.model, list) else args.model or "auto"  # --model repeats for sets
    return benchmark_options(args.benchmark, {k: getattr(args, k) for k in option_keys()}, model, args.tokenizer)


def _fleet_urls(path: str) -> list[str]:
    """Endpoint URLs from a file, one per line; blank lines and # comments skipped."""
    from pathlib import Path

    from ..errors import UserError
    from ..urls import validate_base_url

    try:
        raw = Path(path).expanduser().read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read --base-urls-file {path}: {exc.strerror or exc}") from None
    urls = []
    for lineno, line_bytes in enumerate(raw.splitlines(), 1):
        try:
            line = line_bytes.decode("utf-8")
        except UnicodeDecodeError:
            raise UserError(f"{path}:{lineno}: not text; write one endpoint URL per line") from None
        url = line.split("#", 1)[0].strip()
        if not url:
            continue
        urls.append(validate_base_url(url, f"{path}:{lineno}"))
    if not urls:
        raise UserError(f"{path} lists no endpoint URLs; write one per line, e.g. http://tgi-0:80")
    return urls


# A run that ended with samples not settled (failed, skipped by the budget):
# distinct from 0 (complete), 1 (a crash) and 2 (a user error).
EXIT_PARTIAL = 3


def main(args: argparse.Namespace) -> int:
    import gc

    import anyio

    # A run keeps many objects alive at once (a listed benchmark's samples, a window's
    # requests and answers, its keys): with the default thresholds (700, 10, 10) the
    # cyclic collector walks them again and again, ~15% of a 100k-sample run's CPU
    # (bench/raw_client_ratio.md). Almost nothing they hold is cyclic: collect less often.
    gc.set_threshold(100_000, 50, 1000)

    from ..errors import RunInterrupted
    from ..run.flow import run

    models: list[str] = args.model or []
    if not args.resume:
        from ..run.eval_set import split_benchmarks

        benchmarks = split_benchmarks(args.benchmark) if args.benchmark else []
        if args.set_file or len(models) > 1 or len(benchmarks) > 1:
            from .run_set import main_set

            return main_set(args, models, benchmarks, _fleet_urls(args.base_urls_file) if args.base_urls_file else [])
    args.model = models[0] if models else "auto"
    cfg = run_config(args)
    from ..sim.testing import sim_if

    cfg.validate()  # before the simulator starts
    try:
        with sim_if(cfg.uses_sim()) as sim_url:
            result = anyio.run(run, cfg, sim_url)
    except RunInterrupted as stop:
        print(f"asyncbench: interrupted; run {stop.summary['run_id']} booked what it did (run.json written); "
              f"{stop.summary['next_step']}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:  # before the run started (planning, generating samples) or a dry run
        import shlex

        again = shlex.join(["asyncbench", *sys.argv[1:]])
        what = "a dry run" if cfg.mode.dry_run else "the run had not started"
        print(f"asyncbench: interrupted ({what}): nothing was sent or recorded; to start again: {again}",
              file=sys.stderr)
        return 130
    return _show(result, args.json)


def run_config(args: argparse.Namespace) -> RunConfig:
    """The run the command line names (one model), or with --resume the stored run's
    settings with the options it takes from the command line (Opt.resume)."""
    from ..config import RunConfig
    from ..errors import UserError

    if args.resume:
        from ..store import Store, default_cache_path

        with Store(args.cache or default_cache_path()) as store:
            stored_json = store.runs.config_json(store.runs.find_run(args.resume))
        stored = json.loads(stored_json) if stored_json else None
        if not isinstance(stored, dict):
            raise UserError(f"run {args.resume!r} has no stored settings; run its command again instead")
        # the stored endpoint_id is the resolved identity (the --endpoint-id given, else the
        # one derived from the same URLs): kept, so the resumed run has the same id
        return RunConfig.from_stored(stored, given_options(args))
    if not args.benchmark:
        raise UserError("name a benchmark (e.g. `asyncbench run minilongbench --model sim`), or --resume RUN_ID")
    values = given_options(args)
    values["base_urls"] = [*args.base_urls, *(_fleet_urls(args.base_urls_file) if args.base_urls_file else [])]
    return RunConfig.build(args.benchmark, args.model, values, _extra(args))


def _show(result: RunSummary | DryRunSummary, as_json: bool) -> int:
    """Print the summary (or the dry run) as a table or as JSON; the exit status."""
    from ..run_summary import RunSummary

    if as_json:
        shown = {**result.to_json(), "out_dir": result.out_dir} if isinstance(result, RunSummary) else result
        json.dump(shown, sys.stdout, indent=2, ensure_ascii=False, default=str)
        print()
    elif isinstance(result, RunSummary):
        from ..report.summary import print_summary

        print_summary(result)
    else:
        from ..report.dry_run import print_dry_run

        print_dry_run(result)
    if not isinstance(result, RunSummary) or result.complete:
        return 0
    why = f"run ended partial: {result.aborted}" if result.aborted else f"run {result.run_id} ended"
    from ..ledger import KEY_HINT_START
    from ..terminal import shown as escaped

    step = "" if result.aborted and (result.next_step or "").startswith(KEY_HINT_START) else f"; {result.next_step}"
    print(escaped(f"asyncbench: {why} ({result.partial}){step}"), file=sys.stderr)
    return EXIT_PARTIAL
