"""The record of batch submissions that does not wait for the cache's lock.

A batch is paid for the moment the provider creates it. The store records it only once
it gets the DuckDB file, which another process (a concurrent run, a reader) may hold
for a while; a crash meanwhile lost the batch id, and the re-run paid for a second batch.
So every step of a submission is appended (flushed, fsynced) to
`<cache>.journal/<host>-<pid>.batches` before the next step starts:

  intent    a client-made id, the request keys, run, provider, endpoint: before upload
  uploaded  the input file's id (OpenAI), before the batch is created
  created   the batch id, the moment the provider returns it
  recorded  the store has the batch (nothing left to recover)
  void      the provider refused the submission (4xx): no batch exists

A later run reads the files of processes that are gone (`unresolved`): a submission
with a batch id goes into the store; one without is looked up at the provider by its
intent id (OpenAI batch metadata; Anthropic, which has none, by time and size) before
anything is submitted again. A file is deleted once all its submissions are resolved.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path

from .journal import _alive, journal_dir


@dataclass
class Submission:
    """One submission as its journal tells it."""

    intent: str
    run_id: str
    provider: str
    model: str
    endpoint: str
    base_url: str
    keys: list[str]
    at: float
    file_id: str | None = None
    batch_id: str | None = None
    done: bool = False  # recorded in the store, or void
    sources: set[Path] = field(default_factory=set)


class BatchJournal:
    """This process's submissions, one JSON line per step."""

    def __init__(self, cache: Path) -> None:
        self.dir = journal_dir(cache)
        self.path = self.dir / f"{socket.gethostname()}-{os.getpid()}.batches"
        self.open_intents: set[str] = set()

    def write(self, event: str, intent: str, **fields: object) -> None:
        """One step, on disk before this returns (fsync: a batch is money)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps({"event": event, "intent": intent, **fields}) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        if event == "intent":
            self.open_intents.add(intent)
        elif event in ("recorded", "void"):
            self.open_intents.discard(intent)

    def close(self) -> None:
        """At the end of a run: the file goes once every submission in it is resolved
        (one left open, say a create that timed out, is for the next run to look up)."""
        if not self.open_intents:
            self.path.unlink(missing_ok=True)


def unresolved(cache: Path) -> list[Submission]:
    """The submissions of processes that are gone which their journals leave unresolved,
    oldest first. Lines cut by a crash end a file's reading."""
    folder = journal_dir(cache)
    if not folder.is_dir():
        return []
    found: dict[str, Submission] = {}
    for path in sorted(folder.glob("*.batches")):
        if _alive(path.stem + "-0"):
            continue
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                try:
                    event = json.loads(line)
                except ValueError:
                    break
                intent = str(event.get("intent"))
                if event.get("event") == "intent":
                    found[intent] = Submission(intent, event["run_id"], event["provider"], event["model"],
                                               event["endpoint"], event["base_url"], list(event["keys"]),
                                               float(event["at"]))
                sub = found.get(intent)
                if sub is None:
                    continue
                sub.sources.add(path)
                if event.get("event") == "uploaded":
                    sub.file_id = event.get("file_id")
                elif event.get("event") == "created":
                    sub.batch_id = event.get("batch_id")
                elif event.get("event") in ("recorded", "void"):
                    sub.done = True
    return sorted(found.values(), key=lambda s: s.at)


def finished_files(cache: Path, subs: list[Submission]) -> list[Path]:
    """Journal files of gone processes whose submissions are all resolved now."""
    folder = journal_dir(cache)
    if not folder.is_dir():
        return []
    open_files = {p for s in subs if not s.done for p in s.sources}
    return [p for p in folder.glob("*.batches") if not _alive(p.stem + "-0") and p not in open_files]
