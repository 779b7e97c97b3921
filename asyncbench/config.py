"""RunConfig: everything a user chose for one evaluation, as one typed, frozen value, and
the one declaration of every run option.

Each run option is a field of one of RunConfig's parts (Target, Generation, Limits,
Sending, Storage, Mode), declared with `option(default, help, ...)`: its name, type,
default, help, flag, range check, whether `--resume` takes it from the command line and
whether a set file's `[[models]]` entry may set it. Everything else is made from those
declarations: `asyncbench run`'s flags (commands/run.py), the Python API's keyword
options (api.py), a set file's keys (run/eval_set.py) and the resume overrides. Adding a
run option is one field here, and its typed keyword in RunOptions for type checkers
(tests/test_run_options.py adds one in a test and follows it to every one of those
places, and checks RunOptions against the fields).

It is built once (by `asyncbench run` or the Python API) and read by planning; nothing
downstream adds to it. It holds no credentials, so it can be stored as is (`flat`).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import json
import math
import os
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypedDict, TypeVar, Union, get_args, get_origin, get_type_hints

from .errors import UserError
from .types import ApiKind, Backend, BatchFallback, PromptCacheMode, StreamMode

# The most requests in flight per endpoint: far above any provider's useful concurrency,
# low enough that a typo (1000000) cannot exhaust memory on queues and sockets.
MAX_CONCURRENCY = 4096

# A run option's value, as RunConfig holds it.
OptionValue = str | int | float | bool | tuple[str, ...] | None
# A range or form check: (the option as the user names it, the value) -> None or UserError.
Check = Callable[[str, object], None]

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T")
P = TypeVar("P")


def number(low: float, high: float = math.inf, *, low_open: bool = False) -> Check:
    """A finite number from `low` (excluded with `low_open`) to `high`; None passes (an
    optional option not given)."""

    def check(where: str, value: object) -> None:
        if value is None:
            return
        ok = (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
              and (value > low if low_open else value >= low) and value <= high)
        if not ok:
            bound = f"greater than {low:g}" if low_open else f"at least {low:g}"
            upper = f" and at most {high:g}" if math.isfinite(high) else ""
            raise UserError(f"{where} must be a finite number {bound}{upper} (got {value!r})")

    return check


def whole(low: int, high: int) -> Check:
    """A whole number from `low` to `high`; None passes (an optional option not given)."""

    def check(where: str, value: object) -> None:
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise UserError(f"{where} must be a whole number from {low:,} to {high:,} (got {value!r})")

    return check


def endpoint_urls(where: str, value: object) -> None:
    """Every URL of a list is an endpoint's base URL (urls.py says what is wrong)."""
    from .urls import validate_base_url

    for url in value if isinstance(value, tuple) else ():
        validate_base_url(url, where)


@dataclass(frozen=True)
class Opt:
    """How a run option is given, beside its name, type and default (the field's)."""

    help: str | None  # the flag's --help text (None: none, as --temperature)
    flag: str | None = None  # the CLI flag; default: --the-name-with-dashes
    metavar: str | None = None
    check: Check | None = None  # the range or form a value must have
    resume: bool = False  # `--resume`: the command line's value replaces the stored one
    per_model: bool = False  # a set file's [[models]] entry may set it for its model alone
    set_file: bool = True  # a set file's [options] may set it
    path: bool = False  # a file or folder: the Python API also takes a path object
    off_flag: str | None = None  # a yes/no/unset option's flag for "no" (--no-progress)
    off_help: str | None = None


_OPT = "asyncbench.option"


def option(default: T, help: str | None, *, flag: str | None = None, metavar: str | None = None,
           check: Check | None = None, resume: bool = False, per_model: bool = False, set_file: bool = True,
           path: bool = False, off_flag: str | None = None, off_help: str | None = None) -> T:
    """A run option: a dataclass field of one of RunConfig's parts, with its Opt."""
    how = Opt(help, flag, metavar, check, resume, per_model, set_file, path, off_flag, off_help)
    return field(default=default, metadata={_OPT: how})


