"""LongBench (21 datasets), LongBench-E (13, length-balanced) and MiniLongBench (237 samples).

Data comes in the Hugging Face hub format of `THUDM/LongBench`: one jsonl per dataset
(`<dataset>.jsonl`, `<dataset>_e.jsonl`) with input, context, answers, length, dataset,
language, all_classes and _id. We read `<data_dir>/longbench/data/` when the user names a
data directory, else the hub's `data.zip`, downloaded once into the cache.

Prompts are filled from the official `dataset2prompt.json` and the answer budget comes
from `dataset2maxlen.json` (asyncbench.benchmarks.longbench.prompts). As in the official pred.py, few-shot and
code prompts (trec, triviaqa, samsum, lsht, lcc, repobench-p) are sent without a chat
template (`Sample.chat = False`), and decoding is greedy. The rest of pred.py's prompting
is declared as the family's prompt rules (`RULES`: the model2maxlen.json budgets, the
official open models' chat formats, samsum's newline stop) and done by the run path
(asyncbench/prompt_rules/): the middle cut to the model's input limit among it.

Samples keep the base dataset as `task` for both LongBench and LongBench-E, because the
metric and the category depend on it; LongBench-E ids carry the `_e` file name
(`hotpotqa_e/17`) so they never collide with LongBench's (`hotpotqa/17`).

MiniLongBench uses the release's prompts as they are (`origin_prompt`; its narrativeqa,
qasper and multi_news prompts differ slightly from the official table: spacing, qasper
built with hotpotqa's template, a trailing newline) and its gold
answers, but is scored like LongBench, including the first-line truncation for trec,
triviaqa, samsum and lsht that the release's own scorer skips.
"""

from __future__ import annotations

import ast
import functools
import shutil
import zipfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ...errors import UserError, did_you_mean
from ...estimators.methods import DEFAULT_METHOD, METHODS
from ...jsonl_io import iter_json_objects, read_json_object
from ...prompt_rules import BudgetTable, PromptRules
from ...types import Sample, SampleResult, SampleScore
from ..base import Benchmark, CliOption, LoadOptions, RunContext
from .prompts import LongBenchConfig, fill_prompt, load_config, official_model2maxlen
from .scores import LongBenchEScores, LongBenchScores, LongBenchScoresJson, MiniLongBenchScores
from .table import (
    CODE_DATASETS,
    FIRST_LINE_DATASETS,
    LONGBENCH_E_DATASETS,
    NAMES,
    NEWLINE_STOP,
    NO_CHAT_TEMPLATE,
    ZH_DATASETS,
    first_line,
)

if TYPE_CHECKING:  # numpy stays out of `asyncbench --help`
    from ...estimators.intervals import Plan

LONGBENCH_DATASETS: tuple[str, ...] = NAMES
# The MiniLongBench release orders datasets this way (multifieldqa before multi_news);
# its samples, anchors and IRT items follow it.
MINILONGBENCH_DATASETS: tuple[str, ...] = (
    "2wikimqa", "dureader", "gov_report", "hotpotqa", "lcc", "lsht",
    "multifieldqa_en", "multifieldqa_zh", "multi_news", "musique", "narrativeqa",
    "passage_count", "passage_retrieval_en", "passage_retrieval_zh", "qasper", "qmsum",
    "repobench-p", "samsum", "trec", "triviaqa", "vcsum",
)  # fmt: skip


HUB_REPO = "THUDM/LongBench"
HUB_ZIP_URL = f"https://huggingface.co/datasets/{HUB_REPO}/resolve/main/data.zip"


# ---------------------------------------------------------------- data sources


def _fetch_zip(root: Path) -> Path:
    """data.zip from the hub: through huggingface_hub when installed (its own cache, auth,
    mirrors), else plain HTTPS to the resolve URL into `root`."""
    import importlib.util

    if importlib.util.find_spec("huggingface_hub") is not None:
        from huggingface_hub import hf_hub_download

        try:
            return Path(hf_hub_download(repo_id=HUB_REPO, filename="data.zip", repo_type="dataset"))
        except Exception as exc:
            raise UserError(
                f"could not fetch data.zip from the hub dataset {HUB_REPO} ({exc}); unzip it into DIR/longbench/ and pass --data-dir DIR"
            ) from None
    import httpx

    target = root / "data.zip"
    if target.is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".part")
    try:
        with httpx.stream("GET", HUB_ZIP_URL, follow_redirects=True, timeout=120) as resp:
            resp.raise_for_status()
            with tmp.open("wb") as fh:
                for chunk in resp.iter_bytes(1 << 20):
                    fh.write(chunk)
    except httpx.HTTPError as exc:
        raise UserError(
            f"could not download {HUB_ZIP_URL} ({exc}); download and unzip it into DIR/longbench/ and pass --data-dir DIR"
        ) from None
    tmp.replace(target)
    return target


