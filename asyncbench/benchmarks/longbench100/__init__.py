"""100-LongBench (seed 002): length-controlled tasks, prior-knowledge filter, LLM judge, LongScore."""

from .benchmark import LongBench100

__all__ = ["LongBench100"]
