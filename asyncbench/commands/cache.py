"""Inspect, export, clear or recover the response cache:
`asyncbench cache stats|runs|clear|export|recover`."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..store import Store
    from ..store.rows import RunRow


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("stats", "clear", "export", "runs", "recover"))
    p.add_argument("--cache", help="DuckDB cache file (default: ~/.cache/asyncbench/cache.duckdb)")
    p.add_argument("--model", help="clear: only this provider:model")
    p.add_argument("--out", help="export: output file (.parquet or .jsonl); recover: the new cache file")
    p.add_argument("--yes", action="store_true", help="clear: do not ask")
    p.add_argument("--runs", action="store_true", help="clear: also delete the run history (runs, samples, ledger)")


def main(args: argparse.Namespace) -> int:
    from ..store import Store, default_cache_path

    path = args.cache or default_cache_path()
    if args.action == "recover":
        return _recover(path, args.out)
    store = Store(path)
    with store.session():
        _ACTIONS[args.action](store, args)
    return 0


def _recover(path: str | Path, out: str | None) -> int:
    from ..errors import UserError
    from ..store.recover import recover

    if not out:
        raise UserError("cache recover needs --out NEW.duckdb (the file to copy what is readable into)")
    copied = recover(Path(path).expanduser(), Path(out).expanduser())
    print(f"recovered into {out}: " + ", ".join(f"{n} {table}" for table, n in copied.items()))
    return 0


def _stats(store: Store, args: argparse.Namespace) -> None:
    print(json.dumps(_rounded(store.cache.stats()), indent=2))


def _runs(store: Store, args: argparse.Namespace) -> None:
    """One line per run, its figures from the run's ledger, as run.json and report."""
    for run in store.runs.runs():
        print(_run_line(store, run))


def _run_line(store: Store, run: RunRow) -> str:
    from ..ledger import account, interrupted, partial_label

    summary = json.loads(run.summary_json or "{}")
    rows = store.runs.ledger(run.run_id)
    led = account(rows)
    partial = partial_label(led["samples"])
    last = rows.invocations[-1] if rows.invocations else None
    samples = str(led["samples"]["total"])
    if last is not None and not last.finished:
        state = "interrupted" if interrupted(last) else "running"
        samples = f"{store.runs.samples_seen(run.run_id)} so far"  # rows are recorded at the end
    else:
        state = partial or "complete"
    overall = (summary.get("scores") or {}).get("overall")
    value = f"{overall:.2f}" if isinstance(overall, (int, float)) else "-" if overall is None else str(overall)
    shown = f"({value}) {partial}" if partial and overall is not None else value
    return (f"{run.run_id}  {state:<18} {run.benchmark:<16} {run.model:<28} "
            f"samples={samples} invocations={len(led['invocations'])} "
            f"cost=${led['cost_usd']['total']:.4f} overall={shown}")


def _clear(store: Store, args: argparse.Namespace) -> None:
    from ..errors import UserError

    what = "stored responses and the run history" if args.runs else "stored responses (run history is kept)"
    if not args.yes:
        raise UserError(f"cache clear deletes {what}; add --yes to confirm"
                        + ("" if args.runs else ", and --runs to delete the run history too"))
    n = store.cache.clear(args.model)
    if args.runs:
        store.runs.clear()
    print(f"deleted {n} cached responses from {args.cache or store.path}"
          + ("; run history deleted too" if args.runs else "; run history kept (--runs deletes it)"))


def _export(store: Store, args: argparse.Namespace) -> None:
    from ..errors import UserError

    if not args.out:
        raise UserError("cache export needs --out FILE (.parquet or .jsonl)")
    fmt = "parquet" if args.out.endswith(".parquet") else "json"
    n = store.cache.export(args.out, fmt)
    print(f"exported {n} responses to {args.out}")


_ACTIONS: dict[str, Callable[[Store, argparse.Namespace], None]] = {
    "stats": _stats, "runs": _runs, "clear": _clear, "export": _export}


def _rounded(value: object) -> object:
    """Sums of float dollars (0.3789462000000005) to 6 decimals, as run.json rounds them."""
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return value
