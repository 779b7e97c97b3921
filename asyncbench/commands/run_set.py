"""`asyncbench run` for an eval set: several models (`--model A --model B`), several
benchmarks (`BENCH1,BENCH2`) or a set file (`--set FILE.toml`). Plans every run first
(eval_set.plan_set), runs them together, then prints the leaderboard (report/leaderboard.py,
when installed) or each run's line and the set's totals."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config import RunConfig
    from ..run.eval_set import SetDryRun, SetSummary

EXIT_PARTIAL = 3  # as a single run's (commands/run.py)


def _flag_options(args: argparse.Namespace) -> dict[str, object]:
    """The run flags the user gave (those different from their defaults, so a set file's
    [options] are not overridden by defaults), and the benchmark options given."""
    from ..benchmarks import option_keys
    from ..config import run_options

    out: dict[str, object] = {}
    for name, opt in run_options().items():
        value = getattr(args, name)
        if opt.coerce(value) != opt.default:
            out[name] = value
    for key in option_keys():
        value = getattr(args, key, None)
        if value not in (None, False):
            out[key] = value
    return out


def set_configs(args: argparse.Namespace, models: list[str], benchmarks: list[str],
                fleet: list[str]) -> list[RunConfig]:
    """The set's RunConfigs from a set file (flags given override its [options]) or from
    the command line's models x benchmarks; `fleet`: --base-urls-file's URLs."""
    from ..errors import UserError
    from ..run.eval_set import load_set_file, run_configs

    options = _flag_options(args)
    if fleet:
        given = options.get("base_urls")
        options["base_urls"] = [*(given if isinstance(given, list) else []), *fleet]
    if args.set_file:
        if benchmarks or args.model:
            raise UserError("--set FILE lists the models and benchmarks; drop BENCHMARK and --model")
        return load_set_file(args.set_file, options)
    return run_configs(benchmarks, [{"model": m} for m in models], options)


def main_set(args: argparse.Namespace, models: list[str], benchmarks: list[str], fleet: list[str]) -> int:
    import anyio

    from ..errors import RunInterrupted
    from ..progress import one_display
    from ..sim.testing import sim_if

    cfgs = set_configs(args, models, benchmarks, fleet)
    # on a terminal (or with --progress) one live display, a row per run
    shared = not cfgs[0].mode.dry_run and args.progress is not False and (args.progress or sys.stderr.isatty())
    try:
        with sim_if(any(c.uses_sim() for c in cfgs)) as sim_url, one_display(bool(shared)):
            result = anyio.run(_go, cfgs, sim_url)
    except BaseException as exc:
        if not _interrupted(exc, RunInterrupted):
            raise
        print("asyncbench: interrupted; each run booked what it did (set.json written); run the same command "
              "again to finish the set", file=sys.stderr)
        return 130
    if isinstance(result, dict):
        _show_dry_run(result, args.json)
        return 0
    return _show(result, args.json, Path(cfgs[0].storage.cache).expanduser() if cfgs[0].storage.cache else None)


def _interrupted(exc: BaseException, kind: type[BaseException]) -> bool:
    """Ctrl-C, or the runs' RunInterrupted (several runs: an exception group of them)."""
    if isinstance(exc, (kind, KeyboardInterrupt)):
        return True
    inner: list[BaseException] = list(getattr(exc, "exceptions", None) or [])
    return bool(inner) and all(_interrupted(e, kind) for e in inner)


async def _go(cfgs: list[RunConfig], sim_url: str | None) -> SetSummary | SetDryRun:
    from ..run.eval_set import dry_run_set, execute_set, plan_set

    sp = await plan_set(cfgs, sim_url)
    try:
        return await dry_run_set(sp) if cfgs[0].mode.dry_run else await execute_set(sp)
    finally:
        await sp.aclose()


def _usd(v: object) -> str:
    return f"${v:,.4f}" if isinstance(v, (int, float)) else str(v)


