"""100-LongBench's scores and how the report shows them: score by length and LongScore
(base ability, the average over longer lengths, the average LongScore)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Self, TypedDict

from ...json_values import as_object
from ..scores import ScoreSet

_LONGSCORE_LABELS = {"base_ability": "base ability", "avg_score": "avg score (longer)", "avg_lc": "avg LongScore"}


class LongBench100ScoresJson(TypedDict):
    """100-LongBench's scores, in run.json's order: by task, by length, by both, the tasks
    the overall covers, what was not scored or built, prior knowledge, LongScore."""

    overall: float | None
    by_task: dict[str, float]
    by_length: dict[str, float]
    by_task_length: dict[str, dict[str, float]]
    overall_tasks: list[str]
    unscored: dict[str, dict[str, int]]
    prior_knowledge: dict[str, object]
    unbuildable: dict[str, dict[str, str]]
    base_lengths: list[str]
    base_ability_from: str  # the release's base set or the paper's Eq. 1
    ci95: dict[str, object]
    longscore: dict[str, object] | None
    longscore_by_task: dict[str, dict[str, object] | None]


class LongBench100Scores(ScoreSet):
    @classmethod
    def of(cls, data: LongBench100ScoresJson) -> Self:
        return cls(dict(data))

    COLUMNS: ClassVar[tuple[str, ...]] = ("overall", "by_length", "longscore", "by_task")
    OWN_KINDS: ClassVar[tuple[str, ...]] = ("longscore",)
    LINE_KEYS: ClassVar[tuple[str, ...]] = ("by_length", "longscore")

    @classmethod
    def published(cls, row: Mapping[str, object]) -> dict[str, object]:
        """The paper's rows give LongScore's parts flat; here they are one `longscore` tree."""
        scores = super().published(row)
        ls = {k: row[k] for k in _LONGSCORE_LABELS if k in row}
        if ls:
            scores["longscore"] = ls
        return scores

    @property
    def longscore(self) -> dict[str, object]:
        """LongScore's parts: base ability, the average score at longer lengths, avg LongScore."""
        return dict(as_object(self.data.get("longscore")))

    def extra_cells(self, columns: tuple[str, ...]) -> dict[str, float]:
        if "longscore" not in columns:
            return {}
        return {f"ls:{key}": float(value) for key, value in self.longscore.items()
                if key in _LONGSCORE_LABELS and isinstance(value, (int, float))}

    @classmethod
    def label(cls, key: str) -> str | None:
        kind, _, name = key.partition(":")
        return _LONGSCORE_LABELS[name] if kind == "ls" else None

    @classmethod
    def length_legend(cls, cells: dict[str, float | None]) -> str:
        avg = cells.get("ls:avg_lc")
        return f" (avg LongScore {avg:.1f})" if avg is not None else ""
