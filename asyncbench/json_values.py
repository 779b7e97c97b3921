"""Parsed JSON narrowed where it is read: a peer's (or a file's) value is an `object`
until a check says what it is. These return an empty container for anything else, the
way every reader of a server's reply treats a field of the wrong shape: as absent."""

from __future__ import annotations


def as_object(value: object) -> dict[str, object]:
    """`value` if it is a JSON object, else {}."""
    return value if isinstance(value, dict) else {}


def as_list(value: object) -> list[object]:
    """`value` if it is a JSON array, else []."""
    return value if isinstance(value, list) else []


def as_int(value: object) -> int | None:
    """A JSON integer (not a bool, not a float), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def as_float(value: object) -> float | None:
    """A JSON number (not a bool) as a float, else None."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
