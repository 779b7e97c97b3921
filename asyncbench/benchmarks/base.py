"""The contract between a benchmark and the run engine.

A benchmark loads `Sample`s, scores predictions, and aggregates per-sample results into
the numbers its paper reports. The engine (asyncbench.run) owns everything in between:
prompt building, truncation, caching, scheduling, cost.

Scoring is async because some benchmarks need the model again (100-LongBench's LLM judge,
its prior-knowledge filter); they reach it through `RunContext.generate`, which goes
through the same scheduler, limits and cache as the evaluated requests.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypedDict

from ..errors import ProviderError
from ..types import Purpose, Request, Response, Sample, SampleResult

if TYPE_CHECKING:  # numpy stays out of `asyncbench --help`
    from ..estimators.intervals import Plan


@dataclass(frozen=True)
class CliOption:
    """A benchmark's own `asyncbench run` flag, declared as data next to the benchmark
    that reads it; `commands/run.py` turns every declaration into an argparse argument
    and passes the values of the chosen benchmark's options in `LoadOptions.extra`."""

    flag: str  # "--length"
    help: str
    kind: str = "str"  # "str" | "int" | "float" | "list" (comma-separated) | "flag"
    choices: tuple[str, ...] = ()
    default: str | None = None  # given: the value is always passed (it names a method)

    @property
    def key(self) -> str:
        """The option's name in `LoadOptions.extra` (and so in the run id)."""
        return self.flag.lstrip("-").replace("-", "_")


class Scores(TypedDict, total=False):
    """What `aggregate` returns: the paper's numbers (in its scale, e.g. x100) and how
    they were made. A typed value (every key any benchmark reports, with its type), kept
    a plain mapping so run.json is the same JSON whatever reads it."""

    overall: float | None
    overall_en: float | None
    overall_zh: float | None
    # MiniLongBench: the plain means over the 237 anchors (its `overall` is the estimate)
    anchor_average: float | None
    anchor_average_en: float | None
    anchor_average_zh: float | None
    by_task: dict[str, float]
    by_category: dict[str, float]
    by_length: dict[str, Any]
    diff_16k_minus_4k: dict[str, Any]
    truncated: dict[str, int]
    n_scored: int
    n_failed: int
    estimate: dict[str, Any]  # MiniLongBench: the full-LongBench estimate
    format_errors: dict[str, int]  # BAMBOO
    detail: dict[str, dict[str, Any]]  # BAMBOO: metric parts per task
    by_task_length: dict[str, dict[str, float]]  # 100-LongBench
    overall_tasks: list[str]
    unscored: dict[str, dict[str, int]]
    prior_knowledge: dict[str, Any]
    unbuildable: dict[str, dict[str, str]]
    base_lengths: list[str]
    base_ability_from: str  # 100-LongBench: the release's base set or the paper's Eq. 1
    longscore: dict[str, Any] | None
    longscore_by_task: dict[str, dict[str, Any] | None]
    # 95% bootstrap intervals [lo, hi] of the numbers above, in their scale and tree shape
    # (overall*, by_category, by_task, by_length where the benchmark averages them)
    ci95: dict[str, Any]


# The kinds of score a benchmark's `aggregate` may report and declare in SCORE_COLUMNS;
# the report knows how to show each kind, and shows what the benchmark declares.
SCORE_KINDS: tuple[str, ...] = ("overall", "overall_en", "overall_zh", "anchor_average", "anchor_average_en",
                                "anchor_average_zh", "by_length", "diff_16k_minus_4k",
                                "longscore", "by_category", "by_task")


class Loaded(list[Sample]):
    """What `load` returns: the samples, and notes about what was read (rows skipped,
    files missing, cells that could not be built) that `prepare` reports. Benchmarks
    keep no state between calls: what one stage learns travels to the next in values."""

    def __init__(self, samples: Iterable[Sample] = (), notes: dict[str, Any] | None = None) -> None:
        super().__init__(samples)
        self.notes: dict[str, Any] = notes or {}


@dataclass
class BadRow:
    """A malformed data row left out at load: `Loaded.notes["skipped_rows"]` lists them, and
    the run's ledger books each as an "excluded" sample of the task its file holds (the
    file's stem), with the id its sample would have had and `describe()` as its reason."""

    file: str
    line: int
    error: str

    @property
    def task(self) -> str:
        return self.file.rsplit(".", 1)[0]

    @property
    def sample_id(self) -> str:
        return f"{self.task}/{self.line}"

    def describe(self) -> str:
        return f"{self.file} line {self.line}: {self.error}"


def notes_of(samples: list[Sample]) -> dict[str, Any]:
    """The load notes carried by `samples` ({} for a plain list)."""
    return samples.notes if isinstance(samples, Loaded) else {}


@dataclass
class LoadOptions:
    """What the user asked for: `--data-dir`, task selection (`longbench:hotpotqa,qasper`),
    `--limit`, and benchmark-specific flags (`--length 4k|16k|both`, `--lengths 2k,4k`)."""

    data_dir: Path | None = None
    tasks: list[str] | None = None
    limit: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunContext:
    """Handed to `Benchmark.score`/`prepare`: a way to send more requests (judge,
    no-context questions) through the engine, and the evaluated model's identity."""

    model_spec: str
    # generate(requests, purpose) -> one Response or ProviderError per request, in order.
    # purpose ("judge", "prior") keeps their tokens and cost apart in the report.
    generate: Callable[[list[Request], Purpose], Awaitable[list[Response | ProviderError]]]
    # make_request(spec, sample-like prompt/messages, max_tokens) -> Request for another model
    make_request: Callable[..., Request]
    options: dict[str, Any] = field(default_factory=dict)
    # map_chunks(fn, [args, ...]) -> [fn(*args), ...] on other machines (the Ray backend);
    # None: CPU-heavy scoring uses this machine's cores.
    map_chunks: Callable[[Callable[..., Any], list[tuple[Any, ...]]], list[Any]] | None = None


class Benchmark(Protocol):
    name: str
    # the benchmark's own `asyncbench run` flags (see CliOption)
    OPTIONS: ClassVar[tuple[CliOption, ...]]
    # which of its scores the report shows, in order (see SCORE_KINDS)
    SCORE_COLUMNS: ClassVar[tuple[str, ...]]

    def load(self, opts: LoadOptions) -> list[Sample]:
        """All samples, in a stable order. A benchmark whose `prepare` is the identity may
        also offer `iter_load(opts) -> Iterator[Sample]`: a run then sends the first
        requests while the rest of the data is still being read."""
        ...

    async def prepare(self, samples: list[Sample], ctx: RunContext) -> tuple[list[Sample], dict[str, Any]]:
        """Optional filtering before the run (default: identity). Returns kept samples and
        a report fragment (e.g. prior-knowledge exclusions)."""
        ...

    async def score(self, samples: list[Sample], predictions: list[str], ctx: RunContext) -> list[float | None]:
        """One score in [0, 1] per prediction; None where scoring itself failed."""
        ...

    def aggregate(self, results: list[SampleResult], report: dict[str, Any] | None = None) -> Scores:
        """`{"overall": float, "by_task": {task: float}, ...}` as the paper reports
        (scores in the paper's scale, e.g. x100 for LongBench). `report` is what
        `prepare` returned (exclusions, load notes), for benchmarks whose tables show it."""
        ...

    def resampling_plan(self, results: list[SampleResult]) -> Plan:
        """How `aggregate` makes its numbers from samples, for bootstrap intervals and
        paired comparisons (estimators.intervals): the strata and how they combine."""
        ...
