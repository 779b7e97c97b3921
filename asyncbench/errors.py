"""Error types shared across the package.

`UserError` is for mistakes a user can fix (bad flag, missing key, malformed file): the CLI
prints its message as one line and exits with code 2, no traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from enum import Enum
from typing import Literal

# Closed vocabularies whose members are their strings wherever one is stored, printed or
# compared (types.SampleStatus, ErrorKind). Defined here, the package's base that imports
# nothing of it (the sandbox runs with this module and its own alone).
if sys.version_info >= (3, 11):
    from enum import StrEnum as StrEnum
else:  # Python 3.10: members that are their value wherever a string is made of them
    class StrEnum(str, Enum):
        def __str__(self) -> str:
            return str(self.value)

        def __format__(self, spec: str) -> str:
            return format(str(self.value), spec)


class UserError(Exception):
    """A problem with the user's input or environment; the message says how to fix it."""


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """" (did you mean 'x'?)" for a typo close to one of `choices` (difflib), else ""."""
    import difflib

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


class ErrorKind(StrEnum):
    """What a failed call means to the scheduler (stored with a failure as this string)."""

    RATE_LIMITED = "rate_limited"  # 429 or equivalent; retry after `retry_after` seconds (if known)
    TRANSIENT = "transient"  # 5xx, dropped connection, timeout, malformed body; retry with back-off
    FATAL = "fatal"  # auth, bad request, context too long; never retried


class ProviderError(Exception):
    """A failed call to an endpoint, classified (`kind`, an ErrorKind) so the scheduler
    knows what to do."""

    def __init__(
        self,
        kind: ErrorKind | Literal["rate_limited", "transient", "fatal"],
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        ratelimit: dict[str, float] | None = None,
        unreachable: str | None = None,
    ) -> None:
        # Server text (an error body that echoes the request's key) is redacted here, once,
        # so no failure, result, summary or log line can carry a secret.
        from .secrets import redact

        message = redact(message)
        super().__init__(message)
        self.kind = ErrorKind(kind)  # a kind outside the three is a ValueError
        self.message = message
        self.status = status
        self.retry_after = retry_after
        self.ratelimit = ratelimit or {}
        # no connection could be made at all, and why ("connection refused"): a down server
        self.unreachable = unreachable

    def __reduce__(self) -> tuple[Callable[..., ProviderError], tuple[object, ...]]:
        """Picklable with its keyword fields (Ray workers send errors back to the driver)."""
        return (_provider_error, (self.kind, self.message, self.status, self.retry_after, self.ratelimit,
                                  self.unreachable))

    def __str__(self) -> str:  # pragma: no cover - trivial
        return f"{self.kind}: {self.message}"


class NotRun(ProviderError):
    """A batch's request that its provider never ran (the batch expired or was cancelled
    first): sent again, and not one of the requests a server served (the run's request
    count is what the servers ran)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorKind.TRANSIENT, message)

    def __reduce__(self) -> tuple[Callable[..., ProviderError], tuple[object, ...]]:
        return (NotRun, (self.message,))


def _provider_error(kind: ErrorKind, message: str, status: int | None, retry_after: float | None,
                    ratelimit: dict[str, float], unreachable: str | None = None) -> ProviderError:
    return ProviderError(kind, message, status=status, retry_after=retry_after, ratelimit=ratelimit,
                         unreachable=unreachable)


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C (or a cancellation) during a run, after the interrupted invocation was
    booked (its requests, wall time and spend) and run.json written: `summary` is it."""

    def __init__(self, summary: dict[str, object]) -> None:
        super().__init__(summary.get("run_id", ""))
        self.summary = summary