@dataclass(frozen=True)
class Target:
    """What is evaluated and where it is served: the endpoints, their API and identity,
    the judge."""

    base_urls: tuple[str, ...] = option((), "endpoint URL; repeat for a pool of replicas", flag="--base-url",
                                        per_model=True, check=endpoint_urls)
    endpoint_id: str | None = option(None, "cache identity of the endpoint(s) (default: the sorted URLs)",
                                     per_model=True)
    api: ApiKind = option("chat", "chat (default) or completion endpoint for base models", per_model=True)
    # LongBench pred.py's name for the served model (official_models.py)
    official_model: str | None = option(
        None, "LongBench: the served model is pred.py's NAME (model2maxlen.json, e.g. llama2-7b-chat-4k): its "
              "budget, build_chat text and cut (default: found from the server's /info or /v1/models)",
        metavar="NAME", per_model=True)
    judge: str | None = option(None, "judge model spec for LLM-as-judge benchmarks", per_model=True)
    judge_base_urls: tuple[str, ...] = option((), None, flag="--judge-base-url", per_model=True, check=endpoint_urls)


@dataclass(frozen=True)
class Generation:
    """How each sample becomes a request: the prompt's cut and tokenizer, the sampling
    settings, how the request is sent."""

    max_input_tokens: int | None = option(None, "truncate prompts in the middle to this many tokens",
                                          per_model=True, check=whole(1, 10**8))
    tokenizer: str | None = option(None, "tokenizer for truncation: cl100k_base, o200k_base, hf:REPO, or a "
                                         "model's tokenizer.json (file or folder)", per_model=True)
    temperature: float = option(0.0, None, check=number(0.0, 2.0))
    repeat: int = option(0, "repeat index (a new cache key for a new sample)", check=whole(0, 1_000_000))
    # "auto": mark shared prompt prefixes for the provider's cache
    prompt_cache: PromptCacheMode = option(
        "auto", "auto (default): prompts sharing a long prefix (a context several questions ask about) mark it "
                "for the provider's prompt cache (Anthropic cache_control, OpenAI prompt_cache_key): cached input "
                "costs 10-50%%; off: send prompts unmarked", resume=True)
    # "on": live answers streamed where the provider streams, and timed
    stream: StreamMode = option(
        "on", "on (default): live answers are streamed where the provider streams, which times each one (time "
              "to first token, time per output token: the summary and report show their percentiles by context "
              "length); the answer, usage and cache key are those of the unstreamed request. off: answers come "
              "whole (no TTFT)", resume=True)


@dataclass(frozen=True)
class Limits:
    """How much is sent and how fast: samples, requests in flight, rates, the budget, and
    how long and how often one request is tried."""

    limit: int | None = option(None, "run the first N samples of each task only", check=whole(1, 10**9))
    concurrency: int = option(32, "max in-flight requests per endpoint (default 32, at most 4096)", per_model=True,
                              check=whole(1, MAX_CONCURRENCY))
    rpm: float | None = option(None, "requests per minute limit of the endpoint group", per_model=True,
                               check=number(0.0, low_open=True))
    tpm: float | None = option(None, "tokens per minute limit (prompt + max_tokens per request)", per_model=True,
                               check=number(0.0, low_open=True))
    max_cost: float | None = option(None, "stop issuing requests before spend passes USD", metavar="USD",
                                    check=number(0.0))
    timeout_s: float = option(120.0, "per-request timeout, s", flag="--timeout", per_model=True,
                              check=number(0.0, low_open=True))
    max_attempts: int = option(6, "attempts per request for transient failures", per_model=True,
                               check=whole(1, 100))
    # providers/bounded.py: an answer's body, decoded (DEFAULT_MAX_RESPONSE_BYTES)
    max_response_bytes: int = option(4 * 1024 * 1024, "refuse an answer whose (decoded) body is over N bytes "
                                                      "(default 4 MiB)", metavar="N", resume=True,
                                     check=whole(1024, 2**40))


@dataclass(frozen=True)
class Sending:
    """Where requests are sent from: this process, Ray workers, or a provider's batch API."""

    backend: Backend = option("local", "local (default): this process; ray: requests and scoring on Ray workers",
                              resume=True)
    ray_address: str | None = option(None, "Ray cluster: auto | HOST:PORT | ray://HOST:10001 (default: "
                                           "$RAY_ADDRESS, else start a local one)", resume=True)
    ray_workers: int = option(2, "generation workers with --backend ray (default 2)", resume=True,
                              check=whole(1, 1024))
    # drivers sharing one limiter by this name (runners/ray_shared.py)
    ray_shared_limiter: str | None = option(
        None, "with --backend ray: one RPM/TPM limiter shared by every run on the cluster that names it (same "
              "model, endpoints and key); the last run to end removes it", metavar="NAME", resume=True)
    # through the provider's batch API (runners/batch.py)
    batch: bool = option(False, "send uncached requests through the provider's batch API (OpenAI, Anthropic): "
                                "half price, results within 24 h; an interrupted run is re-attached by the same "
                                "command", resume=True)
    # --batch: submit, collect what has ended, and exit
    no_wait: bool = option(False, "with --batch: submit the batches and exit (exit 3, partial); the same command "
                                  "later collects the results", resume=True)
    # requests a batch did not answer: in the next one, or live
    batch_fallback: BatchFallback = option(
        "batch", "requests a batch did not answer (expired, server error): in the next batch (default) or live at "
                 "list price", resume=True)