def hub_data_dir() -> Path:
    """Directory of the hub's jsonl files, downloading and unpacking data.zip on first use
    (into a staging directory renamed at the end, so an interrupted unpack is redone)."""
    from ...datadir import cache_root

    root = cache_root() / "longbench"
    data = root / "data"
    if data.is_dir() and any(data.glob("*.jsonl")):
        return data
    archive = _fetch_zip(root)
    staging = root / "data.part"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        with zipfile.ZipFile(archive) as zf:
            for member in zf.namelist():
                if member.endswith(".jsonl"):
                    (staging / Path(member).name).write_bytes(zf.read(member))
    except zipfile.BadZipFile:
        raise UserError(f"{archive} is not a valid zip; delete it and run again to re-download") from None
    shutil.rmtree(data, ignore_errors=True)
    staging.replace(data)
    return data


def longbench_file(data_dir: Path | None, stem: str) -> Path:
    """Where `<stem>.jsonl` lives: `<data_dir>/longbench/data/` or the hub cache."""
    path = (hub_data_dir() if data_dir is None else Path(data_dir) / "longbench" / "data") / f"{stem}.jsonl"
    if data_dir is None and not path.is_file():
        raise UserError(f"{path} is not in the hub's data.zip; delete {path.parent} to re-download it")
    if not path.is_file():
        raise UserError(
            f"{path} not found; unzip LongBench's data.zip ({HUB_ZIP_URL}) into {path.parent.parent}"
        )
    return path


def read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, object]]]:
    """(line number, object) for each non-blank line; a malformed line is a UserError."""
    return iter_json_objects(path, hint="fix or re-download the file")


# ---------------------------------------------------------------- selection


def select_tasks(available: tuple[str, ...], requested: list[str] | None, benchmark: str, *, suffix: str = "") -> list[str]:
    """The requested datasets in the benchmark's canonical order; `suffix` lets
    LongBench-E accept `hotpotqa_e` as well as `hotpotqa`."""
    if not requested:
        return list(available)
    wanted: set[str] = set()
    for name in requested:
        base = name[: -len(suffix)] if suffix and name.endswith(suffix) else name
        if base not in available:
            raise UserError(f"unknown {benchmark} dataset {name!r}{did_you_mean(base, available)}; "
                            f"choose from: {', '.join(available)}")
        wanted.add(base)
    return [d for d in available if d in wanted]


def language_of(dataset: str) -> str:
    return "zh" if dataset in ZH_DATASETS else "code" if dataset in CODE_DATASETS else "en"


# ---------------------------------------------------------------- LongBench rows


def _answers(value: object, where: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(a, str) for a in value):
        return list(value)
    raise UserError(f"{where}: 'answers' must be a list of strings")


def sample_from_row(row: dict[str, object], *, dataset: str, sample_id: str, config: LongBenchConfig, where: str) -> Sample:
    """One LongBench(-E) jsonl row as a Sample with the official prompt filled in."""
    if "answers" not in row:
        raise UserError(f"{where}: missing field 'answers'")
    length = row.get("length")
    if length is not None and not isinstance(length, int):
        raise UserError(f"{where}: 'length' must be an integer")
    all_classes = row.get("all_classes")
    if all_classes is not None and not isinstance(all_classes, list):
        raise UserError(f"{where}: 'all_classes' must be a list or null")
    return Sample(
        id=sample_id,
        task=dataset,
        prompt=fill_prompt(config.template(dataset), row, where=where),
        answers=_answers(row["answers"], where),
        max_tokens=config.max_new_tokens(dataset),
        chat=dataset not in NO_CHAT_TEMPLATE,
        meta={
            "dataset": dataset,
            "language": row.get("language") or language_of(dataset),
            "length": length,
            "all_classes": all_classes,
            "_id": row.get("_id"),
        },
    )


def load_longbench_rows(opts: LoadOptions, datasets: list[str], *, file_suffix: str) -> list[Sample]:
    config = load_config(opts.data_dir)
    samples: list[Sample] = []
    for dataset in datasets:
        stem = f"{dataset}{file_suffix}"
        path = longbench_file(opts.data_dir, stem)
        for index, (lineno, row) in enumerate(read_jsonl(path)):
            if opts.limit is not None and index >= opts.limit:
                break
            samples.append(sample_from_row(row, dataset=dataset, sample_id=f"{stem}/{index}", config=config, where=f"{path}:{lineno}"))
    return samples


