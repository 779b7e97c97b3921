"""A benchmark's prompt rules as one typed value, `PromptRules`, which the benchmark class
declares (`Benchmark.RULES`) and planning and prompting (asyncbench/run/) read. The run
path never asks which benchmark it runs, only what its rules say: where the per-model
prompt budgets are, whether servers of the official open models get the official
prompts, which tasks stop where, what is done to an answer before it is scored, and
whether every request is sent as a release sends it.

What is done to an answer is decided when its request is built (`PostProcess`: it
depends on the server, e.g. whether it could be sent the newline stop) and applied when
the answer comes back, before the benchmark scores it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .budget import MODEL2MAXLEN
from .official_models import first_line, post_process


@dataclass(frozen=True)
class BudgetTable:
    """A benchmark's official per-model prompt budgets, a `model2maxlen.json` (budget.py):
    `<data_dir>/<folder>/model2maxlen.json` where the data directory has one, else where
    `elsewhere` finds it (LongBench: the official repository's copy, fetched once), else
    none (the context rule applies)."""

    folder: str
    elsewhere: Callable[[Path | None], Path | None] | None = None

    def path(self, data_dir: Path | None) -> Path | None:
        if data_dir is not None and (local := Path(data_dir) / self.folder / MODEL2MAXLEN).is_file():
            return local
        return self.elsewhere(data_dir) if self.elsewhere is not None else None


@dataclass(frozen=True)
class ReleaseArgs:
    """A release's request for one prompt, in the terms `ModelClient.request` takes."""

    prompt: str | None
    messages: list[dict[str, str]] | None
    temperature: float
    params: dict[str, object]
    chat: bool


@dataclass(frozen=True)
class ReleaseRequests:
    """A benchmark whose every request goes out as its release sends it, never cut (a
    prompt too long fails at the server): `build(prompt, provider, open model?)` is that
    request, `describe(provider, open model?)` what run.json says of it."""

    build: Callable[[str, str, bool], ReleaseArgs]
    describe: Callable[[str, bool], dict[str, object]]


@dataclass(frozen=True)
class PostProcess:
    """What is done to one answer's text before it is scored, in this order: the cut after
    its first newline past the first character (`newline_cut`: a newline stop that could
    not be sent, official_models.NewlineStop), the official model's own post-processing
    (`model`: pred.py's `post_process`), then the benchmark's own (`own`)."""

    newline_cut: bool = False
    model: str = ""
    own: Callable[[str], str] | None = None

    def __bool__(self) -> bool:
        return self.newline_cut or bool(self.model) or self.own is not None

    def apply(self, text: str) -> str:
        if self.newline_cut:
            text = first_line(text)
        if self.model:
            text = post_process(text, self.model)
        return self.own(text) if self.own is not None else text


NO_POST_PROCESS = PostProcess()


@dataclass(frozen=True)
class PromptRules:
    """How a benchmark's samples become requests and its answers become predictions.

    - `budget_table`: its per-model prompt budgets (None: a model's budget comes from
      --max-input-tokens or its context, budget.py);
    - `open_models`: a server of one of the budget table's models (named by its
      model2path.json) is prompted as LongBench's pred.py prompts it: its cut, its chat
      format written out as text, its newline rule, its post-processing
      (official_models.py);
    - `needs_context`: a run must know the model's context (prompts are cut to it);
    - `newline_stop`: tasks whose answers end at their first newline after at least one
      token, the newline kept (pred.py's samsum rule): sent as the stop "\\n", and to an
      official open model as pred.py sends it (official_models.NewlineStop);
    - `stops`: other tasks' stop sequences, sent as they are;
    - `answer`: the benchmark's own post-processing of every answer's text, before it is
      scored;
    - `release`: every request sent as the benchmark's release sends it, uncut.
    """

    budget_table: BudgetTable | None = None
    open_models: bool = False
    needs_context: bool = False
    newline_stop: frozenset[str] = frozenset()
    stops: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    answer: Callable[[str], str] | None = None
    release: ReleaseRequests | None = None

    def __post_init__(self) -> None:
        if self.open_models and self.budget_table is None:
            raise ValueError("open_models prompts the models of a budget table: give budget_table")
        if both := self.newline_stop & set(self.stops):
            raise ValueError(f"tasks with both a newline stop and stops: {sorted(both)}")

    def stop(self, task: str) -> list[str]:
        """The stop sequences a request of `task` is sent with."""
        return ["\n"] if task in self.newline_stop else list(self.stops.get(task, ()))