def _show_dry_run(priced: SetDryRun, as_json: bool) -> None:
    """Each (model, benchmark) priced in each mode, then the set's total."""
    if as_json:
        json.dump(priced, sys.stdout, indent=2, default=str)
        print()
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="dry run of the set (nothing sent); ≤: an upper bound")
    for name in ("model", "benchmark", "to send", "cached", "USD", "batch", "prompt cache"):
        left = name in ("model", "benchmark")
        table.add_column(name, justify="left" if left else "right", overflow="fold", no_wrap=not left)
    for r in priced["runs"]:
        modes = r["by_purpose"]["eval"].get("cost_usd_by_mode", {})
        bound = "≤" if r["estimate"] != "exact" else ""
        table.add_row(r["model"], r["benchmark"], f"{r['estimated_requests']:,}", f"{r['cached']:,}",
                      bound + _usd(r["estimated_cost_usd"]), _usd(modes.get("batch")), _usd(modes.get("prompt_cache")))
    t = priced["totals"]
    table.add_row("[bold]set total[/]", "", f"{t['requests']:,}", "", _usd(t["estimated_cost_usd"]),
                  _usd(t["eval_batch_usd"]), _usd(t["eval_prompt_cache_usd"]))
    Console(emoji=False).print(table)
    print("batch and prompt cache: the eval requests through --batch, and with --prompt-cache auto's expected reads")


def _show(result: SetSummary, as_json: bool, cache: Path | None) -> int:
    """The leaderboard (or each run's line) and the set's totals; the exit status."""
    if as_json:
        runs = [{**r.summary.to_json(), "out_dir": r.summary.out_dir} if r.summary else r.to_json()
                for r in result.runs]
        json.dump({**result.to_json(), "out_dir": str(result.out), "run_summaries": runs}, sys.stdout, indent=2,
                  ensure_ascii=False, default=str)
        print()
    else:
        print(_leaderboard(result, cache) or _run_lines(result))
        t = result.totals
        print(f"set: {len(result.runs)} runs; in all (every invocation) ${t['cost_usd']:,.4f}, {t['tokens']:,} tokens, "
              f"{t['requests']:,} requests sent; this time {t['requests_now']:,} sent, ${t['cost_usd_now']:,.4f}, "
              f"{result.wall_s:.1f} s; {result.out / 'set.json'}")
    if result.complete:
        return 0
    unsettled = [f"{r.model} on {r.benchmark}: {r.status}" + (f" ({r.error})" if r.error else "")
                 for r in result.runs if r.status != "complete"]
    print("asyncbench: set ended partial: " + "; ".join(unsettled) + "; run the same command again to finish it",
          file=sys.stderr)
    return EXIT_PARTIAL


def _leaderboard(result: SetSummary, cache: Path | None) -> str | None:
    """The leaderboard of the set's runs, when report/leaderboard.py is installed."""
    try:
        board = importlib.import_module("asyncbench.report.leaderboard")
    except ImportError:
        return None
    from ..store import default_cache_path

    ids = [r.run_id for r in result.runs if r.summary is not None]
    if not ids:
        return None
    rendered: str = board.render_leaderboard(board.build_leaderboard(ids, cache or default_cache_path()), "table")
    return rendered


def _run_lines(result: SetSummary) -> str:
    """One line per (model, benchmark): status, overall score, samples, cost, requests."""
    from rich.text import Text

    from ..report.score_lines import score_rows

    lines = []
    for r in result.runs:
        s = r.summary
        if s is None:
            lines.append(f"{r.model} on {r.benchmark}: {r.status} {r.error or ''}")
            continue
        rows = [(Text.from_markup(k).plain, Text.from_markup(v).plain) for k, v in score_rows(s)]
        score = next((f"{k} {v}" for k, v in rows if k.startswith(("overall", "anchor"))), "no overall score")
        ok, total = s.samples.get("settled", 0), s.samples.get("total", 0)
        sent = sum(inv["requests"] for inv in s.invocations)  # HTTP calls, retries included
        lines.append(f"{r.model} on {r.benchmark}: {r.status}, {score}, samples {ok}/{total}, "
                     f"${float(s.cost_usd.get('total', 0.0)):,.4f}, requests {sent}, run {r.run_id}")
    return "\n".join(lines)
