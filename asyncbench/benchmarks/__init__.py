"""Benchmark registry: `NAME[:task,task]` -> a Benchmark (see base.py)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import UserError, did_you_mean
from .base import Benchmark

# options that only mean something with --adaptive
ADAPTIVE_ONLY = ("target_se", "adaptive_batch", "adaptive_start", "adaptive_max_samples")

NAMES = ("longbench", "longbench-e", "minilongbench", "bamboo", "100-longbench")


def benchmark_classes() -> dict[str, type[Benchmark]]:
    """Every benchmark class by its name (for the CLI's benchmark-specific flags)."""
    from .bamboo.benchmark import BambooBenchmark
    from .jsonl import JsonlBenchmark
    from .longbench.benchmark import LongBench, LongBenchE, MiniLongBench
    from .longbench100.benchmark import LongBench100

    classes: list[type[Benchmark]] = [LongBench, LongBenchE, MiniLongBench, BambooBenchmark, LongBench100]
    found = {str(cls.name): cls for cls in classes}
    found["jsonl"] = JsonlBenchmark
    return found


def benchmark_options(benchmark: str, given: Mapping[str, Any], model: str,
                      tokenizer: str | None = None) -> dict[str, Any]:
    """The options the chosen benchmark reads (`LoadOptions.extra`, part of the run id),
    from values keyed by option name (`CliOption.key`; None or False: not given), as the
    CLI and the Python API both pass them. Another benchmark's option is an error (it
    would do nothing); a list option takes a list or a comma-separated string."""
    classes = benchmark_classes()
    family = "jsonl" if benchmark.startswith("jsonl:") else benchmark.partition(":")[0]
    chosen = classes.get(family)
    mine = {opt.key for opt in chosen.OPTIONS} if chosen else set()
    for name, cls in classes.items():
        for opt in cls.OPTIONS:
            if opt.key not in mine and given.get(opt.key) not in (None, False):
                raise UserError(f"{opt.flag} is a {name} option; {family} does not use it")
    extra: dict[str, Any] = {}
    for opt in chosen.OPTIONS if chosen else ():
        value = given.get(opt.key)
        if value is None or value is False:
            if opt.default is None:
                continue
            value = opt.default
        if opt.kind == "list":
            value = [x.strip() for x in value.split(",") if x.strip()] if isinstance(value, str) else list(value)
        elif opt.choices and value not in opt.choices:
            raise UserError(f"{opt.flag} must be one of {', '.join(opt.choices)} (got {value!r})")
        extra[opt.key] = value
    if family == "100-longbench":
        # generation measures lengths with the target model's tokenizer when known
        from ..tokenizers import tiktoken_encoding_for

        tok = tokenizer or tiktoken_encoding_for(model.partition(":")[2])
        if tok:
            extra["tokenizer"] = tok
    return extra


def option_keys() -> dict[str, str]:
    """Every benchmark option's key -> its flag (the Python API's keyword arguments)."""
    return {opt.key: opt.flag for cls in benchmark_classes().values() for opt in cls.OPTIONS}


def parse_benchmark(spec: str, extra: Mapping[str, Any] | None = None,
                    data_dir: Path | None = None) -> tuple[Benchmark, list[str] | None]:
    """`longbench:hotpotqa,qasper` -> (LongBench(), ["hotpotqa", "qasper"]); `jsonl:PATH`."""
    if spec.startswith("jsonl:"):
        from .jsonl import JsonlBenchmark

        return JsonlBenchmark(spec[len("jsonl:"):]), None
    name, _, tasks = spec.partition(":")
    selected = [t.strip() for t in tasks.split(",") if t.strip()] or None
    if name in ("longbench", "longbench-e", "minilongbench"):
        from .longbench.benchmark import LongBench, LongBenchE, MiniLongBench

        cls = {"longbench": LongBench, "longbench-e": LongBenchE, "minilongbench": MiniLongBench}[name]
        if cls is LongBench and (extra or {}).get("adaptive"):
            from .longbench.adaptive import AdaptiveLongBench

            return AdaptiveLongBench.from_options(dict(extra or {}), data_dir), selected
        if cls is LongBench and any((extra or {}).get(k) is not None for k in ADAPTIVE_ONLY):
            raise UserError("--target-se and the other --adaptive-* options need --adaptive")
        if cls is MiniLongBench:
            opts = extra or {}
            return MiniLongBench(data_dir=data_dir, method=str(opts.get("estimate_method", "blend")),
                                 params=str(opts.get("estimate_params", "shipped"))), selected
        return cls(), selected
    if name == "bamboo":
        from .bamboo.benchmark import BambooBenchmark

        return BambooBenchmark(data_dir=data_dir), selected
    if name == "100-longbench":
        from .longbench100.benchmark import LongBench100

        return LongBench100(extra, data_dir=data_dir), selected
    raise UserError(f"unknown benchmark {name!r}{did_you_mean(name, NAMES)}: use one of {', '.join(NAMES)}, "
                    "or jsonl:PATH for your own data")
