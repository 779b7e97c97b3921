"""100-LongBench as a `Benchmark`: generate, filter prior knowledge, judge, LongScore.

- load: builds every (task, length) cell with the generator (rows per cell: extra["rows"],
  default 100 as in the paper, capped by --limit); cells no source can fill are reported,
  not silently dropped.
- prompts and output budgets: the release's tables, read as data (release.py).
- prepare: asks each QA question with no passages and the release's `qa_old` prompt
  (purpose "prior"); a sample whose no-context answer (first line) does not say
  "unanswerable" and that the judge scores at or above the threshold (official default
  0.5) against its best reference is excluded (eval_trec.py).
- score: the official post-processing (first line of the output; an empty one scores 0)
  and metrics: last UUID for KV retrieval, first integer for counting stars / passage
  retrieval / passage count, the release's LLM judge for QA and summaries (metrics/judge.py:
  best reference, a failed judgement scores 0).
- aggregate: scores x100 per task and length, the per-length mean over tasks, and
  LongScore over the base lengths (default 2k, 4k, 6k).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from ...errors import ProviderError, UserError
from ...estimators.longscore import BASE_LABEL, DEFAULT_BASE, longscore, parse_length
from ...metrics import judge
from ...metrics import registry as metrics
from ...prompt_rules import BudgetTable, PromptRules
from ...tokenizers import Tokenizer
from ...types import JudgeCall, Response, Sample, SampleResult, SampleScore
from ..base import Benchmark, CliOption, Generating, Loaded, LoadNotes, LoadOptions, RunContext, notes_of
from ..longbench.table import first_line
from .generator import Cell, Generator, Unbuildable
from .release import PRIOR_PROMPT, Release, load_release
from .requests import RELEASE_REQUESTS
from .scores import LongBench100Scores
from .sources import NEEDED_EXTRA, Record, load_sources
from .tasks import TASKS

if TYPE_CHECKING:  # numpy stays out of `asyncbench --help`
    from ...estimators.intervals import Plan, Tree

DEFAULT_LENGTHS = ("2k", "4k", "6k", "8k", "16k", "32k", "64k", "128k")
DEFAULT_ROWS = 100
PRIOR_THRESHOLD = 0.5
# the prior-knowledge filter's verdict on a QA sample: answered without its context (left
# out), not, or no no-context answer came back (kept)
PriorVerdict = Literal["known", "unknown", "unverified"]
_UUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")


def _cells(results: list[SampleResult]) -> tuple[dict[str, dict[str, list[float]]], dict[str, dict[str, int]]]:
    """Scores by task and length (tasks sorted, lengths shortest first), and the count of
    unscored samples by task and length."""
    cells: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    unscored: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r in results:
        length = r.meta.get("length") or r.sample_id.split("/")[1]
        if r.score is None:
            unscored[r.task][length] += 1
        else:
            cells[r.task][length].append(r.score)
    ordered = {task: dict(sorted(c.items(), key=lambda kv: parse_length(kv[0]))) for task, c in sorted(cells.items())}
    return ordered, unscored


def _combine(by_task_length: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """by_task (mean over its lengths), by_length (mean over the tasks run at every
    length), overall (mean over lengths), on numbers or on bootstrap arrays alike."""
    lengths = sorted({label for c in by_task_length.values() for label in c}, key=parse_length)
    complete = [t for t, c in by_task_length.items() if all(l in c for l in lengths)]
    by_length = {l: sum(by_task_length[t][l] for t in complete) / len(complete) for l in lengths} if complete else {}
    return {"overall": sum(by_length.values()) / len(by_length) if by_length else None,
            "by_task": {t: sum(c.values()) / len(c) for t, c in by_task_length.items()},
            "by_length": by_length, "overall_tasks": complete}


def _scores_tree(cells: Mapping[str, Any]) -> Tree:
    by_task_length: dict[str, dict[str, Any]] = {}
    for key, value in cells.items():
        task, length = key.split("\t")
        by_task_length.setdefault(task, {})[length] = value
    ordered = {t: dict(sorted(c.items(), key=lambda kv: parse_length(kv[0]))) for t, c in sorted(by_task_length.items())}
    combined = _combine(ordered)
    return {"overall": combined["overall"], "by_task": combined["by_task"], "by_length": combined["by_length"]}


def _labels(value: object, default: tuple[str, ...]) -> list[str]:
    if not value:
        return list(default)
    items: list[object] = [*value.split(",")] if isinstance(value, str) else [*value] if isinstance(value, Iterable) \
        else [value]
    labels = [str(v).strip() for v in items if str(v).strip()]
    for label in labels:
        parse_length(label)
    return labels


def _samples(cells: list[tuple[str, str, Cell]], release: Release,
             wanted: Callable[[str], bool] | None = None) -> Iterator[Sample]:
    """The cells' samples (those whose id is `wanted`), each built when taken."""
    for task, length, cell in cells:
        spec_t = TASKS[task]
        template, max_tokens = release.template(task), release.max_new_tokens(task)
        for b in cell.rows(partial(_wanted_row, wanted, f"{task}/{length}/")):
            yield Sample(id=f"{task}/{length}/{b.row}", task=task,
                         prompt=template.format(context=b.context, input=b.input, instruction=b.instruction),
                         answers=b.answers, max_tokens=max_tokens, metric=spec_t.metric,
                         meta={"length": length, "target_tokens": b.target, "context_tokens": b.context_tokens,
                               "question": b.input})