# ---------------------------------------------------------------- MiniLongBench


def _parse_gold(gold: object, where: str) -> tuple[list[str], list[str] | None]:
    """(answers, all_classes) from the release's `gold`: a list, or for trec/lsht a dict
    with answers and all_classes; either may be stored as its Python repr."""
    if isinstance(gold, str):
        try:
            gold = ast.literal_eval(gold)
        except (ValueError, SyntaxError):
            raise UserError(f"{where}: 'gold' is not a list or dict literal") from None
    if isinstance(gold, dict):
        if "answers" not in gold:
            raise UserError(f"{where}: 'gold' dict has no 'answers'")
        classes = gold.get("all_classes")
        return _answers(gold["answers"], where), list(classes) if classes is not None else None
    return _answers(gold, where), None


def _read_json_object(path: Path) -> dict[str, object]:
    return read_json_object(path, hint="expected the release's object keyed '0'..'n-1'")


def load_minilongbench(opts: LoadOptions) -> list[Sample]:
    if opts.data_dir is None:
        raise UserError(
            "MiniLongBench needs its release files: pass --data-dir DIR with DIR/minilongbench/samples/MiniLongBench_<dataset>.json"
        )
    root = Path(opts.data_dir) / "minilongbench"
    selected = set(select_tasks(MINILONGBENCH_DATASETS, opts.tasks, "minilongbench"))
    anchors_path = root / "anchors.json"
    sorted_anchors = _read_json_object(anchors_path).get("sorted_anchors") if anchors_path.is_file() else None
    anchors = sorted_anchors if isinstance(sorted_anchors, list) else None
    config = load_config(opts.data_dir)
    samples: list[Sample] = []
    position = 0
    for dataset in MINILONGBENCH_DATASETS:
        path = root / "samples" / f"MiniLongBench_{dataset}.json"
        if not path.is_file():
            raise UserError(f"{path} not found; copy the MiniLongBench release's samples/ into {root}")
        entries = _read_json_object(path)
        for index, key in enumerate(sorted(entries, key=int)):
            entry, where = entries[key], f"{path}: entry {key!r}"
            if dataset in selected and (opts.limit is None or index < opts.limit):
                if not isinstance(entry, dict) or not isinstance(entry.get("origin_prompt"), str) or "gold" not in entry:
                    raise UserError(f"{where}: needs 'origin_prompt' (string) and 'gold'")
                answers, all_classes = _parse_gold(entry["gold"], where)
                meta: dict[str, object] = {
                    "dataset": dataset, "language": language_of(dataset), "length": None,
                    "all_classes": all_classes, "position": position,
                }  # fmt: skip
                if anchors is not None and position < len(anchors):
                    meta["anchor"] = int(anchors[position])
                samples.append(
                    Sample(
                        id=f"{dataset}/{key}",
                        task=dataset,
                        prompt=entry["origin_prompt"],
                        answers=answers,
                        max_tokens=config.max_new_tokens(dataset),
                        chat=dataset not in NO_CHAT_TEMPLATE,
                                        meta=meta,
                    )
                )
            position += 1
    return samples


# ---------------------------------------------------------------- scoring and aggregation


async def score_longbench(samples: list[Sample], predictions: list[str],
                          map_chunks: Callable[..., list[Any]] | None = None) -> list[SampleScore]:
    """Official LongBench metrics (first-line truncation included) in a worker thread,
    since ROUGE and fuzzy matching are CPU-bound; spread over Ray tasks by `map_chunks`.
    Where the metric reads the first line only, that line is the parsed answer."""
    import anyio

    from .score import score_many

    if len(samples) != len(predictions):
        raise ValueError(f"{len(samples)} samples but {len(predictions)} predictions")
    call = functools.partial(
        score_many,
        [s.task for s in samples],
        list(predictions),
        [s.answers for s in samples],
        [s.meta.get("all_classes") for s in samples],
        jobs=None,
        map_chunks=map_chunks,
    )
    values = await anyio.to_thread.run_sync(call)
    return [SampleScore(v, first_line(pred)) if s.task.removesuffix("_e") in FIRST_LINE_DATASETS else SampleScore(v)
            for s, pred, v in zip(samples, predictions, values)]


def resampling_plan(results: list[SampleResult]) -> Plan:
    """The bootstrap plan of `aggregate_results`: the scored samples per dataset."""
    from .aggregate import resampling_plan as plan

    return plan((r.meta.get("dataset", r.task), float(r.score)) for r in results
                if r.status.has_answer and r.score is not None)


