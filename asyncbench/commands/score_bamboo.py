"""Score BAMBOO predictions made elsewhere with the release's metrics and answer parsing.

Input: JSON lines `{"dataset": "<name>_<4k|16k>", "pred", "answer"}`; for the sorting
datasets `pred` may be the model's text or an already parsed list of indices; private_eval
lines carry the row instead of an answer (at least its `task_id`), and their completions
run in the sandbox against the release's problems (from --data-dir, else the public
release). Prints the metric(s) per dataset and level, the average per level and 16k - 4k.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import NoReturn

from ..errors import UserError
from ..json_values import as_object
from ..jsonl_io import iter_json_objects


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--predictions", required=True, type=Path, metavar="FILE.jsonl",
                        help="one JSON object per line: dataset, pred, answer (private_eval: the row)")
    parser.add_argument("--data-dir", help="data directory with bamboo/ (PrivateEval problems and keywords); "
                        "default $ASYNCBENCH_DATA_DIR, else the public release")
    parser.add_argument("--workers", type=int, default=None, help="parallel PrivateEval programs (default: all cores)")
    parser.add_argument("--timeout", type=float, default=None, dest="timeout_s",
                        help="CPU seconds per PrivateEval program after its imports, under a wall-clock cap of "
                             "max(30, 10x) (default: the release's 3 in its environment, else 10)")
    parser.add_argument("--sandbox-python", help="interpreter for PrivateEval programs (default: a pinned "
                        "numpy 1.23.5 / pandas 1.5.3 environment built on first use)")
    parser.add_argument("--sandbox-own-python", action="store_true",
                        help="run PrivateEval programs with asyncbench's own interpreter and libraries")
    parser.add_argument("--allow-unsafe-sandbox", action="store_true",
                        help="run PrivateEval completions even without bwrap or root (unisolated)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")


_SORTING = ("showssort", "reportsumsort")


def _check_pred(record: dict[str, object], name: str, where: str) -> None:
    """'pred' is a string; a sorting dataset's may be the parsed list of integers."""
    pred = record["pred"]
    sorting = name in _SORTING
    if sorting and isinstance(pred, list):
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in pred):
            raise UserError(f"{where}: a parsed 'pred' must be a list of integers")
        record["pred"] = json.dumps(pred)
    elif not isinstance(pred, str):
        raise UserError(f"{where}: 'pred' must be a string" + (" or a list of integers" if sorting else ""))


def _order(answer: object, name: str, where: str) -> list[int]:
    """A sorting dataset's answer: the list of indices in the original order (or its JSON)."""
    if isinstance(answer, str):
        try:
            answer = json.loads(answer)
        except json.JSONDecodeError:
            answer = None
    if not isinstance(answer, list) or len(answer) < 2 or not all(isinstance(x, int) for x in answer):
        raise UserError(f"{where}: 'answer' of {name} must be the list of indices in the original order")
    return answer


def _check_answer(record: dict[str, object], name: str, where: str) -> None:
    from ..benchmarks.bamboo import metrics as M

    if "answer" not in record:
        raise UserError(f"{where}: missing field 'answer'")
    answer = record["answer"]
    if name in _SORTING:
        record["answer"] = _order(answer, name, where)
    elif name in ("senhallu", "abshallu"):
        try:
            record["answer"] = M.coerce_bool(answer)
        except ValueError:
            raise UserError(f"{where}: 'answer' of {name} must be true/false") from None
    elif not isinstance(answer, (str, int, float)) or isinstance(answer, bool):
        raise UserError(f"{where}: 'answer' must be a string")


def _check(record: dict[str, object], where: str) -> dict[str, object]:
    from ..benchmarks.bamboo import metrics as M

    missing = [k for k in ("dataset", "pred") if k not in record]
    if missing:
        raise UserError(f"{where}: missing field(s) {', '.join(missing)}; each line needs dataset, pred and answer")
    try:
        name, _ = M.split_task(str(record["dataset"]))
    except ValueError:
        raise UserError(f"{where}: unknown dataset {record['dataset']!r}; use <name>_<4k|16k> with name one of {', '.join(M.DATASETS)}") from None
    _check_pred(record, name, where)
    if name == "private_eval":
        if not isinstance(record.get("task_id"), str):
            raise UserError(f"{where}: private_eval lines carry the row; its 'task_id' (e.g. \"PandasEval/3\") is missing")
        return record
    _check_answer(record, name, where)
    return record


def read_predictions(path: Path) -> list[dict[str, object]]:
    """Parse and validate the predictions file; UserError names the file and line."""
    records = [_check(record, f"{path}:{lineno}") for lineno, record in
               iter_json_objects(path, hint="write one JSON object with dataset, pred, answer per line",
                                                 what="predictions file")]
    if not records:
        raise UserError(f"{path} has no predictions")
    return records