@dataclass(frozen=True)
class Storage:
    """Where a run reads and writes: the data, the cache, its output folder, the prices."""

    data_dir: str | None = option(None, "benchmark data directory (default: $ASYNCBENCH_DATA_DIR, else the hub)",
                                  path=True)
    cache: str | None = option(None, "DuckDB cache file (default: ~/.cache/asyncbench/cache.duckdb)", path=True,
                               resume=True)
    out: str | None = option(None, "output directory for run.json (default: runs/RUN_ID; runs/RUN_ID-CACHE with "
                                   "a --cache other than the default)", path=True)
    prices: str | None = option(None, "price file overriding the shipped table", path=True)


@dataclass(frozen=True)
class Mode:
    """How this invocation behaves, never what a run computes: price it only, show progress."""

    dry_run: bool = option(False, "print requests, tokens and cost (each exact or an upper bound; answers, "
                                  "judge and prior calls in the cache are free); send nothing")
    progress: bool | None = option(None, "show the progress bar also when stderr is not a terminal (CI logs)",
                                   resume=True, off_flag="--no-progress",
                                   off_help="no progress bar (default: shown on a terminal only)")


class RunOptions(TypedDict, total=False):
    """The run options as the Python API's keywords (`asyncbench.evaluate(..., max_cost=5)`),
    for type checkers: PEP 692 types `**options` only by a TypedDict written out. What
    `evaluate` accepts and checks is made from the parts above; tests/test_run_options.py
    checks each line here says what its field says (a list as any sequence, a path as
    text or a Path, None by leaving it out)."""

    # Target
    base_urls: Sequence[str]
    endpoint_id: str
    api: ApiKind
    official_model: str
    judge: str
    judge_base_urls: Sequence[str]
    # Generation
    max_input_tokens: int
    tokenizer: str
    temperature: float
    repeat: int
    prompt_cache: PromptCacheMode
    stream: StreamMode
    # Limits
    limit: int
    concurrency: int
    rpm: float
    tpm: float
    max_cost: float
    timeout_s: float
    max_attempts: int
    max_response_bytes: int
    # Sending
    backend: Backend
    ray_address: str
    ray_workers: int
    ray_shared_limiter: str
    batch: bool
    no_wait: bool
    batch_fallback: BatchFallback
    # Storage
    data_dir: str | Path
    cache: str | Path
    out: str | Path
    prices: str | Path
    # Mode
    dry_run: bool
    progress: bool


# RunConfig's parts by attribute, in the order their options are listed. A test may put a
# subclass of a part here (one with an option more): everything below reads this table.
PARTS: dict[str, type[DataclassInstance]] = {
    "target": Target, "generation": Generation, "limits": Limits, "sending": Sending, "storage": Storage,
    "mode": Mode}


class Kind(enum.Enum):
    """What a run option's type takes (from its annotation): how it is parsed and checked."""

    TEXT = "text"
    BOOL = "true or false"
    INT = "a whole number"
    FLOAT = "a number"
    LIST = "a list of text values"
    CHOICE = "one of its choices"


@dataclass(frozen=True)
class Shape:
    """A run option's type, read from its annotation."""

    kind: Kind
    optional: bool  # None is a value (the option not given)
    choices: tuple[str, ...] = ()  # a Literal's values


