"""The contract between a benchmark and the run engine.

A benchmark loads `Sample`s, scores predictions, and aggregates per-sample results into
the numbers its paper reports. The engine (asyncbench.run) owns everything in between:
prompt building, truncation, caching, scheduling, cost.

Scoring is async because some benchmarks need the model again (100-LongBench's LLM judge,
its prior-knowledge filter); they reach it through `RunContext.generate`, which goes
through the same scheduler, limits and cache as the evaluated requests.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypedDict

from ..errors import ProviderError
from ..prompt_rules import PromptRules
from ..types import Purpose, Request, Response, Sample, SampleResult, SampleScore
from .scores import ScoreSet

if TYPE_CHECKING:  # numpy stays out of `asyncbench --help`
    from ..estimators.intervals import Plan


@dataclass(frozen=True)
class CliOption:
    """A benchmark's own `asyncbench run` flag, declared as data next to the benchmark
    that reads it; `commands/run.py` turns every declaration into an argparse argument
    and passes the values of the chosen benchmark's options in `LoadOptions.extra`."""

    flag: str  # "--length"
    help: str
    kind: Literal["str", "int", "float", "list", "flag"] = "str"  # list: comma-separated
    choices: tuple[str, ...] = ()
    default: str | None = None  # given: the value is always passed (it names a method)

    @property
    def key(self) -> str:
        """The option's name in `LoadOptions.extra` (and so in the run id)."""
        return self.flag.lstrip("-").replace("-", "_")


# One adaptive round: the samples asked, what the engine made of their requests, their results.
Round = tuple[list[Sample], object, list[SampleResult]]
Ask = Callable[[list[Sample]], Awaitable[tuple[object, list[SampleResult]]]]


class Loaded(list[Sample]):
    """What `load` returns: the samples, and notes about what was read (rows skipped,
    files missing, cells that could not be built) that `prepare` reports. Benchmarks
    keep no state between calls: what one stage learns travels to the next in values."""

    def __init__(self, samples: Iterable[Sample] = (), notes: LoadNotes | None = None) -> None:
        super().__init__(samples)
        self.notes: LoadNotes = notes or {}


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


class LoadNotes(TypedDict, total=False):
    """What a load noticed, for `prepare` to report: malformed rows left out (each booked
    as an excluded sample), task files not in the data, cells no source could fill (by
    task, then length: why), and how lengths were measured."""

    skipped_rows: list[BadRow]
    missing: list[str]
    unbuildable: dict[str, dict[str, str]]
    lengths: dict[str, str | bool]


def notes_of(samples: list[Sample]) -> LoadNotes:
    """The load notes carried by `samples` ({} for a plain list)."""
    return samples.notes if isinstance(samples, Loaded) else {}


@dataclass
class Generating:
    """A GENERATES benchmark's samples (100-LongBench's generator): each is built by CPU
    work (up to a fraction of a second) only when taken, so planning can show progress,
    stop at a Ctrl-C between two samples, and a dry run can price them as they come,
    keeping none. Known before the first is built: how many, a line saying what, and the
    load notes (cells no source can fill)."""

    total: int
    what: str  # "7,200 samples: 8 tasks x 9 lengths x 100 rows"
    samples: Iterator[Sample]
    # A run's way in (memory flat in the samples' number): `prepare` reads the `heads`
    # (every sample without its prompt, drawn building nothing), then the samples it kept
    # are built, as the engine takes them, by `select` (given which ids to build).
    heads: Callable[[], Iterator[Sample]]
    select: Callable[[Callable[[str], bool]], Iterator[Sample]]
    notes: LoadNotes = field(default_factory=lambda: LoadNotes())
    fingerprint: str = ""  # what the samples are built from, hashed: the run id's data identity


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


