"""Text from a server or a model, made safe to show on a terminal.

An answer or an error message is whatever a server sent: escape sequences in it would
clear the screen, set the window title, write the clipboard (OSC 52), draw a fake
"20/20 complete", or reorder what follows (bidi overrides). Everything bound for the
terminal (the run summary, error lines, the `samples` table, progress lines, report
tables) passes `shown`, which writes each such character as a visible escape (`\\x1b`,
`\\u202e`); rich consoles also escape markup (`[bold]`) with rich.markup.escape. Files
written as data (run.json, jsonl/csv/parquet exports, the cache) keep the exact text.
"""

from __future__ import annotations

import re

# C0 controls (tab kept; newline where the caller allows it), DEL, C1 controls, the bidi
# embeddings, overrides and isolates, the implicit marks and the line/paragraph separators.
_UNSAFE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_UNSAFE_KEEP_NEWLINE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shown(text: object, newlines: bool = False) -> str:
    """`text` with every control, escape and bidi character written as a visible escape
    (`newlines`: keep line breaks, for multi-line blocks)."""
    value = str(text)
    return (_UNSAFE_KEEP_NEWLINE if newlines else _UNSAFE).sub(_escaped, value)


def shown_markup(text: object) -> str:
    """`shown` for a rich console: controls escaped, then markup (`[bold]`) escaped."""
    from rich.markup import escape

    return escape(shown(text))


def aligned(rows: list[list[str]], right: set[int]) -> list[str]:
    """A table's rows as terminal lines: two spaces of indent and between columns, the
    columns in `right` (numbers) right-aligned, the others left-aligned."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(c.rjust(w) if i in right else c.ljust(w)
                             for i, (c, w) in enumerate(zip(r, widths, strict=True))).rstrip() for r in rows]