def aggregate_results(results: list[SampleResult], *, by_length: bool) -> LongBenchScoresJson:
    """The paper's numbers (x100) via asyncbench.benchmarks.longbench.aggregate, plus how many samples were
    scored, failed (no score: left out of the averages), and truncated (and by how many
    tokens in total). Length bins only for LongBench-E, whose design is length-balanced.
    `ci95`: 95% bootstrap intervals of overall, category and dataset scores (not of the
    length bins)."""
    from ...estimators.intervals import intervals
    from .aggregate import aggregate_longbench

    scored = [r for r in results if r.status.has_answer and r.score is not None]
    out: LongBenchScoresJson = {"overall": None, "overall_en": None, "overall_zh": None, "by_task": {}, "by_category": {},
                   "ci95": intervals(resampling_plan(results))}
    if scored:
        agg = aggregate_longbench(
            (r.meta.get("dataset", r.task), float(r.score), r.meta.get("length") if by_length else None)  # type: ignore[arg-type]
            for r in scored
        )
        out["overall"] = agg["overall"]["all"]
        out["overall_en"] = agg["overall"]["en"]
        out["overall_zh"] = agg["overall"]["zh"]
        out["by_task"] = agg["by_task"]
        out["by_category"] = agg["by_category"]
        if by_length:
            out["by_length"] = agg.get("by_length", {})
    elif by_length:
        out["by_length"] = {}
    truncated = [r.truncated_tokens for r in results if r.truncated_tokens > 0]
    out["truncated"] = {"n": len(truncated), "tokens": sum(truncated)}
    out["n_scored"] = len(scored)
    out["n_failed"] = len(results) - len(scored)
    return out


@dataclass
class _LongBenchFamily(Benchmark):
    """Shared score/aggregate for the three benchmarks; subclasses say how to load and
    whether results are binned by length."""

    name: str = ""
    by_length: bool = False
    SCORES: ClassVar[type[LongBenchScores]] = LongBenchScores
    # pred.py's prompting: its model2maxlen.json budgets (the data directory's, else the
    # official repository's), its open models prompted as it prompts them, samsum's
    # newline stop; a run needs the model's context (prompts are cut to it)
    RULES: ClassVar[PromptRules] = PromptRules(
        budget_table=BudgetTable("longbench", official_model2maxlen), open_models=True, needs_context=True,
        newline_stop=NEWLINE_STOP)

    async def score(self, samples: list[Sample], predictions: list[str], ctx: RunContext) -> list[SampleScore]:
        return await score_longbench(samples, predictions, getattr(ctx, "map_chunks", None))

    def aggregate(self, results: list[SampleResult], report: dict[str, object] | None = None) -> LongBenchScores:
        return self.SCORES.of(aggregate_results(results, by_length=self.by_length))

    def length_bin(self, meta: Mapping[str, object]) -> str | None:
        """LongBench-E's bin of the sample's `length` (eval.py's 0-4k/4-8k/8k+)."""
        from .aggregate import length_bin

        length = meta.get("length")
        return length_bin(float(length)) if self.by_length and isinstance(length, (int, float)) else None

    def resampling_plan(self, results: list[SampleResult]) -> Plan:
        return resampling_plan(results)


# options that only mean something with --adaptive
ADAPTIVE_ONLY = ("target_se", "adaptive_batch", "adaptive_start", "adaptive_max_samples")


@dataclass
class LongBench(_LongBenchFamily):
    name: str = "longbench"
    # adaptive testing (benchmarks/longbench/adaptive.py): parse_benchmark picks AdaptiveLongBench
    OPTIONS: ClassVar[tuple[CliOption, ...]] = (
        CliOption("--adaptive", "LongBench: ask samples adaptively (by information per token about the Overall) "
                  "and estimate the full-LongBench Overall; needs --target-se", kind="flag"),
        CliOption("--target-se", "LongBench --adaptive: stop when the Overall's standard error (0-1 scale) is at "
                  "most this", kind="float"),
        CliOption("--adaptive-batch", "LongBench --adaptive: samples asked per round (default 16)", kind="int"),
        CliOption("--adaptive-start", "LongBench --adaptive: start samples per dataset (default 1)", kind="int"),
        CliOption("--adaptive-max-samples", "LongBench --adaptive: stop after this many samples", kind="int"),
    )

    @classmethod
    def configured(cls, extra: Mapping[str, object], data_dir: Path | None) -> Benchmark:
        """Plain LongBench (with --adaptive the registry picks AdaptiveLongBench instead)."""
        if any(extra.get(k) is not None for k in ADAPTIVE_ONLY):
            raise UserError("--target-se and the other --adaptive-* options need --adaptive")
        return cls()

    def load(self, opts: LoadOptions) -> list[Sample]:
        return load_longbench_rows(opts, select_tasks(LONGBENCH_DATASETS, opts.tasks, self.name), file_suffix="")


