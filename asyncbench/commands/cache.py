"""Inspect, export, clear or recover the response cache:
`asyncbench cache stats|runs|clear|export|recover`."""

from __future__ import annotations

import argparse
import json
from typing import Any


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("stats", "clear", "export", "runs", "recover"))
    p.add_argument("--cache", help="DuckDB cache file (default: ~/.cache/asyncbench/cache.duckdb)")
    p.add_argument("--model", help="clear: only this provider:model")
    p.add_argument("--out", help="export: output file (.parquet or .jsonl); recover: the new cache file")
    p.add_argument("--yes", action="store_true", help="clear: do not ask")
    p.add_argument("--runs", action="store_true", help="clear: also delete the run history (runs, samples, ledger)")


def main(args: argparse.Namespace) -> int:
    from ..errors import UserError
    from ..store import Store, default_cache_path

    path = args.cache or default_cache_path()
    if args.action == "recover":
        from pathlib import Path

        from ..store.duckdb_store import recover

        if not args.out:
            raise UserError("cache recover needs --out NEW.duckdb (the file to copy what is readable into)")
        copied = recover(Path(path).expanduser(), Path(args.out).expanduser())
        print(f"recovered into {args.out}: " + ", ".join(f"{n} {table}" for table, n in copied.items()))
        return 0
    with Store(path).session() as store:
        if args.action == "stats":
            print(json.dumps(_rounded(store.stats()), indent=2))
        elif args.action == "runs":
            from ..ledger import account, interrupted, partial_label

            for r in store.runs():  # figures from the run's ledger, as run.json and report
                summary = json.loads(r["summary_json"] or "{}")
                rows = store.ledger(r["run_id"])
                led = account(rows)
                partial = partial_label(led["samples"])
                last = rows.invocations[-1] if rows.invocations else None
                samples = str(led["samples"]["total"])
                if last is not None and not last.finished:
                    state = "interrupted" if interrupted(last) else "running"
                    samples = f"{store.samples_seen(r['run_id'])} so far"  # rows are recorded at the end
                else:
                    state = partial or "complete"
                overall = (summary.get("scores") or {}).get("overall")
                value = f"{overall:.2f}" if isinstance(overall, (int, float)) else "-" if overall is None else str(overall)
                shown = f"({value}) {partial}" if partial and overall is not None else value
                print(f"{r['run_id']}  {state:<18} {r['benchmark']:<16} {r['model']:<28} "
                      f"samples={samples} invocations={len(led['invocations'])} "
                      f"cost=${led['cost_usd']['total']:.4f} overall={shown}")
        elif args.action == "clear":
            what = "stored responses and the run history" if args.runs else "stored responses (run history is kept)"
            if not args.yes:
                raise UserError(f"cache clear deletes {what}; add --yes to confirm"
                                + ("" if args.runs else ", and --runs to delete the run history too"))
            n = store.clear(args.model, runs=args.runs)
            print(f"deleted {n} cached responses from {path}"
                  + ("; run history deleted too" if args.runs else "; run history kept (--runs deletes it)"))
        else:
            if not args.out:
                raise UserError("cache export needs --out FILE (.parquet or .jsonl)")
            fmt = "parquet" if args.out.endswith(".parquet") else "json"
            n = store.export(args.out, fmt)
            print(f"exported {n} responses to {args.out}")
    return 0


def _rounded(value: Any) -> Any:
    """Sums of float dollars (0.3789462000000005) to 6 decimals, as run.json rounds them."""
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return value
