"""Benchmark registry: `NAME[:task,task]` -> a Benchmark (see base.py)."""

from __future__ import annotations

from ..errors import UserError
from .base import Benchmark

NAMES = ("longbench", "longbench-e", "minilongbench", "bamboo", "100-longbench")


def parse_benchmark(spec: str) -> tuple[Benchmark, list[str] | None]:
    """`longbench:hotpotqa,qasper` -> (LongBench(), ["hotpotqa", "qasper"]); `jsonl:PATH`."""
    if spec.startswith("jsonl:"):
        from .jsonl import JsonlBenchmark

        return JsonlBenchmark(spec[len("jsonl:"):]), None
    name, _, tasks = spec.partition(":")
    selected = [t.strip() for t in tasks.split(",") if t.strip()] or None
    if name in ("longbench", "longbench-e", "minilongbench"):
        from .longbench import LongBench, LongBenchE, MiniLongBench

        cls = {"longbench": LongBench, "longbench-e": LongBenchE, "minilongbench": MiniLongBench}[name]
        return cls(), selected
    if name == "bamboo":
        from .bamboo import BambooBenchmark

        return BambooBenchmark(), selected
    if name == "100-longbench":
        from .longbench100.benchmark import LongBench100

        return LongBench100(), selected
    raise UserError(f"unknown benchmark {spec!r}: use one of {', '.join(NAMES)}, or jsonl:PATH for your own data")