@dataclass(frozen=True)
class RunOption:
    """One run option, as its part declares it: name, type, default and how it is given."""

    name: str
    part: str  # RunConfig's attribute holding it ("limits")
    hint: object  # its type (int | None, ApiKind, tuple[str, ...])
    default: OptionValue
    how: Opt

    @property
    def flag(self) -> str:
        return self.how.flag or "--" + self.name.replace("_", "-")

    @property
    def shape(self) -> Shape:
        return _shape(self.hint)

    def coerce(self, value: object) -> object:
        """A value as given (the Python API, a set file, argparse, a stored run) as the run
        holds it: paths as text, lists as tuples (one text alone is a list of one). Anything
        else is left for `check` to name."""
        if self.how.path and isinstance(value, os.PathLike):
            return os.fspath(value)
        if self.shape.kind is Kind.LIST:
            if isinstance(value, str):
                return (value,)
            if isinstance(value, (list, tuple)):
                return tuple(value)
        return value

    def check(self, value: object) -> None:
        """`value` is of the option's type and in its range, or one UserError naming the
        option, what it takes and what it got."""
        shape = self.shape
        # numbers: their range check says the type too ("a whole number from 1 to 4,096")
        if not (value is None and shape.optional) and shape.kind not in (Kind.INT, Kind.FLOAT):
            if shape.kind is Kind.LIST:
                ok = isinstance(value, tuple) and all(isinstance(v, str) for v in value)
            elif shape.kind is Kind.BOOL:
                ok = isinstance(value, bool)
            else:
                ok = isinstance(value, str)
            if not ok:
                want = Kind.TEXT.value if shape.kind is Kind.CHOICE else shape.kind.value
                shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
                raise UserError(f"{self.flag} must be {want} (got {shown})")
            if shape.kind is Kind.CHOICE and value not in shape.choices:
                raise UserError(f"{self.flag} must be one of {', '.join(shape.choices)} (got {value!r})")
        if self.how.check is not None:
            self.how.check(self.flag, value)


def _shape(hint: object) -> Shape:
    optional = False
    if get_origin(hint) in (Union, types.UnionType):
        args = [a for a in get_args(hint) if a is not type(None)]
        optional = len(args) < len(get_args(hint))
        hint = args[0] if len(args) == 1 else hint
    if get_origin(hint) is Literal:
        return Shape(Kind.CHOICE, optional, tuple(str(a) for a in get_args(hint)))
    if get_origin(hint) is tuple:
        return Shape(Kind.LIST, optional)
    kinds: dict[object, Kind] = {bool: Kind.BOOL, int: Kind.INT, float: Kind.FLOAT, str: Kind.TEXT}
    if hint not in kinds:
        raise TypeError(f"a run option's type is text, a yes/no, a number, a choice or a tuple of text: {hint}")
    return Shape(kinds[hint], optional)


@functools.cache
def _part_options(part: str, cls: type[DataclassInstance]) -> tuple[RunOption, ...]:
    hints = get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        how = f.metadata.get(_OPT)
        if not isinstance(how, Opt):
            raise TypeError(f"{cls.__name__}.{f.name} is not declared with option()")
        default: OptionValue = f.default  # type: ignore[assignment]  # option() always gives a default
        out.append(RunOption(f.name, part, hints[f.name], default, how))
    return tuple(out)


def run_options() -> dict[str, RunOption]:
    """Every run option by name, part by part in PARTS' order."""
    return {o.name: o for part, cls in PARTS.items() for o in _part_options(part, cls)}


def run_values(given: Mapping[str, object]) -> dict[str, object]:
    """The run options among keyword options (the Python API's, a set file's, argparse's),
    as RunConfig holds them (`RunOption.coerce`); other keys are left out."""
    options = run_options()
    return {k: options[k].coerce(v) for k, v in given.items() if k in options}


# `--model sim`: the built-in simulator, started by the command that runs (never by the
# run path itself, which is handed its base URL).
SIM = "sim"


def auto_model(model: str) -> str:
    """`auto`: a real API when its key is set, else the simulator; any other name as is."""
    if model != "auto":
        return model
    if os.environ.get("OPENAI_API_KEY"):
        return "openai:gpt-4o-mini"
    if os.environ.get("ANTHROPIC_API_KEY"):
        return "anthropic:claude-haiku-4-5"
    return SIM


# The keys of a stored run's configuration (`flat`) that are not run options.
_NOT_OPTIONS = ("benchmark", "model", "extra")


