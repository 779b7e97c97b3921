"""A benchmark's scores as one typed object, and how the report shows them.

`aggregate` returns the benchmark's `ScoreSet` subclass (`Benchmark.SCORES`), made by
its `of` from a TypedDict that declares that benchmark's keys; run.json's "scores" is its
`to_json()` (a JSON tree, the same whatever reads it), and a stored run's is read back
through the same type (`from_json`). The type says which scores are columns and in what order, how they are labelled, what the
terminal summary prints under the table, and whether it shows an estimate of another
benchmark on a board of its own. The report names no benchmark: it asks the score type.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Self, TypedDict

from ..json_values import as_object

# Renders a score tree (and the matching tree of [lo, hi] intervals) for a person.
Show = Callable[[object, object], str]


def scalar(value: object) -> float | None:
    """A cell's number: a by_length entry is a number (BAMBOO, 100-LongBench) or a
    LongBench-E summary whose `overall` is a number or {en, zh, all}."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, dict):
        return scalar(value.get("overall", value.get("all")))
    return None


@dataclass
class ScoreSet:
    """run.json's "scores" of one run (or a paper's row, or the ci95 tree of the same
    shape). `to_json` gives back exactly the JSON `from_json` read."""

    data: dict[str, object] = field(default_factory=dict)

    # the score kinds the report shows as columns, in order: headline keys (scalars), then
    # "by_length", the type's own `extra_cells`, "by_category", "by_task"
    COLUMNS: ClassVar[tuple[str, ...]] = ("overall", "by_task")
    # the kinds among COLUMNS that `extra_cells` makes
    OWN_KINDS: ClassVar[tuple[str, ...]] = ()
    # lines printed under the summary table: these keys, as `Show` renders them
    LINE_KEYS: ClassVar[tuple[str, ...]] = ()
    # a board of its own showing the estimate of another benchmark (None: none), and the
    # title of the type's own board then
    ESTIMATE_BOARD: ClassVar[str | None] = None
    OWN_BOARD: ClassVar[str | None] = None

    @classmethod
    def from_json(cls, data: Mapping[str, object] | None) -> ScoreSet:
        return cls(dict(data or {}))

    def to_json(self) -> dict[str, object]:
        return dict(self.data)

    @classmethod
    def published(cls, row: Mapping[str, object]) -> dict[str, object]:
        """A paper's row (data/published_baselines.json) as a scores tree of this type."""
        return {k: row[k] for k in ("overall", "overall_en", "overall_zh", "by_category", "by_task", "by_length")
                if k in row}

    # -- typed access ------------------------------------------------------------------
    @property
    def overall(self) -> float | None:
        return scalar(self.data.get("overall"))

    @property
    def by_task(self) -> dict[str, object]:
        return dict(as_object(self.data.get("by_task")))

    @property
    def by_category(self) -> dict[str, object]:
        return dict(as_object(self.data.get("by_category")))

    @property
    def ci95(self) -> dict[str, object]:
        return dict(as_object(self.data.get("ci95")))

    # -- the report's cells ------------------------------------------------------------
    def cells(self, leaf: Callable[[object], object] = scalar, columns: tuple[str, ...] | None = None) -> dict[str, object]:
        """Column key -> value ("overall", "len:4k", "cat:Code", "task:qasper", and the
        type's own), the kinds `columns` (default COLUMNS) names, in column order."""
        columns = self.COLUMNS if columns is None else columns
        cells: dict[str, object] = {}
        for key in columns:
            if key.startswith("by_") or key in self.OWN_KINDS:
                continue
            if key in self.data and leaf(self.data[key]) is not None:
                cells[key] = leaf(self.data[key])
        if "by_length" in columns:
            cells.update({f"len:{k}": leaf(v) for k, v in as_object(self.data.get("by_length")).items()})
        cells.update(self.extra_cells(columns))
        for kind, prefix in (("by_category", "cat"), ("by_task", "task")):
            if kind in columns:
                cells.update({f"{prefix}:{k}": leaf(v) for k, v in as_object(self.data.get(kind)).items()})
        return cells

    def extra_cells(self, columns: tuple[str, ...]) -> dict[str, float]:
        """The type's own cells between the length bins and the categories."""
        return {}

    @classmethod
    def label(cls, key: str) -> str | None:
        """The column's label where the type names it (None: the generic label)."""
        return None

    @classmethod
    def column_hint(cls) -> list[str]:
        """Column keys in the order of the benchmark's published tables (categories, tasks)."""
        return []

    @classmethod
    def compared_key(cls, key: str) -> str:
        """The name a paired comparison's number has in this type's scores."""
        return key

    def estimate(self) -> dict[str, object] | None:
        """The estimate of another benchmark's scores shown on ESTIMATE_BOARD, x100, as
        {"overall", "by_category", "by_task", "estimate_<method>"..., "method"}; None: none."""
        return None

    @classmethod
    def length_legend(cls, cells: dict[str, float | None]) -> str:
        """Added to a run's label in the score-by-length figure."""
        return ""

    # -- the terminal summary ----------------------------------------------------------
    def title_note(self) -> str:
        """Said after "Scores" in the summary table's title."""
        return ""

    def summary_lines(self, show: Show, partial: str | None) -> list[str]:
        """The benchmark's lines under the summary table (rich markup)."""
        ci = self.ci95
        return [f"[bold]{key.replace('_', ' ')}[/]: {show(self.data[key], ci.get(key))}"
                + (f" ({partial})" if partial else "")
                for key in self.LINE_KEYS if key in self.data and self.data[key] not in (None, {})]


class TaskScoresJson(TypedDict):
    """The generic scores (a `jsonl:` file): the mean per task (x100) and over tasks."""

    overall: float | None
    by_task: dict[str, float]
    ci95: dict[str, object]  # 95% bootstrap intervals [lo, hi], in the tree shape of the numbers


class TaskScores(ScoreSet):
    """Scores by task and their mean: what a benchmark without a paper's table reports."""

    @classmethod
    def of(cls, data: TaskScoresJson) -> Self:
        return cls(dict(data))
