"""Length-controlled 100-LongBench samples: real articles hidden among distractors.

For each (task, target length, row) the generator draws the answer-bearing article(s),
then distractor articles that still fit, shuffles them and numbers them, as the paper's
generator does. The official generator stops when no whole article fits, which can leave
a context far below its target; we then add one "filler" distractor cut (at a word
boundary) to the tokens still free, so every context is at most the target and at least
95% of it, measured on the context with the target model's tokenizer. Lengths are
multiples of 1024 tokens ("8k" = 8192), as in the official generator.

Every row has its own RNG seeded from (seed, task, length, row): the same seed gives
byte-identical samples, and asking for more rows never changes the earlier ones. So a
cell's rows are built one at a time as they are taken (`Cell`): a run of thousands of
128k-token rows never holds them all, and a cell no source can fill is known before any
row of it is built.
"""

from __future__ import annotations

import bisect
import random
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial

from ...estimators.longscore import BASE_LABEL
from ...tokenizers import Tokenizer
from .sources import Record, split_passages
from .tasks import TASKS, TaskSpec

MIN_FILL_RATIO = 0.95
# The release's base set: label, token limit of its articles, and the lengths its
# synthetic tasks' base rows are drawn at (generate_dataset_synthetic_base: 2..max-2).
BASE = BASE_LABEL
BASE_LIMIT = 8 * 1024
SYNTHETIC_BASE = ("2k", "4k", "6k")
_MIN_FILLER_TOKENS = 16
_KV_PAIRS = 3
_STARS = 4
_DRAWS = 50


class Unbuildable(Exception):
    """No row of this (task, length) can be built from the sources at hand."""


@dataclass
class Unit:
    """One numbered article in a context. `marker` is text inserted just before it (a
    key-value sentence, a star count); `answer` marks the answer-bearing article(s)."""

    text: str
    answer: bool = False
    filler: bool = False
    marker: str = ""


@dataclass
class Built:
    """A generated row: the filled context and what the prompt and metric need."""

    task: str
    length: str
    row: int
    target: int
    context: str
    context_tokens: int
    input: str
    instruction: str
    answers: list[str]
    answer_texts: list[str] = field(default_factory=list)


_RENDER: dict[str, Callable[[int, Unit], str]] = {
    "kv_retrieval": lambda i, u: f"{u.marker}Passage {i}: {u.text}\n",
    "counting_stars": lambda i, u: f"{u.marker}Passage {i}:\n{u.text}\n",
    "passage_retrieval": lambda i, u: f"Passage {i}: {u.text}\n\n",
    "passage_count": lambda i, u: f"Paragraph {i}: {u.text}\n\n",
    "single_doc_qa": lambda i, u: f"Passage {i}:\n{u.text}\n\n",
    "single_doc_sum": lambda i, u: f"Passage {i}:\n{u.text}\n\n",
    "multi_doc_qa": lambda i, u: f"Passage {i}:\n{u.text}\n",
    "multi_doc_sum": lambda i, u: f"Passage {i}:\n{u.text}\n",
}


Wanted = Callable[[int], bool]  # which rows of a cell to build, by row number


def _all(row: int) -> bool:
    return True


def _shifted(wanted: Wanted, offset: int, row: int) -> bool:
    return wanted(offset + row)


@dataclass
class Cell:
    """The rows of one (task, length), checked buildable: `size` of them, each built only
    when `rows()` reaches it (only the `wanted` ones: the others are drawn, not built).
    `records()`: each row's answer-bearing record (None for a synthetic task), drawn as
    `rows()` draws it but building nothing, so a run can decide which rows it needs (the
    prior-knowledge filter reads only questions) before paying for any context."""

    size: int
    rows: Callable[[Wanted], Iterator[Built]]
    records: Callable[[], Iterator[Record | None]]


# a fitted context: its units, the text they render, its tokens
_Fitted = tuple[list[Unit], str, int]


