"""BAMBOO (Dong et al., 2023): ten long-text datasets at two length levels, 4k and 16k.

Data is the release's layout: `<dataset>_<4k|16k>.jsonl`, `prompt.json` (one template per
dataset, treated as data), and for PrivateEval `real_all_eval_v3.jsonl.gz` (the original
problems the release executes) and `private_eval_keywords.json` (paraphrase table). We
read `<data_dir>/bamboo/` when the user names a data directory, else download the public
release (github.com/RUCAIBox/BAMBOO) once into the cache; the keyword table, which the
release keeps as Python dicts in `private_eval/execution.py`, is read from that file's
syntax tree (never executed).

Prompts are built as the release's generation script builds them (`run_for_transformers.py`):
ShowsSort paragraphs as "[i] ```text```" from 0, ReportSumSort events from 1, QA options
joined by tabs; the filled `final_answer` template is the user turn, and every dataset is
generated with the release's `max_new_tokens=32`.

The release files have defects: control characters inside strings (two paperqa_4k rows)
and unescaped quotes (paperqa_16k line 26). Rows are read with a strict parser, then a
non-strict one, then json5; what none can read is a data defect no re-run can fix: its
sample is `excluded` with its reason (file, line, parse error), listed in the summary,
run.json and `samples`, and the run can still be complete. `--strict-data` makes such a
row an error instead (exit 2, before anything is sent).
"""

from __future__ import annotations

import ast
import functools
import gzip
import hashlib
import json
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from ...errors import UserError
from ...metrics import registry as metrics
from ...types import Sample, SampleResult, SampleScore
from ..base import BadRow, Benchmark, CliOption, Loaded, LoadOptions, RunContext, notes_of
from . import metrics as M
from .sandbox import Program
from .scores import BambooScores

if TYPE_CHECKING:  # numpy stays out of `asyncbench --help`
    from ...estimators.intervals import Array, Plan, Tree
    from .sandbox import Limits, ProgramVerdict
    from .sandbox_spread import MapChunks

RELEASE_URL = "https://raw.githubusercontent.com/RUCAIBox/BAMBOO/main/"
# The files the public release has (all ten at 4k; four at 16k).
RELEASE_FILES: tuple[str, ...] = tuple(f"{d}_4k" for d in M.DATASETS) + (
    "paperqa_16k", "private_eval_16k", "showspred_16k", "showssort_16k",
)  # fmt: skip
MAX_NEW_TOKENS = 32  # run_for_transformers.py
PROBLEMS_FILE = "real_all_eval_v3.jsonl.gz"
KEYWORDS_FILE = "private_eval_keywords.json"
# Interpreter for PrivateEval programs when set (like --sandbox-python); by default the
# release-era environment of sandbox_env.py (see bench/bamboo_private_eval.md).
SANDBOX_PYTHON_ENV = "ASYNCBENCH_SANDBOX_PYTHON"


@dataclass
class PrivateEvalResources:
    """What executing PrivateEval needs: the keyword table per domain and the release's
    original problems by task id."""

    keywords: dict[str, dict[str, str]]
    problems: dict[str, dict[str, object]]

    def problem(self, task_id: str) -> dict[str, object]:
        try:
            return self.problems[task_id]
        except KeyError:
            raise UserError(f"PrivateEval task {task_id!r} is not in {PROBLEMS_FILE}; use the release's problem file") from None


# ---------------------------------------------------------------- reading files


