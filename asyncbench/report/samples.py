"""Every sample of a stored run, as typed records: what was asked (the prompt as sent,
after truncation), what was expected, what came back, how it was read and scored, and
what it took (tokens, USD, latency, attempts).

One query of the run record (`store.runs.samples`) joins the sample ledger, the prompts
(stored once per request key) and the run's request rows. `usd` and the token columns are what this run paid for the
sample's eval request (its ledger rows), so each column adds up to the run's eval figure;
an answer served from the cache shows 0 here and its original price in `cached_usd`, and
a sample that asked the same request as another (`shared`) shows 0 and names that
sample in `shared_with`.
"""

from __future__ import annotations

import contextlib
import csv
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from ..atomic import open_replacing, replacing
from ..errors import UserError
from ..ledger import SETTLED, stored_status
from ..serving import tpot
from ..store import Store
from ..store.parquet import write_parquet
from ..store.rows import SampleRow
from ..store.runs import SamplePage
from ..terminal import shown
from ..types import SampleStatus

FORMATS = ("table", "jsonl", "csv", "parquet")


@dataclass
class SampleRecord:
    """One sample of one run. `prompt` is None when the answer came from a cache written
    before prompts were kept, or the sample was never sent; `parsed` and `judge` are None
    where the benchmark does not parse or judge."""

    run_id: str
    sample_id: str
    task: str
    status: SampleStatus
    score: float | None
    prediction: str | None
    parsed: object
    references: list[str]
    prompt: str | None
    judge: list[dict[str, object]] | None
    prompt_tokens: int
    completion_tokens: int
    usd: float
    cached_usd: float
    latency_ms: float | None
    attempts: int
    truncated_tokens: int
    error: str | None
    key: str | None
    shared_with: str | None = None  # a shared sample: the sample whose answer it shares
    # the server's usage out of bounds: the tokens and USD above are booked at our bound (claims.py)
    usage_flag: str | None = None
    # the answer's timing as this run measured it when it sent it (types.Timing; AIPerf's
    # definitions): time to first token, end to end, time per output token after the
    # first (TPOT = (e2e - TTFT) / (output tokens - 1)), the inter-token gaps; None where
    # nothing was measured, and `timing` says why: "streamed", "unstreamed" (no TTFT),
    # "batch" and "cache hit" (none), "not measured" (stored before timings were kept)
    cached_prompt_tokens: int = 0
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None
    itl_ms: list[float] | None = None
    timing: str | None = None

    @property
    def settled(self) -> bool:
        return self.status in SETTLED


COLUMNS = tuple(f.name for f in fields(SampleRecord))


def load_samples(store: Store, run_id: str, task: str | None = None, failed: bool = False,
                 prompts: bool = True) -> list[SampleRecord]:
    """The run's samples (a unique prefix of its id works), by task then id (numbers as
    numbers: `natural_key`); `task`: only that task; `failed`: only those that did not
    settle (failed, skipped); `prompts=False` leaves the prompts out (None), for a view that
    does not show them."""
    with store.session():
        run = store.runs.find_run(run_id)
        rows = store.runs.samples(run, task=task, failed=failed, prompts=prompts)
        if task is not None and not rows:
            known = store.runs.tasks(run)
            if task not in known:
                raise UserError(f"run {run} has no task {task!r}; its tasks: {', '.join(known)}")
    return sorted((_record(row) for row in rows), key=lambda r: (r.task, natural_key(r.sample_id)))


def load_page(store: Store, run_id: str, task: str | None, page: SamplePage) -> tuple[list[SampleRecord], int]:
    """One page of the run's samples (by task and id as text: the store pages them, so a
    run of 100k samples is never read whole), and how many the page's filters select."""
    with store.session():
        rows = store.runs.samples(run_id, task=task, page=page)
        total = store.runs.count_samples(run_id, task=task, page=page)
    return [_record(row) for row in rows], total


def natural_key(sample_id: str) -> tuple[object, ...]:
    """Ids compared with their numbers as numbers: "2wikimqa/2" before "2wikimqa/10"
    (the database orders them as text)."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part)
                 for part in re.split(r"(\d+)", sample_id) if part)


def _record(row: SampleRow) -> SampleRecord:
    (run_id, sample_id, task, status, score, prediction, meta_json, refs_json, prompt, p_tok, c_tok, usd, saved,
     latency, attempts, truncated, error, key, twin, flag, cached, ttft, e2e, itl, timing) = row
    meta = json.loads(meta_json) if meta_json else {}
    return SampleRecord(run_id, sample_id, task, stored_status(status), score, prediction, meta.get("parsed"),
                        json.loads(refs_json) if refs_json else [], prompt, meta.get("judge"), int(p_tok),
                        int(c_tok), float(usd), float(saved), latency, int(attempts), int(truncated), error, key, twin,
                        flag, int(cached), ttft, tpot(e2e, ttft, int(c_tok)), e2e,
                        None if itl is None else [float(x) for x in itl], timing)


def _flat(record: SampleRecord) -> dict[str, object]:
    """A record with its lists and objects as JSON text: one cell each in CSV and parquet."""
    out = asdict(record)
    for name in ("parsed", "references", "judge", "itl_ms"):
        if out[name] is not None:
            out[name] = json.dumps(out[name], ensure_ascii=False)
    return out


def write_samples(records: Sequence[SampleRecord], fmt: str, out: Path | None) -> None:
    """Write records as JSON lines, CSV or parquet to `out` (None: stdout; not parquet)."""
    if fmt not in FORMATS[1:]:
        raise UserError(f"unknown samples format {fmt!r}; use one of {', '.join(FORMATS[1:])}")
    if out is not None and not out.parent.is_dir():
        raise UserError(f"cannot write {out}: folder {out.parent} does not exist")
    if fmt == "parquet":
        if out is None:
            raise UserError("parquet needs --out FILE.parquet")
        with replacing(out) as tmp:
            write_parquet([_flat(r) for r in records], [(c, _TYPES.get(c, "VARCHAR")) for c in COLUMNS], tmp)
        return
    with (open_replacing(out, newline="") if out is not None else contextlib.nullcontext(sys.stdout)) as fh:
        if fmt == "jsonl":
            fh.writelines(json.dumps(asdict(r), ensure_ascii=False) + "\n" for r in records)
        else:
            writer = csv.DictWriter(fh, fieldnames=COLUMNS)
            writer.writeheader()
            # a file keeps the exact text; a terminal gets server and model text escaped (terminal.py)
            raw = out is not None or not sys.stdout.isatty()
            writer.writerows(_flat(r) if raw else {k: shown(v, newlines=True) if isinstance(v, str) else v
                                                   for k, v in _flat(r).items()} for r in records)


_TYPES = {"score": "DOUBLE", "usd": "DOUBLE", "cached_usd": "DOUBLE", "latency_ms": "DOUBLE", "prompt_tokens": "BIGINT",
          "completion_tokens": "BIGINT", "attempts": "BIGINT", "truncated_tokens": "BIGINT",
          "cached_prompt_tokens": "BIGINT", "ttft_ms": "DOUBLE", "tpot_ms": "DOUBLE", "e2e_ms": "DOUBLE"}
