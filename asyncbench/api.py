"""The Python API: `asyncbench.evaluate(benchmark, model=..., **options) -> EvalResult`.

The same path as `asyncbench run`: options become one validated RunConfig (benchmark
options through `benchmarks.benchmark_options`, as the CLI's flags do), the engine runs
it, and the result is read back from the store, so `evaluate` and `load_run` of the same
run return equal objects. `evaluate_async` is the coroutine, for notebooks and programs
that already run an event loop.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Unpack, overload

from .config import RunConfig, RunOptions, run_options
from .errors import UserError
from .report.samples import SampleRecord, load_samples
from .run_summary import RunSummary
from .store import Store, default_cache_path

if TYPE_CHECKING:
    import pandas


class Options(RunOptions, total=False):
    """`evaluate`'s keyword options: `asyncbench run`'s flags by their long names, with
    dashes as underscores (`--max-cost` -> max_cost); benchmark-specific ones are accepted
    for their benchmark only.

    What `evaluate` accepts, checks and passes on is made from the declarations (config.py's
    run options, typed for the checker in its RunOptions; each benchmark's OPTIONS).
    tests/test_run_options.py and tests/test_benchmark_options.py check these types are
    exactly the declarations."""

    # Each benchmark's OPTIONS, by key and typed by kind (mypy needs them written out);
    # tests/test_benchmark_options.py checks they are exactly the declarations.
    # BAMBOO
    length: Literal["4k", "16k", "both"]
    strict_data: bool
    allow_unsafe_sandbox: bool
    sandbox_python: str
    sandbox_own_python: bool
    # MiniLongBench
    estimate_method: Literal["irt", "direct", "blend", "category_irt", "ridge", "stack"]
    estimate_params: str  # "shipped", "release" or a directory
    # LongBench adaptive testing (benchmarks/longbench/adaptive.py)
    adaptive: bool
    target_se: float
    adaptive_batch: int
    adaptive_start: int
    adaptive_max_samples: int
    # 100-LongBench
    lengths: Sequence[str] | str
    base_lengths: Sequence[str] | str
    base_ability: Literal["release", "paper"]
    rows: int
    seed: int
    prior_threshold: float


@dataclass
class EvalResult:
    """One stored run. `scores` is run.json's "scores"; `cost` its "cost_usd" (by purpose
    and total, from the ledger); `complete` is False when samples did not settle;
    `summary` all of run.json, by attribute (RunSummary)."""

    run_id: str
    benchmark: str
    model: str
    complete: bool
    scores: dict[str, object]  # run.json's "scores": the benchmark's score object as JSON
    cost: dict[str, float]
    summary: RunSummary = field(repr=False)
    cache: Path = field(repr=False)
    _samples: list[SampleRecord] | None = field(default=None, repr=False, compare=False)

    @property
    def samples(self) -> list[SampleRecord]:
        """Every sample with prompt, references, prediction, score and cost (read once)."""
        if self._samples is None:
            self._samples = load_samples(Store(self.cache), self.run_id)
        return self._samples

    def to_pandas(self) -> pandas.DataFrame:
        """The samples as a DataFrame (needs pandas)."""
        try:
            import pandas as pd
        except ImportError:
            raise UserError("to_pandas needs pandas: pip install pandas") from None
        return pd.DataFrame([dataclasses.asdict(r) for r in self.samples])


def _config(benchmark: str, model: str, options: Options) -> RunConfig:
    from .benchmarks import benchmark_options, option_keys

    given: dict[str, object] = dict(options)
    bench_keys = option_keys()
    run_keys = run_options()
    unknown = sorted(k for k in given if k not in run_keys and k not in bench_keys)
    if unknown:
        raise UserError(f"unknown option {unknown[0]!r} for asyncbench.evaluate; the options are run's flags "
                        f"with underscores (e.g. max_cost, lengths): {', '.join(sorted([*run_keys, *bench_keys]))}")
    tokenizer = given.get("tokenizer")
    extra = benchmark_options(benchmark, {k: v for k, v in given.items() if k in bench_keys}, model,
                              tokenizer if isinstance(tokenizer, str) else None)
    run = {"progress": False, **{k: v for k, v in given.items() if k in run_keys}}
    return RunConfig.build(benchmark, model, run, extra).validate()


Names = list[str] | tuple[str, ...]  # several benchmarks or models: an eval set (run/eval_set.py)


@overload
async def evaluate_async(benchmark: str, model: str, **options: Unpack[Options]) -> EvalResult: ...


@overload
async def evaluate_async(benchmark: Names, model: str | Names, **options: Unpack[Options]) -> list[EvalResult]: ...


@overload
async def evaluate_async(benchmark: str, model: Names, **options: Unpack[Options]) -> list[EvalResult]: ...


async def evaluate_async(benchmark: str | Names, model: str | Names,
                         **options: Unpack[Options]) -> EvalResult | list[EvalResult]:
    """Run an evaluation (cache first, as `asyncbench run`) and return its stored result.
    A list of benchmarks or models is an eval set: every (model, benchmark) run together
    under one budget, with limits shared per provider key; one EvalResult per run, in
    model-major order."""
    from .run.flow import run
    from .sim.testing import sim_if

    if isinstance(benchmark, str) and isinstance(model, str):
        cfg = _config(benchmark, model, options)
        with sim_if(cfg.uses_sim()) as sim_url:
            summary = await run(cfg, sim_url)
        if not isinstance(summary, RunSummary):
            raise UserError("dry_run=True sends nothing and stores no run; use `asyncbench run --dry-run` to price one")
        return load_run(summary.run_id, cache=cfg.storage.cache)
    return await _evaluate_set([benchmark] if isinstance(benchmark, str) else list(benchmark),
                               [model] if isinstance(model, str) else list(model), options)


async def _evaluate_set(benchmarks: list[str], models: list[str], options: Options) -> list[EvalResult]:
    """An eval set's runs; a run that failed is one UserError naming it (the others are
    stored: `load_run` reads them)."""
    from .run.eval_set import execute_set, plan_set, run_configs
    from .sim.testing import sim_if

    if options.get("dry_run"):
        raise UserError("dry_run=True sends nothing and stores no run; use `asyncbench run --dry-run` to price a set")
    cfgs = run_configs(benchmarks, [{"model": m} for m in models], {"progress": False, **options})
    with sim_if(any(c.uses_sim() for c in cfgs)) as sim_url:
        sp = await plan_set(cfgs, sim_url)
        try:
            result = await execute_set(sp)
        finally:
            await sp.aclose()
    failed = [f"{r.model} on {r.benchmark}: {r.error}" for r in result.runs if r.status == "failed"]
    if failed:
        raise UserError("; ".join(failed) + f" (the set's other runs are stored: {result.out / 'set.json'})")
    return [load_run(r.run_id, cache=cfgs[0].storage.cache) for r in result.runs]


@overload
def evaluate(benchmark: str, model: str, **options: Unpack[Options]) -> EvalResult: ...


@overload
def evaluate(benchmark: Names, model: str | Names, **options: Unpack[Options]) -> list[EvalResult]: ...


@overload
def evaluate(benchmark: str, model: Names, **options: Unpack[Options]) -> list[EvalResult]: ...


def evaluate(benchmark: str | Names, model: str | Names,
             **options: Unpack[Options]) -> EvalResult | list[EvalResult]:
    """`evaluate_async` for plain code. Inside a running event loop (a notebook cell) it
    runs on a thread of its own, so it still returns the result rather than failing."""
    import anyio

    async def go() -> EvalResult | list[EvalResult]:
        return await evaluate_async(benchmark, model, **options)

    try:
        import asyncio

        asyncio.get_running_loop()
    except RuntimeError:
        return anyio.run(go)
    results: list[EvalResult | list[EvalResult]] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            results.append(anyio.run(go))
        except BaseException as exc:  # re-raised in the caller's thread
            errors.append(exc)

    thread = threading.Thread(target=worker, name="asyncbench-evaluate")
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return results[0]


def load_run(run_id: str, cache: str | Path | None = None) -> EvalResult:
    """A stored run by id or unique prefix, as `evaluate` returned it."""
    path = Path(cache).expanduser() if cache else default_cache_path()
    if not path.is_file():
        raise UserError(f"no cache file at {path}; run a benchmark first or pass cache=PATH")
    store = Store(path)
    with store.session():
        found = store.runs.find_run(run_id)
        run = store.runs.run(found)
    benchmark, model, summary_json = run.benchmark, run.model, run.summary_json
    if not summary_json:
        raise UserError(f"run {found} has no summary yet (still running or interrupted); finish it with "
                        f"`asyncbench run --resume {found}`")
    summary = RunSummary.from_json(summary_json)
    return EvalResult(run_id=found, benchmark=benchmark, model=model, complete=summary.complete,
                      scores=summary.scores.to_json() if summary.scores is not None else {}, cost=summary.cost_usd, summary=summary, cache=path)