def parse_line(text: str) -> object:
    """Strict JSON, then non-strict (raw control characters in strings), then json5."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    try:
        return json.loads(text, strict=False)
    except json.JSONDecodeError as exc:
        first_error = exc
    import json5

    try:
        return json5.loads(text)
    except ValueError:
        raise first_error from None


def read_jsonl(path: Path) -> tuple[list[tuple[int, dict[str, object]]], list[BadRow]]:
    """(line number, row) for every readable row, and the unreadable ones."""
    rows: list[tuple[int, dict[str, object]]] = []
    bad: list[BadRow] = []
    with open(path, encoding="utf-8") as fh:
        for number, text in enumerate(fh, 1):
            if not text.strip():
                continue
            try:
                row = parse_line(text)
            except ValueError as exc:
                bad.append(BadRow(path.name, number, str(exc).splitlines()[0][:200]))
                continue
            if not isinstance(row, dict):
                bad.append(BadRow(path.name, number, f"expected a JSON object, got {type(row).__name__}"))
                continue
            rows.append((number, row))
    return rows, bad


def _download(name: str, target: Path) -> None:
    import httpx

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(target.suffix + ".part")
    try:
        with httpx.stream("GET", RELEASE_URL + name, follow_redirects=True, timeout=120) as resp:
            resp.raise_for_status()
            with open(tmp, "wb") as fh:
                for chunk in resp.iter_bytes():
                    fh.write(chunk)
    except httpx.HTTPError as exc:
        raise UserError(f"cannot download BAMBOO's {name} from {RELEASE_URL} ({exc}); pass --data-dir DIR with the release's files") from None
    tmp.replace(target)


def _keywords_from_release_code(source: str) -> dict[str, dict[str, str]]:
    """The three keyword dicts assigned in the release's execution.py, read as literals."""
    found: dict[str, dict[str, str]] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name.endswith("_keywords"):
                found[name] = ast.literal_eval(node.value)
    return found


def release_dir() -> Path:
    """The public release in our cache, fetched file by file on first use."""
    from ...datadir import cache_root

    root = cache_root() / "bamboo"
    for stem in RELEASE_FILES:
        if not (root / f"{stem}.jsonl").exists():
            _download(f"datasets/{stem}.jsonl", root / f"{stem}.jsonl")
    if not (root / "prompt.json").exists():
        _download("prompt.json", root / "prompt.json")
    if not (root / PROBLEMS_FILE).exists():
        _download(f"datasets/{PROBLEMS_FILE}", root / PROBLEMS_FILE)
    if not (root / KEYWORDS_FILE).exists():
        code = root / "execution.py"
        _download("private_eval/execution.py", code)
        table = _keywords_from_release_code(code.read_text(encoding="utf-8"))
        (root / KEYWORDS_FILE).write_text(json.dumps(table, indent=1), encoding="utf-8")
    return root


def bamboo_dir(data_dir: Path | None) -> Path:
    if data_dir is None:
        return release_dir()
    path = data_dir / "bamboo"
    if not path.is_dir():
        raise UserError(f"no bamboo/ directory in {data_dir}; it should hold the release's <dataset>_<4k|16k>.jsonl and prompt.json")
    return path


def load_prompts(root: Path) -> dict[str, dict[str, str]]:
    path = root / "prompt.json"
    try:
        prompts: dict[str, dict[str, str]] = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path} is missing; copy the release's prompt.json there") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"{path} line {exc.lineno}: not valid JSON ({exc.msg}); use the release's prompt.json") from None
    missing = [d for d in M.DATASETS if "final_answer" not in prompts.get(d, {})]
    if missing:
        raise UserError(f"{path} has no final_answer template for {', '.join(missing)}; use the release's prompt.json")
    return prompts


@functools.lru_cache(maxsize=4)
def load_private_eval(root: Path) -> PrivateEvalResources:
    kw_path, problems_path = root / KEYWORDS_FILE, root / PROBLEMS_FILE
    try:
        table = json.loads(kw_path.read_text(encoding="utf-8"))
        keywords = {d: dict(table[f"{d}_keywords"]) for d in ("numpy", "pandas", "torchdata")}
    except FileNotFoundError:
        raise UserError(f"{kw_path} is missing; PrivateEval needs the keyword table (original -> paraphrased names)") from None
    except (json.JSONDecodeError, KeyError) as exc:
        raise UserError(f"{kw_path} is not a keyword table with numpy/pandas/torchdata_keywords ({exc})") from None
    try:
        with gzip.open(problems_path, "rt", encoding="utf-8") as fh:
            problems = {p["task_id"]: p for p in (json.loads(line) for line in fh if line.strip())}
    except FileNotFoundError:
        raise UserError(f"{problems_path} is missing; PrivateEval executes the release's original problems") from None
    return PrivateEvalResources(keywords, problems)


# ---------------------------------------------------------------- prompts


