"""Benchmark registry: `NAME[:task,task]` -> a Benchmark (see base.py)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import UserError
from .base import Benchmark

NAMES = ("longbench", "longbench-e", "minilongbench", "bamboo", "100-longbench")


def benchmark_classes() -> dict[str, type[Benchmark]]:
    """Every benchmark class by its name (for the CLI's benchmark-specific flags)."""
    from .bamboo import BambooBenchmark
    from .jsonl import JsonlBenchmark
    from .longbench import LongBench, LongBenchE, MiniLongBench
    from .longbench100.benchmark import LongBench100

    classes: list[type[Benchmark]] = [LongBench, LongBenchE, MiniLongBench, BambooBenchmark, LongBench100]
    found = {str(cls.name): cls for cls in classes}
    found["jsonl"] = JsonlBenchmark
    return found


def parse_benchmark(spec: str, extra: Mapping[str, Any] | None = None,
                    data_dir: Path | None = None) -> tuple[Benchmark, list[str] | None]:
    """`longbench:hotpotqa,qasper` -> (LongBench(), ["hotpotqa", "qasper"]); `jsonl:PATH`."""
    if spec.startswith("jsonl:"):
        from .jsonl import JsonlBenchmark

        return JsonlBenchmark(spec[len("jsonl:"):]), None
    name, _, tasks = spec.partition(":")
    selected = [t.strip() for t in tasks.split(",") if t.strip()] or None
    if name in ("longbench", "longbench-e", "minilongbench"):
        from .longbench import LongBench, LongBenchE, MiniLongBench

        cls = {"longbench": LongBench, "longbench-e": LongBenchE, "minilongbench": MiniLongBench}[name]
        if cls is MiniLongBench:
            return MiniLongBench(data_dir=data_dir, method=str((extra or {}).get("estimate_method", "irt"))), selected
        return cls(), selected
    if name == "bamboo":
        from .bamboo import BambooBenchmark

        return BambooBenchmark(data_dir=data_dir), selected
    if name == "100-longbench":
        from .longbench100.benchmark import LongBench100

        return LongBench100(extra, data_dir=data_dir), selected
    raise UserError(f"unknown benchmark {spec!r}: use one of {', '.join(NAMES)}, or jsonl:PATH for your own data")
