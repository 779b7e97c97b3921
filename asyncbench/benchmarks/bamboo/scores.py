"""BAMBOO's scores and how the report shows them: the average per length level and the
16k - 4k difference over the datasets present at both."""

from __future__ import annotations

from typing import ClassVar, Self, TypedDict

from ...json_values import as_object
from ..scores import ScoreSet


class LevelDiff(TypedDict):
    """16k - 4k per dataset present at both levels, and their average (None: no such dataset)."""

    datasets: dict[str, float]
    average: float | None


class LevelReport(TypedDict):
    by_length: dict[str, float]  # the average per level
    diff_16k_minus_4k: LevelDiff


class BambooScoresJson(TypedDict):
    """BAMBOO's scores, in run.json's order: percent per `<dataset>_<level>` task and
    their mean, the mean per level, 16k - 4k, intervals, format errors, metric parts."""

    overall: float | None
    by_task: dict[str, float]
    by_length: dict[str, float]
    diff_16k_minus_4k: LevelDiff
    ci95: dict[str, object]
    format_errors: dict[str, int]
    detail: dict[str, dict[str, object]]  # metric parts per task (P/R/F1 for hallucination detection)


class BambooScores(ScoreSet):
    @classmethod
    def of(cls, data: BambooScoresJson) -> Self:
        return cls(dict(data))

    COLUMNS: ClassVar[tuple[str, ...]] = ("overall", "by_length", "diff_16k_minus_4k", "by_task")
    OWN_KINDS: ClassVar[tuple[str, ...]] = ("diff_16k_minus_4k",)
    LINE_KEYS: ClassVar[tuple[str, ...]] = ("by_length", "diff_16k_minus_4k")

    @property
    def by_length(self) -> dict[str, float]:
        """The average per length level ("4k", "16k")."""
        return {k: float(v) for k, v in as_object(self.data.get("by_length")).items() if isinstance(v, (int, float))}

    @property
    def diff_average(self) -> float | None:
        """16k - 4k over the datasets present at both levels (None: none is)."""
        diff = self.data.get("diff_16k_minus_4k")
        return float(diff["average"]) if isinstance(diff, dict) and diff.get("average") is not None else None

    def extra_cells(self, columns: tuple[str, ...]) -> dict[str, float]:
        diff = self.diff_average
        return {"diff_16k_minus_4k": diff} if "diff_16k_minus_4k" in columns and diff is not None else {}

    @classmethod
    def label(cls, key: str) -> str | None:
        return "16k-4k" if key == "diff_16k_minus_4k" else None