def fill_prompt(dataset: str, template: str, row: dict[str, Any]) -> str:
    """The user turn, built as the release's generation script builds it."""
    if dataset == "showssort":
        paragraphs = "\n".join(f"[{i}] ```{p}```" for i, p in enumerate(row["content"]))
        return template.format(content=paragraphs)
    if dataset == "reportsumsort":
        events = "\n".join(f"[{i + 1}] ```{s}```" for i, s in enumerate(row["summaries"]))
        return template.format(content=row["content"], events=events)
    if dataset in ("senhallu", "abshallu"):
        return template.format(content=row["content"], hypothesis=row["hypothesis"])
    if dataset in ("paperqa", "meetingqa"):
        return template.format(content=row["content"], question=row["question"], options="\t".join(row["options"]))
    if dataset == "private_eval":
        return template.format(content=row["prompt"])
    return template.format(content=row["content"])


def _answers(dataset: str, answer: object) -> list[str]:
    return [json.dumps(answer)] if dataset in ("showssort", "reportsumsort") else [str(answer)]


# ---------------------------------------------------------------- selection


def select(tasks: list[str] | None, length: str) -> list[tuple[str, str, bool]]:
    """(dataset, level, explicit) pairs from `paperqa@16k,altqa` and `--length`."""
    if length not in ("4k", "16k", "both"):
        raise UserError(f"--length {length!r}: use 4k, 16k or both")
    default_levels = M.LEVELS if length == "both" else (length,)
    chosen: list[tuple[str, str, bool]] = []
    for spec in tasks or list(M.DATASETS):
        name, _, level = spec.partition("@")
        if name not in M.DATASETS:
            raise UserError(f"unknown BAMBOO dataset {name!r}; choose from {', '.join(M.DATASETS)}")
        if level and level not in M.LEVELS:
            raise UserError(f"unknown length level in {spec!r}; use {name}@4k or {name}@16k")
        for lv in (level,) if level else default_levels:
            if (name, lv) not in [(n, l) for n, l, _ in chosen]:
                chosen.append((name, lv, bool(level)))
    return chosen


# ---------------------------------------------------------------- the benchmark