async def score_records(records: list[dict[str, object]], data_dir: Path | None, options: dict[str, object]) -> dict[str, object]:
    """Score validated records through the benchmark's own score/aggregate."""
    from ..benchmarks.bamboo.benchmark import BambooBenchmark, bamboo_dir, load_private_eval
    from ..benchmarks.base import RunContext
    from ..types import Sample, SampleResult, SampleStatus

    bench = BambooBenchmark(data_dir=data_dir)
    private = load_private_eval(bamboo_dir(data_dir)) \
        if any(str(r["dataset"]).startswith("private_eval_") for r in records) else None
    samples = []
    for i, r in enumerate(records):
        name, level = str(r["dataset"]).rsplit("_", 1)  # validated: read_predictions
        meta: dict[str, object] = {"dataset": name, "length": level}
        if name == "private_eval":
            meta["task_id"] = r["task_id"]
            meta["problem"] = private.problem(str(r["task_id"])) if private else {}
        else:
            meta["answer"] = r["answer"]
        samples.append(Sample(id=str(i), task=str(r["dataset"]), meta=meta))
    preds = [str(r["pred"]) for r in records]  # a string once validated (a parsed list is dumped back)

    async def no_model(*_: object) -> NoReturn:
        raise UserError("scoring BAMBOO predictions needs no model calls")

    def no_request(*_: object, **__: object) -> NoReturn:
        raise UserError("scoring BAMBOO predictions needs no model calls")

    ctx = RunContext(model_spec="predictions", generate=no_model, make_request=no_request, options=options)
    scores = await bench.score(samples, preds, ctx)
    # a sample the sandbox could not judge (its score's error) is failed, not scored
    results = [SampleResult(sample_id=s.id, task=s.task,
                            status=SampleStatus.FAILED if sc.error else SampleStatus.ANSWERED,
                            prediction=p, score=sc.value, meta=s.meta, error=sc.error, scored=sc)
               for s, p, sc in zip(samples, preds, scores)]
    return bench.aggregate(results).to_json()


def _table(report: dict[str, object]) -> str:
    from ..benchmarks.bamboo import metrics as M

    detail = as_object(report["detail"])
    lines = [f"{'dataset':<15}{'metric':<19}{'4k':>16}{'16k':>16}   format errors (4k/16k)"]
    for name in M.DATASETS:
        cells, errors = [], []
        for level in M.LEVELS:
            found = detail.get(f"{name}_{level}")
            d = as_object(found)
            if found is None:
                cells.append("-")
                errors.append("-")
            elif "f1" in d:
                cells.append(f"{d['precision']:.1f}/{d['recall']:.1f}/{d['f1']:.1f}")
                errors.append(str(d["format_errors"]))
            else:
                cells.append(f"{d['score']:.1f}")
                errors.append(str(d["format_errors"]))
        if cells != ["-", "-"]:
            metric = "P/R/F1" if M.METRIC[name] == "f1" else M.METRIC[name]
            lines.append(f"{name:<15}{metric:<19}{cells[0]:>16}{cells[1]:>16}   {'/'.join(errors)}")
    by_length = as_object(report["by_length"])
    lines.append(f"{'average':<15}{'':<19}{by_length.get('4k', '-'):>16}{by_length.get('16k', '-'):>16}")
    diff = as_object(report["diff_16k_minus_4k"])
    if diff["average"] is not None:
        per = ", ".join(f"{n} {v:+.1f}" for n, v in as_object(diff["datasets"]).items())
        lines.append(f"16k - 4k: {diff['average']:+.2f} on average over datasets at both levels ({per})")
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    import anyio

    from ..datadir import resolve_data_dir

    records = read_predictions(args.predictions)
    options: dict[str, object] = {}
    if args.workers is not None:
        if args.workers < 1:
            raise UserError("--workers must be at least 1")
        options["sandbox_workers"] = args.workers
    if args.timeout_s is not None:
        if args.timeout_s <= 0:
            raise UserError("--timeout must be positive")
        options["sandbox_timeout_s"] = args.timeout_s
    if args.allow_unsafe_sandbox:
        options["allow_unsafe_sandbox"] = True
    if args.sandbox_python:
        options["sandbox_python"] = args.sandbox_python
    if args.sandbox_own_python:
        options["sandbox_own_python"] = True
    needs_data = any(str(r["dataset"]).startswith("private_eval_") for r in records)
    data_dir = resolve_data_dir(args.data_dir) if needs_data else None
    report = anyio.run(score_records, records, data_dir, options)
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        print(_table(report))
    return 0