class Benchmark(ABC):
    """A benchmark: `load`, `score`, `aggregate` and `resampling_plan` are required; every
    other capability is optional, declared here with its default so the engine asks the
    benchmark (never `hasattr`) whether it has it. Register a new benchmark in
    `benchmarks/__init__.py`'s `benchmark_classes()` (the only list of benchmarks)."""

    name: str
    # the benchmark's own `asyncbench run` flags (see CliOption); the CLI's flags and
    # `asyncbench.evaluate`'s keyword options are these declarations
    OPTIONS: ClassVar[tuple[CliOption, ...]] = ()
    # its scores' type: which the report shows and how (scores.py)
    SCORES: ClassVar[type[ScoreSet]] = ScoreSet
    # how its samples become requests and its answers predictions (prompt budget table,
    # official open-model prompts, stops, post-processing, release requests): one value
    # that planning and prompting read (asyncbench/prompt_rules/rules.py)
    RULES: ClassVar[PromptRules] = PromptRules()
    # `iter_load` streams: a run sends the first requests while the rest is being read
    # (only where `prepare` is the identity); `fingerprint` then names the data
    STREAMS: ClassVar[bool] = False
    # the benchmark chooses each batch of samples itself (`administer`: adaptive testing)
    ADAPTIVE: ClassVar[bool] = False
    # its scores depend on more than the answers and the samples (a sandbox running the
    # model's programs): a re-run of a complete run scores again instead of reusing them
    RESCORES: ClassVar[bool] = False
    # its samples are built by CPU work when taken (`generate`), named in the run id by
    # `fingerprint` (what they are built from), not by their digest
    GENERATES: ClassVar[bool] = False

    @classmethod
    def from_spec(cls, rest: str, extra: Mapping[str, object], data_dir: Path | None) -> tuple[Benchmark, list[str] | None]:
        """The benchmark for `NAME:REST` (REST: a comma-separated task selection) and the
        run's options (`benchmark_options`' result)."""
        return cls.configured(extra, data_dir), [t.strip() for t in rest.split(",") if t.strip()] or None

    @classmethod
    def configured(cls, extra: Mapping[str, object], data_dir: Path | None) -> Benchmark:
        """An instance for the run's options and data directory (default: no configuration)."""
        return cls()

    @classmethod
    def finish_options(cls, extra: dict[str, object], model: str, tokenizer: str | None) -> dict[str, object]:
        """The options as the run id records them, after anything derived from the model."""
        return extra

    @abstractmethod
    def load(self, opts: LoadOptions) -> list[Sample]:
        """All samples, in a stable order."""

    def iter_load(self, opts: LoadOptions) -> Iterator[Sample]:
        """The samples one at a time (STREAMS benchmarks read their file lazily)."""
        return iter(self.load(opts))

    def generate(self, opts: LoadOptions, say: Callable[[str], None]) -> Generating:
        """GENERATES benchmarks: the samples to be built, one at a time (see Generating);
        `say` prints a line for the user before any slow preparation (reading sources)."""
        raise NotImplementedError(f"{self.name} loads its samples whole")

    def needs_judge(self, tasks: list[str] | None) -> str | None:
        """Why a run of `tasks` (None: all) cannot score without --judge, in one line for
        the user; None when its scores need no judge. Asked at planning, before any sample
        is loaded or any run is recorded."""
        return None

    def fingerprint(self) -> str:
        """What names a streamed benchmark's data in the run id (its file's hash); "" for
        benchmarks whose loaded samples are hashed instead."""
        return ""

    async def prepare(self, samples: list[Sample], ctx: RunContext) -> tuple[list[Sample], dict[str, object]]:
        """Optional filtering before the run (default: identity). Returns kept samples and
        a report fragment (e.g. prior-knowledge exclusions)."""
        return samples, {}

    @abstractmethod
    async def score(self, samples: list[Sample], predictions: list[str], ctx: RunContext) -> list[SampleScore]:
        """One SampleScore per prediction: its value in [0, 1] and what the metric read of
        it (parsed answer, judge calls, verdict); `error` where scoring itself failed.
        Samples are read, never written (their meta is the loader's)."""

    def length_bin(self, meta: Mapping[str, object]) -> str | None:
        """The context-length bin the benchmark reports a sample's score in, from its meta
        (LongBench-E 0-4k/4-8k/8k+, BAMBOO 4k/16k, 100-LongBench's lengths): how the run's
        serving latency is broken down (serving.py). None: no bins of its own (the
        latency is then broken down by deciles of prompt tokens)."""
        return None

    @abstractmethod
    def aggregate(self, results: list[SampleResult], report: dict[str, object] | None = None) -> ScoreSet:
        """The numbers as the paper reports them (`overall`, `by_task`, ..., in the paper's
        scale, e.g. x100 for LongBench), as the benchmark's own score type (`SCORES`,
        whose TypedDict declares its keys). `report` is what `prepare` returned
        (exclusions, load notes), for benchmarks whose tables show it."""

    @abstractmethod
    def resampling_plan(self, results: list[SampleResult]) -> Plan:
        """How `aggregate` makes its numbers from samples, for bootstrap intervals and
        paired comparisons (estimators.intervals): the strata and how they combine."""

    def planned_calls(self, samples: list[Sample], count: Callable[[str], int]) -> dict[str, tuple[int, int, int]]:
        """The dry run's estimate of extra model calls by purpose (judge, prior): (calls,
        input tokens, output tokens); {} when scoring sends none."""
        return {}

    async def administer(self, samples: list[Sample], ask: Ask) -> tuple[list[Round], dict[str, Any]]:
        """ADAPTIVE benchmarks: ask batches of `samples` through `ask` until done; the
        rounds asked and a report fragment."""
        raise NotImplementedError(f"{self.name} is not adaptive")