@dataclass
class BambooBenchmark(Benchmark):
    SCORES: ClassVar[type[BambooScores]] = BambooScores
    RESCORES: ClassVar[bool] = True  # PrivateEval runs the programs in this machine's sandbox
    OPTIONS: ClassVar[tuple[CliOption, ...]] = (
        CliOption("--length", "BAMBOO: 4k | 16k | both", choices=("4k", "16k", "both")),
        CliOption("--strict-data", "stop at an unreadable data row (default: exclude it, with its file, line and "
                  "parse error, from a run that can still be complete)", kind="flag"),
        CliOption("--allow-unsafe-sandbox", "BAMBOO private_eval: run model-written code even without bwrap or "
                  "root (unisolated)", kind="flag"),
        CliOption("--sandbox-python", "BAMBOO private_eval: the interpreter to run programs with (default: a pinned "
                  "numpy 1.23.5 / pandas 1.5.3 environment built on first use)"),
        CliOption("--sandbox-own-python", "BAMBOO private_eval: run programs with asyncbench's own interpreter and "
                  "libraries (not the problems' era; recorded in run.json)", kind="flag"),
    )

    """`bamboo[:dataset[@4k|16k],...]`; options `length` (4k | 16k | both, default both),
    `strict_data`, and for PrivateEval `sandbox_workers`, `sandbox_timeout_s`."""

    name: str = "bamboo"
    # where the release's files are (None: the public release, downloaded once); set from
    # the run's data directory. The benchmark keeps no other state between calls.
    data_dir: Path | None = None

    @classmethod
    def configured(cls, extra: Mapping[str, object], data_dir: Path | None) -> Benchmark:
        return cls(data_dir=data_dir)

    def load(self, opts: LoadOptions) -> list[Sample]:
        root = bamboo_dir(opts.data_dir)
        chosen = select(opts.tasks, str(opts.extra.get("length", "both")))
        prompts = load_prompts(root)
        samples: list[Sample] = []
        bad: list[BadRow] = []
        missing: list[str] = []
        for name, level, explicit in chosen:
            path = root / f"{name}_{level}.jsonl"
            if not path.exists():
                if explicit or f"{name}_{level}" in RELEASE_FILES:
                    raise UserError(f"{path} is missing; BAMBOO's release has {', '.join(RELEASE_FILES)}")
                missing.append(f"{name}_{level}")
                continue
            rows, unreadable = read_jsonl(path)
            bad += unreadable
            if opts.limit is not None:  # --limit: the first N samples of each task
                rows = rows[:opts.limit]
            samples += self._samples(name, level, rows, prompts[name]["final_answer"], root)
        if bad and opts.extra.get("strict_data"):
            listed = "; ".join(b.describe() for b in bad)
            raise UserError(f"unreadable BAMBOO rows (--strict-data): {listed}; fix them in the data file, or run "
                            "without --strict-data to exclude them from the run with their reason")
        if not samples:
            raise UserError(f"no BAMBOO samples selected (length {opts.extra.get('length', 'both')}); not in this data: {', '.join(missing)}")
        return Loaded(samples, {"skipped_rows": bad, "missing": missing})

    def _samples(self, name: str, level: str, rows: list[tuple[int, dict[str, Any]]], template: str,
                 root: Path) -> Iterator[Sample]:
        private = load_private_eval(root) if name == "private_eval" else None
        task = f"{name}_{level}"
        for line, row in rows:
            try:
                prompt = fill_prompt(name, template, row)
                answer = row.get("canonical_solution") if name == "private_eval" else row["answer"]
            except (KeyError, IndexError, TypeError) as exc:
                raise UserError(f"{task}.jsonl line {line}: row lacks what the {name} prompt needs ({exc!r})") from None
            meta: dict[str, object] = {"dataset": name, "length": level, "line": line}
            if "content" in row:  # questions on one paper, meeting or show share it: a bootstrap cluster
                meta["context"] = hashlib.sha1(str(row["content"]).encode("utf-8", "surrogatepass")).hexdigest()[:12]
            if name == "private_eval":
                meta["task_id"] = row["task_id"]
                meta["problem"] = private.problem(row["task_id"]) if private else {}
                answers = [str(a) for a in answer or []]
            else:
                meta["answer"] = answer
                answers = _answers(name, answer)
            yield Sample(id=f"{task}/{line}", task=task, prompt=prompt, answers=answers,
                         max_tokens=MAX_NEW_TOKENS, metric=M.METRIC[name], chat=True, meta=meta)

    async def prepare(self, samples: list[Sample], ctx: RunContext) -> tuple[list[Sample], dict[str, object]]:
        notes = notes_of(samples)
        report: dict[str, object] = {"skipped_rows": [b.__dict__ for b in notes.get("skipped_rows", [])]}
        if notes.get("missing"):
            report["not_in_data"] = list(notes["missing"])
        if ctx is not None and ctx.map_chunks is not None and any(
                s.meta.get("dataset") == "private_eval" for s in samples):
            # programs run on the cluster's nodes: each probes its own sandbox (sandbox_spread.py)
            report["sandbox"] = {"isolation": "checked on each node that runs programs (--backend ray)"}
        elif any(s.meta.get("dataset") == "private_eval" for s in samples):
            # Checked before any request is paid for: model code needs a sandbox.
            from .sandbox import require_isolation
            from .sandbox_env import PROBE_IMPORTS

            options = ctx.options if ctx is not None else {}
            python, which = sandbox_interpreter(options)
            # as the sandbox's uid, through the sandbox: an unreadable environment is one line now
            iso = require_isolation(python, bool(options.get("allow_unsafe_sandbox")), PROBE_IMPORTS)
            sandbox: dict[str, object] = {
                "isolation": iso.mode, "describe": iso.describe(), "interpreter": which,
                "cpu_s": _cpu_s(options, which), "wall_cap_s": _limits(options, which).wall_cap_s,
                "cgroup": iso.cgroups.version or None}
            report["sandbox"] = sandbox
            note = iso.limits_note()
            if note:  # a limit that does not hold for a sample as a whole: said before anything is paid for
                sandbox["limits_note"] = note
                print(f"asyncbench: {note}", file=sys.stderr, flush=True)
        return samples, report

    async def score(self, samples: list[Sample], predictions: list[str], ctx: RunContext) -> list[SampleScore]:
        """The release's metric of each dataset, with what it parsed of the answer;
        PrivateEval's programs run in the sandbox, their verdict kept with the score."""
        scores = [SampleScore(None)] * len(samples)
        programs: list[tuple[int, Program]] = []
        for i, (s, pred) in enumerate(zip(samples, predictions)):
            name = s.meta["dataset"]
            if name != "private_eval":
                judged = metrics.judge(M.metric_name(name), pred, s.meta["answer"])
                scores[i] = SampleScore(judged.score, judged.parsed)
                continue
            program = M.private_eval_program(s.meta["problem"], pred, self._keywords())
            if program is None:
                scores[i] = SampleScore(0.0)
            else:
                programs.append((i, program))
        if programs:
            outcomes = await run_programs([p for _, p in programs], ctx.options, ctx.map_chunks)
            for (i, _), outcome in zip(programs, outcomes):
                verdict = outcome.status[:300]
                if outcome.error:  # the sandbox's failure, not the program's: a failed sample, never a 0
                    scores[i] = SampleScore(None, verdict=verdict, error=f"PrivateEval sandbox: {verdict}")
                else:
                    scores[i] = SampleScore(1.0 if outcome.passed else 0.0, verdict=verdict)
        return scores

    def _keywords(self) -> dict[str, dict[str, str]]:
        """The PrivateEval paraphrase table, read (once per process) from the data."""
        return load_private_eval(bamboo_dir(self.data_dir)).keywords

    def length_bin(self, meta: Mapping[str, object]) -> str | None:
        """BAMBOO's level of the sample (its 4k or 16k file)."""
        level = meta.get("length")
        return str(level) if level else None

    def aggregate(self, results: list[SampleResult], report: dict[str, Any] | None = None) -> BambooScores:
        """Per dataset and level in percent (F1 for hallucination detection, with P/R in
        `detail`), per level, 16k - 4k, and format errors. Format errors are re-derived
        from the predictions, which is cheap and needs nothing from scoring time."""
        from ...estimators.intervals import intervals

        by_task_rows = _scored_by_task(results)
        order = {f"{d}_{lv}": i for i, (d, lv) in enumerate((d, lv) for lv in M.LEVELS for d in M.DATASETS)}
        by_task: dict[str, float] = {}
        detail: dict[str, dict[str, Any]] = {}
        for task in sorted(by_task_rows, key=lambda t: order.get(t, len(order))):
            private = load_private_eval(bamboo_dir(self.data_dir)) if task.startswith("private_eval") else None
            detail[task] = summarise_results(task, by_task_rows[task], private)
            by_task[task] = detail[task]["score"]
        levels = M.level_report(by_task)
        return self.SCORES.of({
            "overall": round(sum(by_task.values()) / len(by_task), 2) if by_task else None,
            "by_task": {t: round(v, 2) for t, v in by_task.items()},
            "by_length": levels["by_length"],
            "diff_16k_minus_4k": levels["diff_16k_minus_4k"],
            "ci95": intervals(self.resampling_plan(results)),
            "format_errors": {t: d["format_errors"] for t, d in detail.items()},
            "detail": {t: {k: (round(v, 2) if isinstance(v, float) else v) for k, v in d.items()}
                       for t, d in detail.items()},
        })

    def resampling_plan(self, results: list[SampleResult]) -> Plan:
        """The bootstrap plan of `aggregate`: each task a stratum whose samples sharing a
        context (`meta["context"]`, the hash of the text) are resampled together; F1 for
        hallucination detection, the mean score for the others. Runs stored before the
        context was recorded resample each sample alone."""
        from ...estimators.intervals import Plan, f1_stratum, mean_stratum

        strata = {}
        for task, rows in _scored_by_task(results).items():
            name, _ = M.split_task(task)
            clusters = [r.meta.get("context") or r.sample_id for r in rows]
            if name in ("senhallu", "abshallu"):
                judged = [M.judge(name, r.prediction or "", r.meta["answer"]) for r in rows]
                strata[task] = f1_stratum([bool(j.parsed) for j in judged],
                                          [M.coerce_bool(r.meta["answer"]) for r in rows], clusters)
            elif name == "private_eval":
                strata[task] = mean_stratum([float(r.score or 0.0) for r in rows], clusters)
            else:
                strata[task] = mean_stratum([M.judge(name, r.prediction or "", r.meta["answer"]).score for r in rows],
                                            clusters)
        return Plan(strata, _scores_tree)


