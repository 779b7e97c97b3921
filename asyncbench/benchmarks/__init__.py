"""Benchmark registry: `NAME[:task,task]` -> a Benchmark (see base.py).

`benchmark_classes()` is the one list of benchmarks: the CLI's benchmark flags,
`asyncbench.evaluate`'s benchmark options, spec parsing and the report (score types) all
read it. Adding a benchmark is a subclass of `base.Benchmark` and one line there, or, for
a benchmark that lives outside the package (a plugin, a test), `register(name, cls)`.
Importing this package registers the benchmarks' own metrics in the metric registry."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from ..errors import UserError, did_you_mean
from .bamboo import metrics as _bamboo_metrics  # noqa: F401  registers bamboo_<dataset> in the metric registry
from .base import Benchmark, CliOption
from .longbench import metrics as _longbench_metrics  # noqa: F401  registers LongBench's metrics (jsonl: uses them)
from .scores import ScoreSet

# Benchmarks registered from outside the package (`register`), by name.
_REGISTERED: dict[str, type[Benchmark]] = {}


def _built_in() -> dict[str, type[Benchmark]]:
    from .bamboo.benchmark import BambooBenchmark
    from .jsonl import JsonlBenchmark
    from .longbench.benchmark import LongBench, LongBenchE, MiniLongBench
    from .longbench100.benchmark import LongBench100

    return {"longbench": LongBench, "longbench-e": LongBenchE, "minilongbench": MiniLongBench,
            "bamboo": BambooBenchmark, "100-longbench": LongBench100, "jsonl": JsonlBenchmark}


def benchmark_classes() -> dict[str, type[Benchmark]]:
    """Every benchmark class by the name its spec starts with (imported on first use, so
    `asyncbench --help` stays fast), the registered ones after the built-in ones. `jsonl`
    takes a path (`jsonl:PATH`), not tasks."""
    return {**_built_in(), **_REGISTERED}


def register(name: str, cls: type[Benchmark]) -> Callable[[], None]:
    """Add a benchmark defined outside this package under `name` (the first part of its
    spec): from then on the CLI, `asyncbench.evaluate` and runs know it as they know the
    built-in ones. Returns what removes it again. A name already taken is an error."""
    if name in _built_in() or name in _REGISTERED or not name or ":" in name:
        raise UserError(f"cannot register a benchmark as {name!r}: the name is taken or not a plain name")
    _REGISTERED[name] = cls

    def unregister() -> None:
        _REGISTERED.pop(name, None)

    return unregister


def variants() -> dict[str, dict[str, type[Benchmark]]]:
    """A benchmark's variants by the flag option that selects one: `longbench --adaptive`
    is the adaptive test of LongBench (same options, scores and data)."""
    from .longbench.adaptive import AdaptiveLongBench

    return {"longbench": {"adaptive": AdaptiveLongBench}}


def names() -> tuple[str, ...]:
    """The registered benchmarks' names (`jsonl:PATH` aside)."""
    return tuple(n for n in benchmark_classes() if n != "jsonl")


def score_type(spec: str) -> type[ScoreSet]:
    """The score type of a run's benchmark spec or family (the generic one if unknown)."""
    cls = benchmark_classes().get(family_of(spec))
    return cls.SCORES if cls is not None else ScoreSet


def family_of(spec: str) -> str:
    """The registry name a spec starts with: `longbench:hotpotqa` -> longbench."""
    return spec.partition(":")[0]


def _option_value(opt: CliOption, value: object) -> object:
    """A given option's value as the run records it: a list option takes a list or a
    comma-separated string; a choice must be one of its choices."""
    if opt.kind == "list":
        if isinstance(value, str):
            return [x.strip() for x in value.split(",") if x.strip()]
        if not isinstance(value, Iterable):
            raise TypeError(f"{type(value).__name__!r} object is not iterable")
        return list(value)
    if opt.choices and value not in opt.choices:
        raise UserError(f"{opt.flag} must be one of {', '.join(opt.choices)} (got {value!r})")
    return value


def _given(value: object) -> bool:
    return value is not None and value is not False


def benchmark_options(benchmark: str, given: Mapping[str, object], model: str,
                      tokenizer: str | None = None) -> dict[str, object]:
    """The options the chosen benchmark reads (`LoadOptions.extra`, part of the run id),
    from values keyed by option name (`CliOption.key`; None or False: not given), as the
    CLI and the Python API both pass them. Another benchmark's option is an error (it
    would do nothing)."""
    classes = benchmark_classes()
    family = family_of(benchmark)
    chosen = classes.get(family)
    mine = chosen.OPTIONS if chosen else ()
    keys = {opt.key for opt in mine}
    for name, cls in classes.items():
        for opt in cls.OPTIONS:
            if opt.key not in keys and _given(given.get(opt.key)):
                raise UserError(f"{opt.flag} is a {name} option; {family} does not use it")
    extra: dict[str, object] = {}
    for opt in mine:
        value = given.get(opt.key) if _given(given.get(opt.key)) else opt.default
        if value is not None:
            extra[opt.key] = _option_value(opt, value)
    return chosen.finish_options(extra, model, tokenizer) if chosen else extra


def all_options() -> dict[str, CliOption]:
    """Every benchmark option by its key (the CLI's flags, the Python API's keywords)."""
    return {opt.key: opt for cls in benchmark_classes().values() for opt in cls.OPTIONS}


def option_keys() -> dict[str, str]:
    """Every benchmark option's key -> its flag (the Python API's keyword arguments)."""
    return {key: opt.flag for key, opt in all_options().items()}


def parse_benchmark(spec: str, extra: Mapping[str, object] | None = None,
                    data_dir: Path | None = None) -> tuple[Benchmark, list[str] | None]:
    """`longbench:hotpotqa,qasper` -> (LongBench(), ["hotpotqa", "qasper"]); `jsonl:PATH`."""
    name, _, rest = spec.partition(":")
    cls = benchmark_classes().get(name)
    if cls is None:
        known = names()
        raise UserError(f"unknown benchmark {name!r}{did_you_mean(name, known)}: use one of {', '.join(known)}, "
                        "or jsonl:PATH for your own data")
    given = extra or {}
    cls = next((v for flag, v in variants().get(name, {}).items() if given.get(flag)), cls)
    return cls.from_spec(rest, given, data_dir)