class Generator:
    """Builds rows of every task from one set of sources with one tokenizer."""

    def __init__(self, sources: dict[str, list[Record]], tokenizer: Tokenizer, seed: int = 42) -> None:
        self.sources = sources
        self.tok = tokenizer
        self.seed = seed
        self._counts: dict[str, int] = {}
        self._pools: dict[str, tuple[list[int], list[str]]] = {}

    def count(self, text: str) -> int:
        """Tokens of a source text (an article, a passage), remembered: the same texts are
        measured for every row. Built contexts are measured with `measure`, never kept."""
        n = self._counts.get(text)
        if n is None:
            n = self._counts[text] = self.tok.count(text)
        return n

    def measure(self, text: str) -> int:
        """Tokens of a text built once (a context, a trial cut): not remembered, or every
        context generated would stay in memory for the whole run."""
        return self.tok.count(text)

    # -- pools -------------------------------------------------------------------------
    def _noise_pool(self, spec: TaskSpec) -> tuple[list[int], list[str]]:
        """Distinct distractor texts of a task, sorted by token count (for bisecting); made
        once per task."""
        pool = self._pools.get(spec.name)
        if pool is None:
            texts = dict.fromkeys(r.context.strip() for name in spec.noise for r in self.sources.get(name, [])
                                  if r.context.strip())
            ranked = sorted((self.count(t), t) for t in texts)
            pool = self._pools[spec.name] = ([n for n, _ in ranked], [t for _, t in ranked])
        return pool

    def _real(self, spec: TaskSpec) -> list[Record]:
        recs = [r for name in spec.real for r in self.sources.get(name, []) if r.context.strip() and r.answers]
        if spec.name.startswith("multi_doc"):
            recs = [r for r in recs if len(split_passages(r.context)) > 1]
        return recs

    # -- public --------------------------------------------------------------------------
    def build(self, task: str, length: str, target: int, rows: int) -> list[Built]:
        """`rows` rows of `task` at `target` tokens; raises Unbuildable with the reason."""
        return list(self.cell(task, length, target, rows).rows(_all))

    def build_base(self, task: str, rows: int, limit: int = BASE_LIMIT) -> list[Built]:
        """The release's base set of `task` (see `base_cell`), built whole."""
        return list(self.base_cell(task, rows, limit).rows(_all))

    def cell(self, task: str, length: str, target: int, rows: int) -> Cell:
        """`rows` rows of `task` at `target` tokens, built as they are taken; raises
        Unbuildable with the reason before building any."""
        spec = TASKS[task]
        sizes, noise = self._noise_pool(spec)
        if not noise:
            raise Unbuildable(f"no distractor source available (needs one of: {', '.join(spec.noise)})")
        real = self._real(spec)
        if spec.real:
            budget = target - self._margin(target)
            real = [r for r in real if self._real_tokens(spec, r) <= budget]
            if not real:
                raise Unbuildable(f"no answer-bearing article from {', '.join(spec.real)} fits in {length} tokens")
        def drawn(row: int) -> Record | None:  # _row's first draw, alone
            return self._rng(spec, length, row).choice(real) if spec.real else None

        return Cell(rows, lambda wanted: (self._row(spec, length, target, row, real, sizes, noise)
                                          for row in range(rows) if wanted(row)),
                    lambda: (drawn(row) for row in range(rows)))

    def base_cell(self, task: str, rows: int, limit: int = BASE_LIMIT) -> Cell:
        """The release's base set (`<task>_0`, generate_dataset.py's `*_base`): for the QA
        and summary tasks, answer-bearing articles alone, under `limit` tokens, at most
        `rows` of them (multi-document summaries with their passages shuffled); for the
        synthetic tasks, rows at 2k, 4k and 6k in equal parts."""
        spec = TASKS[task]
        if not spec.real or spec.name == "passage_retrieval":
            per = rows // len(SYNTHETIC_BASE)
            cells = [self.cell(task, label, 1024 * int(label[:-1]), per) for label in SYNTHETIC_BASE]

            def synthetic(wanted: Wanted) -> Iterator[Built]:  # rows numbered on across the lengths
                for k, c in enumerate(cells):
                    for b in c.rows(partial(_shifted, wanted, k * per)):
                        b.row, b.length = k * per + b.row, BASE
                        yield b

            return Cell(sum(c.size for c in cells), synthetic, lambda: (r for c in cells for r in c.records()))
        real = [r for r in self._real(spec) if self._real_tokens(spec, r) < limit]
        if not real:
            raise Unbuildable(f"no answer-bearing article from {', '.join(spec.real)} is under {limit} tokens")
        def chosen(rng: random.Random) -> list[Record]:  # the draw made afresh: the same rows each time
            return rng.sample(real, rows) if len(real) > rows else real

        def articles(wanted: Wanted) -> Iterator[Built]:
            rng = self._rng(spec, BASE)
            for row, rec in enumerate(chosen(rng)):
                if spec.name.startswith("multi_doc"):
                    units = [Unit(p, answer=True) for p in split_passages(rec.context)]
                    if spec.name == "multi_doc_sum":
                        rng.shuffle(units)  # the rows share one RNG: drawn for a row not built too
                else:
                    units = [Unit(rec.context.strip(), answer=True)]
                if wanted(row):
                    context = "".join(_RENDER[spec.name](i, u) for i, u in enumerate(units, 1))
                    yield self._finish(spec, BASE, row, limit, context, self.measure(context), units, rec, [], rng)

        return Cell(min(rows, len(real)), articles, lambda: iter(chosen(self._rng(spec, BASE))))

    # -- internals -----------------------------------------------------------------------
    @staticmethod
    def _margin(target: int) -> int:
        return max(16, target // 100)

    def _real_tokens(self, spec: TaskSpec, rec: Record) -> int:
        if spec.name.startswith("multi_doc"):
            return sum(self.count(p) + 8 for p in split_passages(rec.context))
        return self.count(rec.context.strip()) + 8

    def _rng(self, spec: TaskSpec, length: str, row: int | None = None) -> random.Random:
        """A row's own RNG (a base cell of articles: the cell's), from the seed alone."""
        return random.Random(f"100-longbench:{self.seed}:{spec.name}:{length}" + ("" if row is None else f":{row}"))

    def _row(self, spec: TaskSpec, length: str, target: int, row: int, real: list[Record], sizes: list[int], noise: list[str]) -> Built:
        rng = self._rng(spec, length, row)
        fixed: list[Unit] = []
        rec: Record | None = None
        if spec.real:
            rec = rng.choice(real)
            if spec.name.startswith("multi_doc"):
                fixed = [Unit(p, answer=True) for p in split_passages(rec.context)]
            else:
                fixed = [Unit(rec.context.strip(), answer=True)]
        markers, keys = self._markers(spec, rng)
        reserved = sum(self.measure(m) for m in markers)
        # Like the official generator, redraw when too few articles fit to carry the
        # inserted sentences (e.g. one long distractor took the whole budget).
        for _ in range(_DRAWS):
            units = self._choose(spec, rng, target, fixed, reserved, sizes, noise)
            if len(units) >= len(markers):
                break
        rng.shuffle(units)
        self._place_markers(spec, rng, units, markers)
        units, context, n = self._fit(spec, rng, target, units, sizes, noise)
        return self._finish(spec, length, row, target, context, n, units, rec, keys, rng)

    def _markers(self, spec: TaskSpec, rng: random.Random) -> tuple[list[str], list[str]]:
        """Sentences to insert, and for KV retrieval the chained keys k0 -> k1 -> k2 -> k3."""
        if spec.name == "kv_retrieval":
            keys = [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(_KV_PAIRS + 1)]
            return [f"\n\nThe value of {keys[i]} is {keys[i + 1]}.\n\n" for i in range(_KV_PAIRS)], keys
        if spec.name == "counting_stars":
            return [f"\n\nThe little penguin counted {rng.randint(1, 100)} ★\n\n" for _ in range(_STARS)], []
        return [], []

    def _choose(self, spec: TaskSpec, rng: random.Random, target: int, fixed: list[Unit], reserved: int, sizes: list[int], noise: list[str]) -> list[Unit]:
        """Whole distractors drawn at random among those that still fit (the official loop)."""
        taken = {u.text for u in fixed}
        remaining = target - self._margin(target) - reserved - sum(self.count(u.text) + 8 for u in fixed)
        units = list(fixed)
        while True:
            copies = rng.randint(1, 3) if spec.name == "passage_count" else 1
            pick = self._pick(rng, sizes, noise, taken, remaining // copies - 8)
            if pick is None and copies > 1:
                copies, pick = 1, self._pick(rng, sizes, noise, taken, remaining - 8)
            if pick is None:
                return units
            taken.add(noise[pick])
            units += [Unit(noise[pick]) for _ in range(copies)]
            remaining -= copies * (sizes[pick] + 8)

    @staticmethod
    def _pick(rng: random.Random, sizes: list[int], noise: list[str], taken: set[str], limit: int) -> int | None:
        hi = bisect.bisect_right(sizes, limit)
        if hi <= 0:
            return None
        for _ in range(16):
            i = rng.randrange(hi)
            if noise[i] not in taken:
                return i
        free = [i for i in range(hi) if noise[i] not in taken]
        return rng.choice(free) if free else None

    def _place_markers(self, spec: TaskSpec, rng: random.Random, units: list[Unit], markers: list[str]) -> None:
        if not markers:
            return
        if len(units) < len(markers):
            raise Unbuildable(f"too few distractors fit to carry {len(markers)} inserted sentences; add shorter sources or use a longer length")
        # random passages in random order, so a KV chain is scattered as in the official generator
        for i, m in zip(rng.sample(range(len(units)), len(markers)), markers):
            units[i].marker = m

    def _fit(self, spec: TaskSpec, rng: random.Random, target: int, units: list[Unit], sizes: list[int], noise: list[str]) -> _Fitted:
        """Top the context up with one cut distractor, then make sure it is within target:
        the units, the context they render and its tokens (measured once)."""
        render = _RENDER[spec.name]
        taken = {u.text for u in units}
        free = [t for t in noise if t not in taken]
        n = self.measure("".join(render(i, u) for i, u in enumerate(units, 1)))
        if free and target - n > _MIN_FILLER_TOKENS + 8:
            trial = self._top_up(render, rng.choice(free), rng, target, n, units)
            if trial is not None:
                return trial
        return self._trim(render, target, units)

    def _top_up(self, render: Callable[[int, Unit], str], source: str, rng: random.Random, target: int, n: int,
                units: list[Unit]) -> _Fitted | None:
        """`units` with a cut of `source` inserted at a random place, cut until the context
        is within 8 tokens under `target`; None when no cut fits (the units are trimmed)."""
        ids = self.tok.encode(source)
        pos = rng.randrange(len(units) + 1)
        want = target - n - 8
        for _ in range(8):
            text = self._cut(ids, min(want, len(ids)))
            trial = units[:pos] + [Unit(text, filler=True)] + units[pos:]
            context = "".join(render(i, u) for i, u in enumerate(trial, 1))
            n = self.measure(context)
            if n <= target and (n >= target - 8 or want >= len(ids)):
                return trial, context, n
            want += target - n - (1 if n > target else 0)
            if want < _MIN_FILLER_TOKENS:
                break
        return (trial, context, n) if n <= target and text else None

    def _trim(self, render: Callable[[int, Unit], str], target: int, units: list[Unit]) -> _Fitted:
        """Drop distractors from the end until the context is within `target`."""
        while True:
            context = "".join(render(i, u) for i, u in enumerate(units, 1))
            n = self.measure(context)
            if n <= target or not units:
                return units, context, n
            drop = next((i for i in range(len(units) - 1, -1, -1) if not units[i].answer and not units[i].marker), None)
            if drop is None:
                raise Unbuildable("the answer-bearing articles alone exceed the target")
            units = units[:drop] + units[drop + 1 :]

    def _cut(self, ids: list[int], n: int) -> str:
        """The first `n` tokens of a text, ended at a word boundary when one is near."""
        text = self.tok.decode(ids[:n]).rstrip()
        if n < len(ids):
            space = max(text.rfind(" "), text.rfind("\n"))
            if space > len(text) * 0.8:
                text = text[:space].rstrip()
        return text

    def _finish(self, spec: TaskSpec, length: str, row: int, target: int, context: str, n: int, units: list[Unit], rec: Record | None, keys: list[str], rng: random.Random) -> Built:
        answer_units = [i for i, u in enumerate(units, 1) if u.answer]
        built = Built(spec.name, length, row, target, context, n, "", "", [], [u.text for u in units if u.answer])
        if spec.name == "kv_retrieval":
            key, value = keys[0], keys[1]
            built.input, built.answers = f"Answer: the value of {key} is", [value]
            built.answer_texts = [f"The value of {key} is {value}."]
        elif spec.name == "counting_stars":
            counts = [int(u.marker.split("counted ")[1].split(" ")[0]) for u in units if u.marker]
            built.input, option = _stars_question(counts, rng)
            built.answers = [str(option)]
        elif spec.name == "passage_count":
            built.answers = [str(len({u.text for u in units}))]
        elif spec.name == "passage_retrieval":
            assert rec is not None
            built.input, built.answers = rec.answers[0], [str(answer_units[0])]
        elif spec.name in ("single_doc_qa", "multi_doc_qa"):
            assert rec is not None
            built.input, built.answers = rec.input, list(rec.answers)
            built.instruction = (f"Answer the question related with Passage {','.join(map(str, answer_units))}. "
                                 if length != BASE or spec.name == "single_doc_qa"
                                 else "Answer the question related with these passages ")
        else:  # summaries: the instruction names the passage(s) and carries any query
            assert rec is not None
            built.input = _summary_input(spec.name, answer_units, rec.input)
            built.answers = list(rec.answers)
        return built


def _summary_input(task: str, answer_units: list[int], query: str) -> str:
    """A summary task's instruction: it names the passage(s) and carries any query."""
    if task == "single_doc_sum":
        lead = f"Write a one-page summary of Passage {answer_units[0]} into a few short sentences"
    else:
        lead = ("Combine and summarize the main ideas from the selected relevant passages into one cohesive "
                "summary: " + ",".join(f"Passage {i}" for i in answer_units))
    return f"{lead}: {query}" if query else f"{lead}."


def _stars_question(counts: list[int], rng: random.Random) -> tuple[str, int]:
    """The multiple-choice question of Counting Stars and the number of the right option.

    Distractors follow the official generator (two with two counts swapped, one with a
    count changed), kept distinct from the answer and each other; option 1 is always
    "unanswerable".
    """
    options: list[list[int]] = [list(counts)]
    makers = [_swap, _change, _swap]
    for make in makers:
        for _ in range(50):
            cand = make(list(counts), rng)
            if cand not in options:
                options.append(cand)
                break
    rng.shuffle(options)
    listed = ["unanswerable"] + [str(o) for o in options]
    answer = listed.index(str(counts)) + 1
    text = (
        "On this moonlit and misty night, the little penguin is looking up at the sky and concentrating on counting ★. "
        "Please help the little penguin collect the number of ★, for example: [x, x, x,...]. The summation is not "
        "required, and the numbers in [x, x, x,...]. represent the counted number of ★ by the little penguin.\n"
        "Question: Which of the following is the correct number of ★ the little penguin collect?\n"
        + "".join(f"{i}. {o}\n" for i, o in enumerate(listed, 1))
        + "Please provide your answer as a single number (1, 2, 3, 4 ...) without any explanation."
    )
    return text, answer


def _swap(counts: list[int], rng: random.Random) -> list[int]:
    i, j = rng.sample(range(len(counts)), 2)
    counts[i], counts[j] = counts[j], counts[i]
    return counts


def _change(counts: list[int], rng: random.Random) -> list[int]:
    counts[rng.randrange(len(counts))] = rng.randint(1, 100)
    return counts