def _scored_by_task(results: list[SampleResult]) -> dict[str, list[SampleResult]]:
    """The answered samples of each task: what `aggregate` scores."""
    by_task: dict[str, list[SampleResult]] = {}
    for r in results:
        if r.status.has_answer and r.prediction is not None:
            by_task.setdefault(r.task, []).append(r)
    return by_task


def _scores_tree(by_task: Mapping[str, Array]) -> Tree:
    """overall (mean over tasks) and by_length (mean over each level's tasks), as `aggregate`."""
    levels: dict[str, list[Array]] = {}
    for task, value in by_task.items():
        levels.setdefault(M.split_task(task)[1], []).append(value)
    return {"overall": sum(by_task.values()) / len(by_task), "by_task": dict(by_task),
            "by_length": {lv: sum(v) / len(v) for lv, v in levels.items()}}


def summarise_results(task: str, rows: list[SampleResult], private: PrivateEvalResources | None) -> dict[str, Any]:
    name, _ = M.split_task(task)
    if name == "private_eval":
        keywords = private.keywords if private else None
        judgements = []
        for r in rows:
            problem = r.meta.get("problem") or {}
            malformed = keywords is not None and M.private_eval_program(problem, r.prediction or "", keywords) is None
            judgements.append(M.Judgement(float(r.score or 0.0), malformed, None))
        return M.summarise(name, judgements)
    answers = [r.meta["answer"] for r in rows]
    judgements = [M.judge(name, r.prediction or "", a) for r, a in zip(rows, answers)]
    return M.summarise(name, judgements, answers)