def _wanted_row(wanted: Callable[[str], bool] | None, prefix: str, row: int) -> bool:
    return wanted is None or wanted(f"{prefix}{row}")


def _heads(cells: list[tuple[str, str, Cell]], release: Release) -> Iterator[Sample]:
    """The cells' samples as `prepare` reads them, building no context: id, task, metric,
    output budget, length, and for a QA task its question and answers (the record the row
    draws carries them as `_samples` would give them); no prompt."""
    for task, length, cell in cells:
        spec_t, max_tokens = TASKS[task], release.max_new_tokens(task)
        for row, rec in enumerate(cell.records()):
            qa = rec if spec_t.metric == "qa" else None  # the record a QA row asks about
            yield Sample(id=f"{task}/{length}/{row}", task=task, prompt="",
                         answers=list(qa.answers) if qa else [], max_tokens=max_tokens, metric=spec_t.metric,
                         meta={"length": length, **({"question": qa.input} if qa else {})})


_GENERATOR_CODE = ("generator.py", "sources.py", "tasks.py")


def _fingerprint(sources: Mapping[str, list[Record]], release: Release, tokenizer: str, seed: int,
                 cells: list[tuple[str, str, int]]) -> str:
    """What the samples are a function of, hashed for the run id without building them:
    the source records, the release's prompts and budgets, the tokenizer that measures
    lengths, the seed, the cells and the generator's code (an edit to it is a new run)."""
    h = hashlib.sha256()
    for name in _GENERATOR_CODE:
        h.update((Path(__file__).parent / name).read_bytes())
    h.update(json.dumps([tokenizer, seed, cells, release.prompts, release.maxlen, release.judge],
                        sort_keys=True, default=str).encode())
    for name in sorted(sources):
        for r in sources[name]:
            h.update(json.dumps([name, r.input, r.answers], ensure_ascii=False).encode())
            h.update(r.context.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


RELEASE_TOKENIZER = "meta-llama/Llama-2-7b-hf"  # the release measures lengths in its tokens


def _length_tokenizer(spec: object) -> tuple[Tokenizer, str]:
    """--tokenizer when given; else the release's Llama-2 tokenizer when it is already on
    this machine (transformers installed, tokenizer cached: nothing is downloaded); else
    cl100k_base, which the report records as a stand-in."""
    from ...tokenizers import HFTokenizer, get_tokenizer

    if spec:
        try:
            return get_tokenizer(str(spec)), str(spec)
        except KeyError:
            raise UserError(f"no tokenizer known for {spec!r}; pass --tokenizer cl100k_base, o200k_base, an OpenAI "
                            "model or hf:<repo>") from None
    try:
        return HFTokenizer(RELEASE_TOKENIZER, local_only=True), f"hf:{RELEASE_TOKENIZER}"
    except Exception:  # transformers missing, or the tokenizer not cached: the stand-in
        return get_tokenizer("cl100k_base"), "cl100k_base"


class LongBench100(Benchmark):
    """The 100-LongBench benchmark (seed 002)."""

    name = "100-longbench"
    SCORES: ClassVar[type[LongBench100Scores]] = LongBench100Scores
    # every model request as the release sends it (requests.py): no truncation, the
    # release's system message and sampling for API models, the raw prompt for open ones;
    # the release's per-model prompt budgets (budget.py); a run needs the model's context
    RULES: ClassVar[PromptRules] = PromptRules(budget_table=BudgetTable("longbench100"), needs_context=True,
                                               release=RELEASE_REQUESTS)
    GENERATES: ClassVar[bool] = True  # contexts built by the generator, one sample at a time
    OPTIONS: ClassVar[tuple[CliOption, ...]] = (
        CliOption("--lengths", "100-LongBench: target lengths, e.g. 2k,4k,8k", kind="list"),
        CliOption("--base-lengths", "100-LongBench: base-ability lengths for LongScore with --base-ability paper "
                  "(default 2k,4k,6k)", kind="list"),
        CliOption("--base-ability", "100-LongBench: release (default: the release's base set, each task's real "
                  "document alone) or paper (Eq. 1: the mean over --base-lengths)", choices=("release", "paper")),
        CliOption("--rows", "100-LongBench: samples per task and length (default 100)", kind="int"),
        CliOption("--seed", "100-LongBench: generator seed (default 42)", kind="int"),
        CliOption("--prior-threshold", "100-LongBench: exclude QA samples answered above this score without "
                  "context (default 0.5)", kind="float"),
    )

    def __init__(self, extra: Mapping[str, Any] | None = None, data_dir: Path | None = None) -> None:
        """Configured once from the run's options; the stages never change it."""
        extra = extra or {}
        self.data_dir = data_dir
        # The release takes base ability from its base set; the paper (Eq. 1) from the mean
        # over short lengths. Naming base lengths asks for the paper's rule.
        self.base_ability = str(extra.get("base_ability") or ("paper" if extra.get("base_lengths") else "release"))
        lengths = _labels(extra.get("lengths"), DEFAULT_LENGTHS)
        if self.base_ability == "release":
            self.lengths: list[str] = [BASE_LABEL] + [label for label in lengths if label != BASE_LABEL]
            self.base_lengths: list[str] = [BASE_LABEL]
        else:
            self.lengths = lengths
            self.base_lengths = _labels(extra.get("base_lengths"), DEFAULT_BASE)
        self.prior_threshold = float(extra.get("prior_threshold", PRIOR_THRESHOLD))

    @classmethod
    def configured(cls, extra: Mapping[str, Any], data_dir: Path | None) -> Benchmark:
        return cls(extra, data_dir=data_dir)

    @classmethod
    def finish_options(cls, extra: dict[str, object], model: str, tokenizer: str | None) -> dict[str, object]:
        """Generation measures lengths with the target model's tokenizer when known."""
        from ...tokenizers import tiktoken_encoding_for

        tok = tokenizer or tiktoken_encoding_for(model.partition(":")[2])
        return {**extra, "tokenizer": tok} if tok else extra

    # -- load ---------------------------------------------------------------------------
    def needs_judge(self, tasks: list[str] | None) -> str | None:
        """QA and summaries are scored by an LLM judge (and QA filtered by it): said at
        planning, before a sample is generated or a run recorded."""
        judged = [t for t in (tasks or TASKS) if t in TASKS and TASKS[t].metric in ("qa", "summary")]
        if not judged:
            return None
        others = ",".join(t for t in TASKS if TASKS[t].metric not in ("qa", "summary"))
        return (f"100-LongBench scores {', '.join(judged)} with an LLM judge; pass --judge SPEC (e.g. "
                f"openai:gpt-4o-mini), or run only the other tasks: 100-longbench:{others}")

    def load(self, opts: LoadOptions) -> list[Sample]:
        generating = self.generate(opts, lambda line: None)
        return Loaded(generating.samples, generating.notes)

    def generate(self, opts: LoadOptions, say: Callable[[str], None]) -> Generating:
        """Every (task, length) cell checked, then its rows built one at a time as they are
        taken (generator.Cell): what planning and a dry run stream. Measuring the sources
        takes seconds (tokenising every article once): said first."""
        extra = opts.extra
        tasks = list(opts.tasks or TASKS)
        unknown = [t for t in tasks if t not in TASKS]
        if unknown:
            raise UserError(f"unknown 100-LongBench task(s) {', '.join(unknown)}; choose from {', '.join(TASKS)}")
        if opts.data_dir is None:
            raise UserError("100-LongBench builds its contexts from LongBench-format sources; pass --data-dir DIR (a folder with longbench100/*.jsonl, longbench/, minilongbench/ or bamboo/)")
        rows = int(extra.get("rows", DEFAULT_ROWS))
        if opts.limit is not None:
            rows = min(rows, opts.limit)
        say(f"generating up to {len(tasks) * len(self.lengths) * rows:,} samples ({len(tasks)} tasks x "
            f"{len(self.lengths)} lengths x {rows} rows); measuring the sources in {opts.data_dir} first")
        tokenizer, spec = _length_tokenizer(extra.get("tokenizer"))
        release = load_release(opts.data_dir)
        wanted = {n for t in tasks for n in TASKS[t].real + TASKS[t].noise} | NEEDED_EXTRA
        sources = load_sources(opts.data_dir, wanted)
        seed = int(extra.get("seed", 42))
        gen = Generator(sources, tokenizer, seed)
        cells: list[tuple[str, str, Cell]] = []
        unbuildable: dict[str, dict[str, str]] = {}
        for task in tasks:
            for length in self.lengths:
                try:
                    cells.append((task, length, gen.base_cell(task, rows) if length == BASE_LABEL
                                  else gen.cell(task, length, parse_length(length), rows)))
                except Unbuildable as exc:
                    unbuildable.setdefault(task, {})[length] = str(exc)
        if not cells:
            raise UserError("no 100-LongBench sample could be built: " + "; ".join(f"{t} {l}: {r}" for t, c in unbuildable.items() for l, r in c.items()))
        total = sum(c.size for _, _, c in cells)
        skipped = f", {sum(map(len, unbuildable.values()))} cells unbuildable" if unbuildable else ""
        what = f"{total:,} samples to build{skipped}; lengths in {spec} tokens"
        # The release measures lengths in Llama-2-7b-hf tokens; any other tokenizer is a stand-in.
        stand_in = not (spec.startswith("hf:") and "llama-2" in spec.lower())
        notes: LoadNotes = {"unbuildable": unbuildable, "lengths": {"tokenizer": spec, "stand_in_for_llama_2": stand_in}}
        return Generating(total, what, _samples(cells, release), lambda: _heads(cells, release),
                          lambda wanted: _samples(cells, release, wanted), notes,
                          _fingerprint(sources, release, spec, seed, [(t, l, c.size) for t, l, c in cells]))

    # -- dry run ------------------------------------------------------------------------
    def planned_calls(self, samples: list[Sample], count: Callable[[str], int]) -> dict[str, tuple[int, int, int]]:
        """The judge and prior-knowledge calls a run of `samples` makes at most, for the dry
        run: purpose -> (requests, prompt tokens, max output tokens), `count` counting
        tokens. Judge prompts hold the prediction: its output budget stands for it."""
        release = load_release(self.data_dir)
        qa = [s for s in samples if s.metric == "qa"]
        prior_prompt = release.template(PRIOR_PROMPT)
        # one no-context question per QA sample, as the release asks it (prepare)
        prior = (len(qa), sum(count(prior_prompt.format(input=s.meta["question"])) for s in qa),
                 sum(s.max_tokens for s in qa))
        qa_judge, fluency, precision = (count(release.judge[n]) for n in judge.PROMPT_NAMES)
        calls = [qa_judge + count(s.meta["question"]) + count(" ".join(s.answers)) + s.max_tokens
                 for s in qa]  # prior answers
        calls += [qa_judge + count(s.meta["question"]) + count(" ".join(s.answers)) + s.max_tokens for s in qa]
        for s in (s for s in samples if s.metric == "summary"):
            per_ref = [fluency + s.max_tokens, precision + count(s.answers[0] if s.answers else "") + s.max_tokens]
            calls += per_ref * judge.SUMMARY_TRIES * max(1, len(s.answers))
        return {"prior": prior, "judge": (len(calls), sum(calls), len(calls) * judge.JUDGE_MAX_TOKENS)}

    # -- prepare: prior-knowledge filter ---------------------------------------------------
    async def prepare(self, samples: list[Sample], ctx: RunContext) -> tuple[list[Sample], dict[str, object]]:
        """The release's prior-knowledge filter (pred.py `get_pred`, eval_trec.py `scorer`):
        every QA sample's question is asked once for that sample, without its context (the
        `qa_old` prompt), as the release sends it beside the sample's own request; that
        sample is left out when its no-context answer (first line) does not say
        "unanswerable" and the judge scores it at or above the threshold against its best
        reference. Where the model samples (API models: temperature 0.9), each sample's
        draw is its own request (repeat index k for the k-th sample asking the question);
        a greedy model's draws are one request (asked once, its answer shared). A judge
        request that repeats one already made (the same question, references and answer)
        is asked once: the judge is an instrument, not the model under test."""
        qa = [s for s in samples if s.metric == "qa"]
        release = load_release(self.data_dir)
        prior_prompt = release.template(PRIOR_PROMPT)
        drawn: dict[tuple[str, int], int] = defaultdict(int)  # draws so far of each (question, max tokens)
        requests = []
        for s in qa:
            q = s.meta["question"]
            request = ctx.make_request(None, prompt=prior_prompt.format(input=q), max_tokens=s.max_tokens, task=s.task)
            if request.temperature > 0 and (k := drawn[(q, s.max_tokens)]):
                request = ctx.make_request(None, prompt=prior_prompt.format(input=q), max_tokens=s.max_tokens,
                                           task=s.task, repeat=k)
            drawn[(q, s.max_tokens)] += 1
            requests.append(request)
        replies = await ctx.generate(requests, "prior") if requests else []
        verdict, to_judge = _read_prior_replies(qa, replies)
        scores = (await judge.qa_scores(ctx, release.judge["judge_prompt"], [(q, list(a), line) for _, q, a, line in to_judge],
                                        [task for task, _, _, _ in to_judge]) if to_judge else [])
        for (sample_id, *_), score in zip(to_judge, scores):
            verdict[sample_id] = "known" if score >= self.prior_threshold else "unknown"
        kept, excluded, unverified = _drop_known(samples, verdict)
        prior_report = {
            "threshold": self.prior_threshold,
            "checked": len(qa),
            "asked": len({r.key() for r in requests}),  # distinct requests: one per sample, or per question if greedy
            "excluded": sum(sum(c.values()) for c in excluded.values()),
            "excluded_by_task": {t: dict(c) for t, c in excluded.items()},
            "unverified": unverified,
        }
        notes = notes_of(samples)
        reason = (f"prior-knowledge filter: answered without its context (judge score >= {self.prior_threshold}; "
                  "100-LongBench's rule)")
        return kept, {"prior_knowledge": prior_report, "excluded_reason": reason,
                      "unbuildable": notes.get("unbuildable", {}),
                      "lengths": notes.get("lengths", {})}

    # -- score ----------------------------------------------------------------------------
    async def score(self, samples: list[Sample], predictions: list[str], ctx: RunContext) -> list[SampleScore]:
        """The release's scoring of each answer's first line (its parsed answer): a rule
        metric, or the judge (qa and summaries; its calls kept with the score)."""
        scores: list[float | None] = [None] * len(samples)
        parsed: list[str | None] = [None] * len(samples)
        calls_of: dict[int, tuple[JudgeCall, ...]] = {}
        qa_idx, qa_items, sum_idx, sum_items = [], [], [], []
        qa_tasks, sum_tasks = [], []
        for i, (s, pred) in enumerate(zip(samples, predictions)):
            if pred is None:
                continue
            line = parsed[i] = first_line(pred)
            if s.metric in metrics.METRICS:  # a rule metric (uuid, number); qa and summary are judged
                scores[i] = metrics.score(s.metric, line, s.answers[:1])
            elif not line.strip():
                scores[i] = 0.0  # the model gave no answer: a real zero, not a judge failure
            elif s.metric == "qa":
                qa_idx.append(i)
                qa_items.append((s.meta["question"], s.answers, line))
                qa_tasks.append(s.task)
            else:
                sum_idx.append(i)
                sum_items.append((s.answers, line))
                sum_tasks.append(s.task)
        release = load_release(self.data_dir) if qa_items or sum_items else None
        if qa_items and release is not None:
            calls: judge.Calls = [[] for _ in qa_idx]
            found = await judge.qa_scores(ctx, release.judge["judge_prompt"], qa_items, qa_tasks, calls)
            for i, v, c in zip(qa_idx, found, calls):
                scores[i], calls_of[i] = v, tuple(c)
        if sum_items and release is not None:
            calls = [[] for _ in sum_idx]
            found = await judge.summary_scores(ctx, release.judge["fluency_prompt"], release.judge["precision_prompt"],
                                               sum_items, sum_tasks, calls)
            for i, v, c in zip(sum_idx, found, calls):
                scores[i], calls_of[i] = v, tuple(c)
        return [SampleScore(v) if line is None else SampleScore(v, line, calls_of.get(i))
                for i, (v, line) in enumerate(zip(scores, parsed))]

    # -- aggregate ------------------------------------------------------------------------
    def length_bin(self, meta: Mapping[str, object]) -> str | None:
        """The sample's 100-LongBench length (the context it was built to: 2k ... 128k)."""
        length = meta.get("length")
        return str(length) if length else None

    def aggregate(self, results: list[SampleResult], prepared: dict[str, Any] | None = None) -> LongBench100Scores:
        from ...estimators.intervals import intervals

        cells, unscored = _cells(results)
        by_task_length = {task: {l: 100 * sum(v) / len(v) for l, v in c.items()} for task, c in cells.items()}
        combined = _combine(by_task_length)
        by_length, complete = combined["by_length"], combined["overall_tasks"]
        return self.SCORES.of({
            "overall": combined["overall"],
            "by_task": combined["by_task"],
            "by_length": by_length,
            "by_task_length": by_task_length,
            "overall_tasks": complete,
            "unscored": {t: dict(c) for t, c in unscored.items()},
            "prior_knowledge": (prepared or {}).get("prior_knowledge", {}),
            "unbuildable": (prepared or {}).get("unbuildable", {}),
            "base_lengths": self.base_lengths,
            "base_ability_from": ("release: its base set (each QA/summary task's answer-bearing article alone, under "
                                  "8k tokens; synthetic tasks at 2k/4k/6k)" if self.base_ability == "release"
                                  else f"paper (Eq. 1): the mean over {', '.join(self.base_lengths)}"),
            "ci95": intervals(self.resampling_plan(results)),
            "longscore": self._longscore(by_length),
            "longscore_by_task": {t: self._longscore(c) for t, c in by_task_length.items()},
        })

    def resampling_plan(self, results: list[SampleResult]) -> Plan:
        """The bootstrap plan of `aggregate`: each (task, length) cell a stratum of its
        scored samples, combined as `aggregate` does (LongScore is left out)."""
        from ...estimators.intervals import Plan, mean_stratum

        cells, _ = _cells(results)
        strata = {f"{task}\t{length}": mean_stratum(v) for task, c in cells.items() for length, v in c.items()}
        return Plan(strata, _scores_tree)

    def _longscore(self, scores: dict[str, float]) -> dict[str, object] | None:
        """LongScore where the base lengths and a longer one were run; None otherwise."""
        try:
            ls = longscore(scores, self.base_lengths)
        except UserError:
            return None
        return {"base_ability": ls.base_ability, "lc": ls.lc, "avg_lc": ls.avg_lc, "avg_score": ls.avg_score}


def _read_prior_replies(qa: list[Sample], replies: list[Response | ProviderError]
                        ) -> tuple[dict[str, PriorVerdict], list[tuple[str, str, tuple[str, ...], str]]]:
    """Each QA sample's no-context reply read (eval_trec.py: its first line): (verdict so
    far by sample id: "unknown" for an "unanswerable" reply, "unverified" where none came
    back (the sample is kept); the (sample id, question, answers, reply line) left for
    the judge)."""
    verdict: dict[str, PriorVerdict] = {}
    to_judge: list[tuple[str, str, tuple[str, ...], str]] = []
    for s, reply in zip(qa, replies):
        if not isinstance(reply, Response):
            verdict[s.id] = "unverified"  # no no-context answer: the sample is kept
            continue
        line = first_line(reply.text or "")
        if "unanswerable" in line.lower():
            verdict[s.id] = "unknown"
        else:
            to_judge.append((s.id, s.meta["question"], tuple(s.answers), line))
    return verdict, to_judge


def _drop_known(samples: list[Sample], verdict: dict[str, PriorVerdict]
                ) -> tuple[list[Sample], defaultdict[str, defaultdict[str, int]], int]:
    """(the samples kept, those excluded counted by task and length, how many kept QA
    samples are unverified): a QA sample the model answered without its context is out."""
    kept: list[Sample] = []
    excluded: defaultdict[str, defaultdict[str, int]] = defaultdict(lambda: defaultdict(int))
    unverified = 0
    for s in samples:
        v = verdict.get(s.id) if s.metric == "qa" else None
        if v == "known":
            excluded[s.task][s.meta["length"]] += 1
            continue
        unverified += v == "unverified"
        kept.append(s)
    return kept, excluded, unverified