@dataclass
class LongBenchE(_LongBenchFamily):
    name: str = "longbench-e"
    by_length: bool = True
    SCORES: ClassVar[type[LongBenchScores]] = LongBenchEScores

    def load(self, opts: LoadOptions) -> list[Sample]:
        datasets = select_tasks(LONGBENCH_E_DATASETS, opts.tasks, self.name, suffix="_e")
        return load_longbench_rows(opts, datasets, file_suffix="_e")


@dataclass
class MiniLongBench(_LongBenchFamily):
    """The 237 anchors; `aggregate` adds the estimate of the full LongBench score."""

    name: str = "minilongbench"
    SCORES: ClassVar[type[LongBenchScores]] = MiniLongBenchScores
    OPTIONS: ClassVar[tuple[CliOption, ...]] = (
        CliOption("--estimate-method", "MiniLongBench: headline estimate method (default: the parameters' own, "
                  f"{DEFAULT_METHOD} for the shipped ones)", choices=METHODS),
        CliOption("--estimate-params", "MiniLongBench: IRT parameters, shipped (default), release or a directory",
                  default="shipped"),
    )
    # configuration (from the run's options), never changed by the stages
    data_dir: Path | None = None
    method: str | None = None  # None: the parameters' headline
    params: str = "shipped"  # the shipped parameters use the release's 237 anchors, whose prompts runs have

    @classmethod
    def configured(cls, extra: Mapping[str, object], data_dir: Path | None) -> Benchmark:
        method = extra.get("estimate_method")
        return cls(data_dir=data_dir, method=str(method) if method else None,
                   params=str(extra.get("estimate_params", "shipped")))

    def load(self, opts: LoadOptions) -> list[Sample]:
        return load_minilongbench(opts)

    def aggregate(self, results: list[SampleResult], report: dict[str, object] | None = None) -> LongBenchScores:
        """`overall` is the headline estimate of the full-LongBench Overall (x100, None when
        it is not available); the anchors aggregated as LongBench aggregates (the mean of the
        category means, each the mean of its datasets' means, not the plain mean over the 237
        anchors) are `anchor_average` (and `anchor_average_en`/`_zh`): the anchors are chosen
        to be informative, not representative, so this is not a LongBench score and must not
        be read as one."""
        out = aggregate_results(results, by_length=False)
        out["anchor_average"] = out.pop("overall", None)
        out["anchor_average_en"] = out.pop("overall_en", None)
        out["anchor_average_zh"] = out.pop("overall_zh", None)
        ci = out["ci95"]
        for lang in ("", "_en", "_zh"):
            if f"overall{lang}" in ci:
                ci[f"anchor_average{lang}"] = ci.pop(f"overall{lang}")
        est = self.estimate(results)
        out["overall"] = round(100 * est["overall"], 2) if est.get("available") else None
        out["estimate"] = est
        return self.SCORES.of(out)

    def estimate(self, results: list[SampleResult]) -> dict[str, Any]:
        """The estimates of full LongBench from the 237 anchor scores, with `overall_ci90`.
        The release's convention (no first-line cut for trec, triviaqa, samsum, lsht) is
        used for these: its IRT parameters were fitted to scores computed that way (see
        ../shared/data/README.md); they are recomputed here from the predictions."""
        from ...estimators.minilongbench import estimate_from_anchor_scores
        from .score import score_one

        release = {r.sample_id: score_one(r.task, r.prediction or "", r.references, r.meta.get("all_classes"),
                                          first_line_post=False)
                   for r in results if r.task in FIRST_LINE_DATASETS and r.score is not None}
        by_position: dict[int, SampleResult] = {int(r.meta["position"]): r for r in results if "position" in r.meta}
        missing = [p for p in range(237) if p not in by_position or by_position[p].score is None]
        if missing:
            return {"available": False,
                    "reason": f"{len(missing)} of the 237 anchors have no score (failed or not run); "
                              "the estimate needs all of them"}
        rows = [by_position[p] for p in range(237)]
        scores = [float(release.get(r.sample_id, r.score or 0.0)) for r in rows]
        est = estimate_from_anchor_scores(scores, self.params, self.method, [r.prompt_tokens for r in rows],
                                          data_dir=self.data_dir)
        est["available"] = True
        return est