def sandbox_interpreter(options: dict[str, object]) -> tuple[str, str]:
    """(python, what it is): --sandbox-python, else ASYNCBENCH_SANDBOX_PYTHON, else with
    --sandbox-own-python asyncbench's own, else the release-era environment (built on
    first use, sandbox_env.py)."""
    from .sandbox_env import PACKAGES, release_python

    if options.get("sandbox_python"):
        return str(options["sandbox_python"]), f"--sandbox-python {options['sandbox_python']}"
    if os.environ.get(SANDBOX_PYTHON_ENV):
        return os.environ[SANDBOX_PYTHON_ENV], f"{SANDBOX_PYTHON_ENV}={os.environ[SANDBOX_PYTHON_ENV]}"
    if options.get("sandbox_own_python"):
        return sys.executable, "asyncbench's own interpreter (--sandbox-own-python)"
    return release_python(), f"release environment ({', '.join(PACKAGES)})"


_N = TypeVar("_N", int, float)


def _number(value: object, kind: type[_N]) -> _N:
    """An option's number (`kind(value)`, as the CLI and the API give it); anything else is a TypeError."""
    if not isinstance(value, (int, float, str)):
        raise TypeError(f"expected a number, not {value!r}")
    return kind(value)


def _cpu_s(options: dict[str, object], which: str) -> float:
    """--timeout (CPU seconds of a program after its imports), else the release's 3 s in
    its environment, else our 10 s (today's libraries are slower)."""
    from .sandbox import Limits
    from .sandbox_env import RELEASE_TIMEOUT_S

    if options.get("sandbox_timeout_s"):
        return _number(options["sandbox_timeout_s"], float)
    return RELEASE_TIMEOUT_S if which.startswith("release") else Limits.cpu_s


def _limits(options: dict[str, object], which: str) -> Limits:
    from .sandbox import Limits

    return Limits(cpu_s=_cpu_s(options, which))


def sandbox_setup(options: dict[str, object]) -> tuple[str, Limits]:
    """(interpreter, Limits) for PrivateEval programs, on the machine that runs them."""
    python, which = sandbox_interpreter(options)
    return python, _limits(options, which)


async def run_programs(programs: list[Program], options: dict[str, object],
                       map_chunks: MapChunks | None = None) -> list[ProgramVerdict]:
    """Check PrivateEval completions (program and checker, both sandboxed) with bounded workers, or
    in chunks on other machines through `map_chunks` (the Ray backend; sandbox_spread.py)."""
    from .sandbox import check_many

    if map_chunks is not None:
        import anyio

        from .sandbox_spread import check_spread

        return await anyio.to_thread.run_sync(check_spread, programs, options, map_chunks, sandbox_setup)
    from .sandbox_env import PROBE_IMPORTS

    workers = _number(options.get("sandbox_workers") or os.cpu_count() or 2, int)
    python, which = sandbox_interpreter(options)
    return await check_many(programs, _limits(options, which), workers=workers, python=python,
                            allow_unsafe=bool(options.get("allow_unsafe_sandbox")), imports=PROBE_IMPORTS)