@dataclass(frozen=True)
class RunConfig:
    """One evaluation as the user chose it: the benchmark, the model, the run options in
    their parts, and the benchmark's own options (`extra`, as it declares them)."""

    benchmark: str
    model: str
    target: Target = Target()
    generation: Generation = Generation()
    limits: Limits = Limits()
    sending: Sending = Sending()
    storage: Storage = Storage()
    mode: Mode = Mode()
    extra: Mapping[str, object] = field(default_factory=dict)

    @classmethod
    def build(cls, benchmark: str, model: str, values: Mapping[str, object] | None = None,
              extra: Mapping[str, object] | None = None) -> RunConfig:
        """A config from run options by name (anything a caller gives: `coerce`d here,
        checked by `validate`); an unknown name is a TypeError (callers name unknown
        options to the user first)."""
        unknown = sorted(set(values or {}) - set(run_options()))
        if unknown:
            raise TypeError(f"not a run option: {unknown[0]}")
        given = run_values(values or {})
        parts: dict[str, object] = {}
        for part, part_cls in PARTS.items():
            names = {o.name for o in _part_options(part, part_cls)}
            parts[part] = dataclasses.replace(part_cls(), **{k: v for k, v in given.items() if k in names})
        return cls(benchmark, model, _of(Target, parts["target"]), _of(Generation, parts["generation"]),
                   _of(Limits, parts["limits"]), _of(Sending, parts["sending"]), _of(Storage, parts["storage"]),
                   _of(Mode, parts["mode"]), dict(extra or {}))

    @classmethod
    def from_stored(cls, stored: Mapping[str, object], overrides: Mapping[str, object]) -> RunConfig:
        """A stored run's config (`flat`, as run/plan.py stored it) with `overrides`: the
        command line's values of the options `--resume` takes from it (Opt.resume)."""
        options = run_options()
        unknown = sorted(k for k in stored if k not in options and k not in _NOT_OPTIONS and k != "resolved_model")
        benchmark, model, extra = stored.get("benchmark"), stored.get("model"), stored.get("extra") or {}
        if unknown or not isinstance(benchmark, str) or not isinstance(model, str) or not isinstance(extra, dict):
            raise UserError(f"the stored settings of this run are not this version's ({unknown[0] if unknown else 'benchmark'}); "
                            "run its command again instead")
        values = {k: v for k, v in stored.items() if k in options}
        values.update({k: v for k, v in overrides.items() if k in options and options[k].how.resume})
        return cls.build(benchmark, model, values, extra)

    def option(self, name: str) -> object:
        """A run option's value by name (the generic readers: flat, run id, resume)."""
        return getattr(getattr(self, run_options()[name].part), name)

    def flat(self) -> dict[str, object]:
        """Every option by name beside benchmark, model and extra: how a run's config is
        stored (run/plan.py public_config) and read back by `--resume` (from_stored)."""
        return {"benchmark": self.benchmark, "model": self.model,
                **{name: self.option(name) for name in run_options()}, "extra": dict(self.extra)}

    def validate(self) -> RunConfig:
        """Every option of its type and in its range, or one UserError naming the option.
        Called once, where a config is made (the CLI, the Python API, planning)."""
        if not isinstance(self.model, str):
            raise UserError(f"the model must be text (got {self.model!r:.60})")
        for opt in _checked_order():
            opt.check(self.option(opt.name))
        if self.sending.ray_shared_limiter is not None and self.sending.backend != "ray":
            raise UserError("--ray-shared-limiter goes with --backend ray (drivers on one Ray cluster share it)")
        if self.sending.no_wait and not self.sending.batch:
            raise UserError("--no-wait goes with --batch (submit the batches and exit)")
        return self

    def uses_sim(self) -> bool:
        """Whether the model or the judge is the built-in simulator (`sim`, or `auto`
        without an API key): the command that runs starts it (sim/testing.py)."""
        judge = self.target.judge
        return SIM in (auto_model(self.model), auto_model(judge) if judge else None)

    def run_id(self, endpoint_id: str, data: str, model: str | None = None, judge: str | None = None) -> str:
        """Stable over what changes results — settings, endpoint identity and `data` (a hash
        of the samples' content, so an edited file is a new run); blind to limits,
        concurrency, paths and keys. `model` and `judge` are the resolved models
        (provider:model): `--model auto` and `--model sim` that resolve to the same server
        and model are one run."""
        ident: dict[str, object] = {
            "benchmark": self.benchmark, "model": model or self.model, "api": self.target.api,
            "limit": self.limits.limit, "max_input_tokens": self.generation.max_input_tokens,
            "tokenizer": self.generation.tokenizer, "temperature": self.generation.temperature,
            "repeat": self.generation.repeat, "judge": judge or self.target.judge, "extra": dict(self.extra)}
        if self.target.official_model:  # only when set: older runs keep their ids
            ident["official_model"] = self.target.official_model
        ident["endpoint"] = endpoint_id
        ident["data"] = data
        blob = json.dumps(ident, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]


def _of(kind: type[P], value: object) -> P:
    """A part as RunConfig types it (PARTS may hold a subclass, as a test's)."""
    if not isinstance(value, kind):
        raise TypeError(f"PARTS holds a {type(value).__name__} where a {kind.__name__} goes")
    return value


def _checked_order() -> Iterator[RunOption]:
    """The options, those checked by type alone first (text, yes/no, lists: a wrong type
    there is the likelier mistake), then the ranges."""
    options = list(run_options().values())
    yield from (o for o in options if o.how.check is None)
    yield from (o for o in options if o.how.check is not None)
