"""The leaderboard of several models' runs: `build_leaderboard` then `render_leaderboard`.

model.py builds it (ranking, intervals, paired comparisons, the papers' rows, cost and
latency; its docstring says how models are ranked and where partial runs go), text.py
renders the terminal table, Markdown and JSON, html.py the self-contained HTML file.
`asyncbench report --leaderboard` and the eval-set runner call these two functions.
"""

from __future__ import annotations

from ...errors import UserError
from .model import Board, Entry, Leaderboard, Pair, ReferenceRow, build_leaderboard, leaderboard_of

FORMATS = ("table", "md", "json", "html")


def render_leaderboard(board: Leaderboard, fmt: str) -> str:
    """The leaderboard as a terminal table (at most 100 columns), Markdown, JSON or one
    self-contained HTML file (its sample viewer reads the runs' samples from their store)."""
    from . import text

    if fmt == "table":
        return text.text(board)
    if fmt == "md":
        return text.markdown(board)
    if fmt == "json":
        return text.json_text(board)
    if fmt == "html":
        from .html import html

        return html(board)
    raise UserError(f"unknown leaderboard format {fmt!r}; use one of {', '.join(FORMATS)}")


__all__ = ["FORMATS", "Board", "Entry", "Leaderboard", "Pair", "ReferenceRow", "build_leaderboard",
           "leaderboard_of", "render_leaderboard"]
