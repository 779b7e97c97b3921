"""asyncbench: long-context LLM evaluation through APIs.

Data flows one way: benchmark -> Sample -> prompt builder -> Request -> cache/scheduler
-> provider -> Response -> store -> scorer -> aggregate -> estimators -> report.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__version__ = "0.1.0"
__all__ = ["EvalResult", "SampleRecord", "evaluate", "evaluate_async", "load_run"]

if TYPE_CHECKING:
    from .api import EvalResult, evaluate, evaluate_async, load_run
    from .report.samples import SampleRecord


def __getattr__(name: str) -> object:
    """The API is imported on first use: `import asyncbench` (and the CLI) stay light."""
    if name in ("EvalResult", "evaluate", "evaluate_async", "load_run"):
        from . import api

        return getattr(api, name)
    if name == "SampleRecord":
        from .report.samples import SampleRecord

        return SampleRecord
    raise AttributeError(f"module 'asyncbench' has no attribute {name!r}")
