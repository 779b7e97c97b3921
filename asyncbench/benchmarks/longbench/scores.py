"""LongBench's scores (LongBench, LongBench-E, MiniLongBench, adaptive LongBench) and how
the report shows them: the paper's category order, MiniLongBench's anchor averages apart
from its estimate of the full LongBench, the estimate's lines in the terminal summary."""

from __future__ import annotations

from typing import Any, ClassVar, Self, TypedDict

from ...estimators.methods import METHODS as ESTIMATE_METHODS
from ..scores import ScoreSet, Show
from .aggregate import Summary  # at run time too: the declared keys are read with get_type_hints
from .table import CATEGORIES


def _estimate_lines(est: object) -> list[str]:
    """The estimate of the full LongBench overall: adaptive testing's, MiniLongBench's, or why none."""
    if isinstance(est, dict) and est.get("available") and est.get("method") == "adaptive":
        lo, hi = est["ci95"]
        return [f"[bold]estimated full LongBench overall[/] (adaptive): {100 * est['overall']:.2f} "
                f"(95% CI {100 * lo:.2f}-{100 * hi:.2f}, SE {100 * est['se']:.2f}; target {100 * est['target_se']:.2f}) "
                f"from {est['samples_used']} samples and {est['tokens']:,} tokens; stopped: {est['stop_reason']}"]
    if isinstance(est, dict) and est.get("available"):
        cost = est.get("token_cost") or {}
        saved = cost.get("saved_prompt_tokens_estimate")
        ci90 = est.get("overall_ci90")
        others = ", ".join(f"{m} {100 * est[m]['overall']:.2f}" for m in ESTIMATE_METHODS if m in est)
        return [f"[bold]overall[/] (estimated full LongBench, {est['method']}): [bold]{100 * est['overall']:.2f}[/]"
                + (f" [90% interval {100 * ci90[0]:.2f}-{100 * ci90[1]:.2f}]" if ci90 else "")
                + f"; {others}; "
                f"the 237 anchors cost {100 * cost.get('fraction', 0):.1f}% of the full benchmark's tokens"
                + (f", ~{saved:,} prompt tokens saved" if saved else "")]
    if isinstance(est, dict):
        return [f"[bold]estimate[/]: not available ({est.get('reason')})"]
    return []


class LongBenchScoresJson(TypedDict, total=False):
    """The LongBench family's scores (x100), in run.json's order: LongBench's, LongBench-E's
    (with `by_length`), MiniLongBench's (the anchors' means as `anchor_average*`, `overall`
    its estimate) and adaptive LongBench's (with its `estimate`)."""

    overall: float | None
    overall_en: float | None
    overall_zh: float | None
    by_task: dict[str, float]
    by_category: dict[str, float]
    ci95: dict[str, object]  # 95% bootstrap intervals [lo, hi] of the numbers above, same tree shape
    by_length: dict[str, Summary]  # LongBench-E: each bin's overall ({en, zh, all}), categories, datasets
    truncated: dict[str, int]  # {"n": samples cut, "tokens": tokens removed}
    n_scored: int
    n_failed: int
    anchor_average: float | None
    anchor_average_en: float | None
    anchor_average_zh: float | None
    estimate: dict[str, Any]  # MiniLongBench's or adaptive testing's estimate of full LongBench


class LongBenchScores(ScoreSet):
    """LongBench: Overall (EN, ZH), six categories, 21 datasets; an adaptive run adds its
    `estimate` of the full-LongBench Overall."""

    COLUMNS: ClassVar[tuple[str, ...]] = ("overall", "overall_en", "overall_zh", "by_category", "by_task")

    @classmethod
    def of(cls, data: LongBenchScoresJson) -> Self:
        return cls(dict(data))

    @classmethod
    def column_hint(cls) -> list[str]:
        hint: list[str] = []
        for cat, datasets in CATEGORIES.items():
            hint.append(f"cat:{cat}")
            hint += [f"task:{d}" for d in datasets] + [f"task:{d}_e" for d in datasets]
        return hint

    def title_note(self) -> str:
        if "estimate" not in self.data:
            return ""
        est = self.data["estimate"]
        if isinstance(est, dict) and est.get("method") == "adaptive":
            return " (averages over the samples asked, not full-LongBench scores: the estimate follows)"
        return " (averages over the 237 anchors, not full-LongBench scores: the estimate follows)"

    def summary_lines(self, show: Show, partial: str | None) -> list[str]:
        return _estimate_lines(self.data.get("estimate")) + super().summary_lines(show, partial)


class LongBenchEScores(LongBenchScores):
    """LongBench-E: LongBench's numbers and each by length bin (0-4k, 4-8k, 8k+)."""

    COLUMNS: ClassVar[tuple[str, ...]] = ("overall", "overall_en", "overall_zh", "by_length", "by_category",
                                          "by_task")
    LINE_KEYS: ClassVar[tuple[str, ...]] = ("by_length",)


class MiniLongBenchScores(LongBenchScores):
    """MiniLongBench: its `overall` is the estimate of the full LongBench Overall; the 237
    anchors averaged as LongBench averages (category means of dataset means, not a plain
    mean) are `anchor_average*`, on a board of their own (never beside the papers'
    full-benchmark rows)."""

    COLUMNS: ClassVar[tuple[str, ...]] = ("anchor_average", "anchor_average_en", "anchor_average_zh",
                                          "by_category", "by_task")
    ESTIMATE_BOARD: ClassVar[str | None] = "minilongbench: estimated full LongBench"
    OWN_BOARD: ClassVar[str | None] = "minilongbench: 237-anchor averages (not full-LongBench scores)"

    @classmethod
    def label(cls, key: str) -> str | None:
        return key.replace("anchor_average", "anchor average").replace("_", " ") if key.startswith(
            "anchor_average") else None

    @property
    def anchor_average(self) -> float | None:
        """The 237 anchors' mean of category means (not a plain mean, nor a LongBench score)."""
        value = self.data.get("anchor_average")
        return float(value) if isinstance(value, (int, float)) else None

    @classmethod
    def compared_key(cls, key: str) -> str:
        """A comparison's overall is the anchors' mean of category means (the estimate is not resampled)."""
        return key.replace("overall", "anchor_average", 1) if key.startswith("overall") else key

    def estimate(self) -> dict[str, object] | None:
        """The estimate of the full LongBench score, x100 like the papers' tables: the
        headline method's overall, categories and datasets, and every method's overall as
        `estimate_<method>`. None when the run has no estimate."""
        est = self.data.get("estimate")
        if not (isinstance(est, dict) and est.get("available")):
            return None
        head = est.get(est["method"]) or {}
        out: dict[str, object] = {"overall": 100 * est["overall"],
                               "by_category": {c: 100 * v for c, v in (head.get("by_category") or {}).items()},
                               "by_task": {d: 100 * v for d, v in (head.get("by_dataset") or {}).items()}}
        for m in ESTIMATE_METHODS:
            if isinstance(est.get(m), dict):
                out[f"estimate_{m}"] = 100 * est[m]["overall"]
        out["method"] = est["method"]
        return out
