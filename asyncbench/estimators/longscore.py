"""LongScore (100-LongBench): how much of a score is long-context ability, not base ability.

Base Ability is the mean score at short "base" lengths (2k, 4k and 6k by default, as in the
paper's own tables; RULER-style tables use 4k alone). At each longer length l,
LC_l = (S_l - Base) / Base, printed in percent; the headline is the mean LC_l over the
longer lengths. The paper prints its numbers cut (not rounded) to one decimal, so
`--decimals 1` reproduces its tables digit for digit.

Usage: asyncbench estimate longscore --scores FILE.json [--base 4k] [--json]
where FILE maps length labels to scores ({"4k": 96.5, "8k": 95.8}) or holds one such
mapping per task ({"kv_retrieval": {"2k": ...}, ...}).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..errors import UserError

DEFAULT_BASE = ("2k", "4k", "6k")
# The release's base set (`<task>_0`): no distractors, ordered before every length.
BASE_LABEL = "base"
_LABEL = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmM]?)\s*$")


def parse_length(label: str | int) -> int:
    """Tokens in a length label: "8k" -> 8192, "1M" -> 1048576, "3000" -> 3000.

    k means 1024 tokens, as in the official 100-LongBench generator ("8 represents
    8*1024"), so a "128k" context fits a 131,072-token window.
    """
    if isinstance(label, int):
        return label
    if label == BASE_LABEL:
        return 0
    m = _LABEL.match(str(label))
    if not m:
        raise UserError(f"bad length label {label!r}; use a token count such as 2k, 128k, 1M or 3000")
    unit = {"": 1, "k": 1024, "m": 1024 * 1024}[m.group(2).lower()]
    return int(float(m.group(1)) * unit)


def truncate(value: float, decimals: int = 1) -> float:
    """Cut `value` toward zero to `decimals` places, as the paper prints its tables.

    A tiny epsilon absorbs binary noise (e.g. 0.7 stored as 0.69999...) so exact
    decimal values are not cut one step too far.
    """
    scale = 10**decimals
    cut: float = math.trunc(value * scale + math.copysign(1e-9, value)) / scale
    return cut + 0.0  # turn -0.0 into 0.0


@dataclass
class LongScore:
    """LongScore of one score curve. `lc` and `avg_lc` are percentages."""

    base_ability: float
    lc: dict[str, float]
    avg_lc: float
    avg_score: float
    base_lengths: list[str]

    def cut(self, decimals: int) -> LongScore:
        """The same numbers cut to `decimals` places, for printing like the paper."""
        return LongScore(
            base_ability=truncate(self.base_ability, decimals),
            lc={k: truncate(v, decimals) for k, v in self.lc.items()},
            avg_lc=truncate(self.avg_lc, decimals),
            avg_score=truncate(self.avg_score, decimals),
            base_lengths=list(self.base_lengths),
        )


def longscore(scores: Mapping[str, float], base: Sequence[str] = DEFAULT_BASE) -> LongScore:
    """LongScore of `scores` (length label -> score at that length).

    Every base length must be present: a base averaged over a different set of lengths
    would not be comparable across models. LC is computed for the lengths longer than the
    longest base length; lengths shorter than that but not in the base are ignored.
    """
    by_tokens = {parse_length(k): (k, float(v)) for k, v in scores.items()}
    base_tokens = [parse_length(b) for b in base]
    if not base_tokens:
        raise UserError("no base lengths given; pass --base, e.g. --base 4k or --base 2k,4k,6k")
    missing = [b for b, t in zip(base, base_tokens) if t not in by_tokens]
    if missing:
        have = ", ".join(label for _, (label, _) in sorted(by_tokens.items())) or "none"
        raise UserError(f"no score at base length(s) {', '.join(missing)} (scores have: {have}); pass --base with lengths you have")
    base_ability = sum(by_tokens[t][1] for t in base_tokens) / len(base_tokens)
    if base_ability == 0:
        raise UserError("base ability is 0, so LongScore (a change relative to it) is undefined")
    longer = sorted(t for t in by_tokens if t > max(base_tokens))
    if not longer:
        raise UserError(f"no scores at lengths longer than the base ({', '.join(base)}); LongScore needs at least one")
    lc = {by_tokens[t][0]: 100.0 * (by_tokens[t][1] - base_ability) / base_ability for t in longer}
    return LongScore(
        base_ability=base_ability,
        lc=lc,
        avg_lc=sum(lc.values()) / len(lc),
        avg_score=sum(by_tokens[t][1] for t in longer) / len(longer),
        base_lengths=[by_tokens[t][0] for t in base_tokens],
    )


def mean_over_tasks(per_task: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """Per-length mean over tasks, as the paper averages its eight tasks.

    Only lengths every task has are kept, so each length averages the same tasks.
    """
    tables = [{parse_length(k): (k, float(v)) for k, v in t.items()} for t in per_task.values()]
    if not tables:
        return {}
    common = set(tables[0]).intersection(*tables[1:])
    return {tables[0][t][0]: sum(tab[t][1] for tab in tables) / len(tables) for t in sorted(common)}


def load_scores(path: Path) -> dict[str, Any]:
    """Read and validate a scores file: {length: score} or {task: {length: score}}."""
    from ..jsonl_io import read_json_file

    if not path.is_file():
        raise UserError(f"{path}: no such file; pass --scores FILE.json")
    data = read_json_file(path, hint='expected {"4k": 96.5, "8k": 95.8}', what="scores file")
    if not isinstance(data, dict) or not data:
        raise UserError(f'{path}: expected a JSON object such as {{"4k": 96.5, "8k": 95.8}}')

    def check(mapping: dict[str, object], where: str) -> None:
        for key, value in mapping.items():
            parse_length(key)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise UserError(f"{path}: score for {where}{key!r} is {value!r}, not a number")

    if all(isinstance(v, dict) for v in data.values()):
        for task, mapping in data.items():
            check(mapping, f"task {task!r}, length ")
    else:
        check(data, "length ")
    return data


def estimate(data: Mapping[str, Any], base: Sequence[str]) -> dict[str, Any]:
    """LongScore report of a scores mapping; per-task input adds `by_task` and scores the
    task mean as the headline."""
    if all(isinstance(v, Mapping) for v in data.values()):
        by_task = {task: asdict(longscore(m, base)) for task, m in data.items()}
        overall = asdict(longscore(mean_over_tasks(data), base))
        overall["by_task"] = by_task
        return overall
    return asdict(longscore(data, base))


def cut_report(report: dict[str, Any], decimals: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in report.items():
        if isinstance(value, float):
            out[key] = truncate(value, decimals)
        elif isinstance(value, dict):
            out[key] = cut_report(value, decimals)
        else:
            out[key] = value
    return out
