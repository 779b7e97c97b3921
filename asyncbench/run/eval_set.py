"""Eval sets: several models x several benchmarks as one plan, one budget, one output.

A set is a list of RunConfigs, one per (model, benchmark). `plan_set` plans every run
before anything is sent (so a wrong model name is found before a cent is paid), with
the clients of one provider account (provider + endpoints + API key, `account_key`)
sharing one rate limiter and endpoint pool: providers enforce RPM/TPM per key, so two
runs on one key must not each believe they own the whole limit. `execute_set` runs the
plans together in one task group under one `--max-cost` Budget that counts what every
run of the set paid before. Each run keeps its usual id (a hash of what determines its
results), so running the same set again continues every run from the cache; one run
failing does not stop the others, whose work is booked as usual.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import time
from collections.abc import AsyncIterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

import anyio
import tomllib

from ..client import ModelClient, SharedEndpoints
from ..config import RunConfig, run_options, run_values
from ..errors import RunInterrupted, UserError
from ..run_summary import DryRunSummary, RunSummary
from ..runners import Runner
from ..runners.base import MapChunks, OnEvent, RunnerReport
from ..scheduler import Budget, Job
from ..store import Store
from .execute import execute
from .plan import RUN_ID, RunPlan, SetShared, dry_run, open_in_background, plan, runner_for


def model_keys() -> tuple[str, ...]:
    """What a set file's [[models]] entry may set for its model alone (the run options
    declared `per_model`); everything else is the set's (one cache, one budget, one
    backend, the same samples for every model)."""
    return tuple(name for name, o in run_options().items() if o.how.per_model)


def split_benchmarks(arg: str) -> list[str]:
    """`longbench:hotpotqa,qasper,minilongbench` -> ["longbench:hotpotqa,qasper", "minilongbench"]:
    a comma starts a new benchmark where the next name is one (a registered benchmark or
    `jsonl:`), else it continues the previous benchmark's task list."""
    from ..benchmarks import benchmark_classes

    known = set(benchmark_classes())
    out: list[str] = []
    for piece in (p.strip() for p in arg.split(",")):
        if not piece:
            continue
        head = piece.partition(":")[0]
        if out and head not in known and not out[-1].startswith("jsonl:"):
            out[-1] = f"{out[-1]},{piece}"
        else:
            out.append(piece)
    return out


def run_configs(benchmarks: Sequence[str], models: Sequence[Mapping[str, object]],
                options: Mapping[str, object]) -> list[RunConfig]:
    """One validated RunConfig per (model, benchmark): the set's `options` (run options
    and benchmark options by key) with each model's own (`model_keys`) over them. A
    benchmark option reaches the benchmarks that declare it; one that none of them reads
    is an error."""
    from ..benchmarks import benchmark_classes, benchmark_options, family_of

    given = _benchmark_given(benchmarks, options)
    shared = run_values(options)
    cfgs = []
    for entry in models:
        model, own = _model_entry(entry)
        values = {**shared, **run_values(own)}
        tokenizer = values.get("tokenizer")
        for bench in benchmarks:
            chosen = benchmark_classes().get(family_of(bench))
            mine = {o.key for o in chosen.OPTIONS} if chosen is not None else set()
            extra = benchmark_options(bench, {k: v for k, v in given.items() if k in mine}, model,
                                      tokenizer if isinstance(tokenizer, str) else None)
            cfgs.append(RunConfig.build(bench, model, values, extra).validate())
    return cfgs


def _benchmark_given(benchmarks: Sequence[str], options: Mapping[str, object]) -> dict[str, object]:
    """The benchmark options given; an unknown option, one a set file may not set, or one
    no benchmark of the set reads, is one UserError."""
    from ..benchmarks import benchmark_classes, family_of, option_keys

    bench_keys = option_keys()
    run = run_options()
    unknown = sorted(k for k in options if k not in run and k not in bench_keys)
    if unknown:
        raise UserError(f"unknown option {unknown[0]!r} in the set; the options are run's flags with underscores "
                        "(e.g. max_cost, limit) and the benchmarks' options")
    barred = sorted(k for k in options if k in run and not run[k].how.set_file)
    if barred:
        raise UserError(f"{barred[0]!r} cannot be set in a set file; give {run[barred[0]].flag} on the command line")
    given = {k: v for k, v in options.items() if k in bench_keys and v not in (None, False)}
    families = {family_of(b) for b in benchmarks}
    declared = {o.key for name, cls in benchmark_classes().items() if name in families for o in cls.OPTIONS}
    for key in given:
        if key not in declared:
            raise UserError(f"{bench_keys[key]} is an option of none of the set's benchmarks ({', '.join(benchmarks)})")
    return given


def _model_entry(entry: Mapping[str, object]) -> tuple[str, dict[str, object]]:
    """A set's model: its spec and its own options (`model_keys` only)."""
    model = entry.get("model")
    if not isinstance(model, str) or not model:
        raise UserError(f"each model of a set needs `model = \"provider:name\"` (text; got {model!r:.60})")
    own = {k: v for k, v in entry.items() if k != "model"}
    if "base_url" in own:  # one endpoint, as `--base-url URL` names it
        own["base_urls"] = [*_listed(own.pop("base_url")), *_listed(own.get("base_urls", []))]
    allowed = model_keys()
    bad = sorted(k for k in own if k not in allowed)
    if bad:
        raise UserError(f"model {model}: {bad[0]!r} cannot be set per model; per-model options are "
                        f"{', '.join(allowed)} (put the others under [options])")
    return model, own


def _listed(value: object) -> list[object]:
    return [value] if isinstance(value, str) else list(value) if isinstance(value, list) else [value]


def load_set_file(path: str | Path, overrides: Mapping[str, object] | None = None) -> list[RunConfig]:
    """A set file (TOML): `benchmarks = [...]`, `[[models]]` entries (`model = "..."` and
    its own `model_keys`) and `[options]` shared by every run; `overrides` (the command
    line's run flags) win over [options]."""
    file = Path(path).expanduser()
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"cannot read the set file {file}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{file} is not valid TOML ({exc}); see examples/eval_set.toml") from None
    extra_keys = sorted(set(data) - {"benchmarks", "models", "options"})
    if extra_keys:
        raise UserError(f"{file}: unknown key {extra_keys[0]!r}; a set file has benchmarks, [[models]] and [options]")
    benchmarks, models, options = data.get("benchmarks"), data.get("models"), data.get("options", {})
    if isinstance(benchmarks, str):
        benchmarks = split_benchmarks(benchmarks)
    if not isinstance(benchmarks, list) or not benchmarks or not all(isinstance(b, str) for b in benchmarks):
        raise UserError(f"{file}: `benchmarks` must list at least one benchmark, e.g. benchmarks = [\"minilongbench\"]")
    if not isinstance(models, list) or not models or not all(isinstance(m, dict) for m in models):
        raise UserError(f"{file}: add at least one [[models]] table with model = \"provider:name\"")
    if not isinstance(options, dict):
        raise UserError(f"{file}: [options] must be a table")
    return run_configs(benchmarks, models, {**options, **(overrides or {})})


class _Borrowed:
    """The set's one runner (Ray: one cluster connection and its workers) lent to each
    run: a run's `aclose` must not end it for the others; the set closes it."""

    def __init__(self, runner: Runner) -> None:
        self.inner = runner

    @property
    def map_chunks(self) -> MapChunks | None:
        return self.inner.map_chunks

    async def run(self, client: ModelClient, jobs: AsyncIterable[Job], on_event: OnEvent, *,
                  budget: Budget) -> RunnerReport:
        return await self.inner.run(client, jobs, on_event, budget=budget)

    async def aclose(self) -> None:
        pass


@dataclass
class SetPlan:
    """Every run of the set, planned; `aclose` ends what planning opened."""

    plans: list[RunPlan]
    out: Path | None  # where set.json goes (None: a dry run)
    max_cost: float | None
    endpoints: SharedEndpoints
    runner: Runner | None = None  # the shared runner (--backend ray), closed by the set
    opening: Future[Store] | None = None  # the set's one store

    async def aclose(self) -> None:
        try:
            for p in self.plans:
                await p.aclose()
        finally:
            try:
                if self.runner is not None:
                    await self.runner.aclose()
            finally:
                if self.opening is not None and self.opening.exception() is None:
                    self.opening.result().close()


def set_out(cfgs: Sequence[RunConfig]) -> Path:
    """The set's folder: --out, else runs/set-<hash of its (model, benchmark) pairs>."""
    if cfgs[0].storage.out:
        return Path(cfgs[0].storage.out).expanduser()
    digest = hashlib.sha256(json.dumps(sorted((c.model, c.benchmark) for c in cfgs)).encode()).hexdigest()[:12]
    return Path("runs") / f"set-{digest}"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")[:80] or "run"


async def plan_set(cfgs: Sequence[RunConfig], sim_url: str | None = None) -> SetPlan:
    """Plan every run; the first that cannot be planned is one UserError naming its model
    and benchmark, raised before anything is sent (what was opened is closed)."""
    if not cfgs:
        raise UserError("an eval set needs at least one model and one benchmark")
    first = cfgs[0]
    dry = first.mode.dry_run
    out = None if dry else set_out(cfgs)
    endpoints = SharedEndpoints()
    runner = runner_for(first) if first.sending.backend == "ray" and not dry else None
    opening = None
    if not dry:  # one store for the set: one connection, so two runs' writes never collide
        from ..store import default_cache_path

        opening = open_in_background(Path(first.storage.cache).expanduser() if first.storage.cache
                                     else default_cache_path())
    shared = SetShared(endpoints, _Borrowed(runner) if runner is not None else None, opening)
    sp = SetPlan([], out, first.limits.max_cost, endpoints, runner, opening)
    try:
        for cfg in cfgs:
            if out is not None:
                # the run id in the name: models "m/x", "m_x" and "m x" slug alike, and names
                # equal in their first 80 characters cut alike; run ids differ
                named = str(out / f"{_slug(cfg.model)}--{_slug(cfg.benchmark)}--{RUN_ID}")
                cfg = dataclasses.replace(cfg, storage=dataclasses.replace(cfg.storage, out=named))
            try:
                p = await plan(cfg, sim_url, shared)
            except UserError as exc:
                raise UserError(f"model {cfg.model} on {cfg.benchmark}: {exc}") from None
            sp.plans.append(p)
        seen: dict[str, RunPlan] = {}
        for p in sp.plans:
            if p.run_id in seen:
                raise UserError(f"{p.client.spec.label} on {p.benchmark_name} is in the set twice (run {p.run_id}); "
                                "list each model and benchmark once")
            seen[p.run_id] = p
    except BaseException:
        await sp.aclose()
        raise
    return sp


@dataclass
class SetRun:
    """One (model, benchmark) of a set: its run id, how it ended, its summary."""

    model: str
    benchmark: str
    run_id: str
    status: str  # complete | partial | failed | interrupted | pending
    summary: RunSummary | None = None
    error: str | None = None

    def to_json(self) -> dict[str, object]:
        return {"model": self.model, "benchmark": self.benchmark, "run_id": self.run_id, "status": self.status,
                **({"error": self.error} if self.error else {})}


@dataclass
class SetSummary:
    """The set's runs and its totals over them (every invocation of each run)."""

    runs: list[SetRun]
    out: Path
    wall_s: float = 0.0
    totals: dict[str, float] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return all(r.status == "complete" for r in self.runs)

    def to_json(self) -> dict[str, object]:
        return {"runs": [r.to_json() for r in self.runs], "complete": self.complete, "wall_s": round(self.wall_s, 3),
                "totals": self.totals}


def set_totals(runs: Sequence[SetRun]) -> dict[str, float]:
    """Cost, tokens and requests sent over every run (all their invocations), and what
    this invocation sent and paid. A request is an HTTP call the servers received
    (invocation `requests`: retries, 429s and failures included), not an answer (`sent`)."""
    cost = tokens = requests = requests_now = cost_now = 0.0
    for r in runs:
        if r.summary is None:
            continue
        cost += float(r.summary.cost_usd.get("total", 0.0))
        total = r.summary.tokens.get("total", {})
        tokens += total.get("prompt_tokens", 0) + total.get("completion_tokens", 0)
        requests += sum(inv["requests"] for inv in r.summary.invocations)
        requests_now += r.summary.this_invocation["requests"]
        cost_now += r.summary.this_invocation["cost_usd"]
    return {"cost_usd": round(cost, 6), "tokens": int(tokens), "requests": int(requests),
            "requests_now": int(requests_now), "cost_usd_now": round(cost_now, 6)}


def write_set_json(out: Path, runs: Sequence[SetRun]) -> None:
    """set.json: each run's model, benchmark, id and status (`report --leaderboard` reads it)."""
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "set.json.tmp"
    tmp.write_text(json.dumps([r.to_json() for r in runs], indent=2) + "\n")
    tmp.replace(out / "set.json")


def _paid_before(plans: Sequence[RunPlan]) -> float:
    """What every run of the set paid in earlier invocations (the set's budget counts it)."""
    total = 0.0
    for p in plans:
        assert p.opening is not None
        store = p.opening.result()
        with store.session():
            total += sum(g.cost_usd for g in store.runs.ledger(p.run_id).requests)
    return total


async def execute_set(sp: SetPlan) -> SetSummary:
    """Run every plan of the set concurrently under one Budget. A run that fails is
    recorded as failed with its one-line error (the others go on); a run that ends with
    samples unsettled is partial. set.json is written before and after."""
    if sp.out is None:
        raise ValueError("a dry-run set sends nothing: price it with dry_run_set")
    started = time.monotonic()
    runs = [SetRun(p.client.spec.label, p.benchmark_name, p.run_id, "pending") for p in sp.plans]
    write_set_json(sp.out, runs)
    budget = Budget(sp.max_cost, spent=_paid_before(sp.plans))
    stopped: list[RunInterrupted] = []

    async def one(i: int, p: RunPlan) -> None:
        try:
            summary = await execute(p, budget)
        except RunInterrupted as stop:
            # a KeyboardInterrupt: raised out of a task it would leave the event loop at
            # once, before the other runs have booked their own interruption
            stopped.append(stop)
            return
        except Exception as exc:  # this run's failure; the others' work goes on
            runs[i].status, runs[i].error = "failed", _one_line(exc)
            return
        runs[i].summary = summary
        runs[i].status = "complete" if summary.complete else "partial"

    try:
        async with anyio.create_task_group() as tg:
            for i, p in enumerate(sp.plans):
                tg.start_soon(one, i, p)
    finally:
        for r in runs:
            if r.status == "pending":
                r.status = "interrupted"
        write_set_json(sp.out, runs)
    if stopped:  # every run has booked what it did
        raise stopped[0]
    return SetSummary(runs, sp.out, time.monotonic() - started, set_totals(runs))


def _one_line(exc: BaseException) -> str:
    """An error as one line: a task group's first inner error, its first line."""
    while isinstance(getattr(exc, "exceptions", None), (list, tuple)) and exc.exceptions:  # type: ignore[attr-defined]
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    return (str(exc).splitlines() or [""])[0] or type(exc).__name__


class SetDryRun(TypedDict):
    """A set's dry run (`run --set ... --dry-run --json` prints it)."""

    dry_run: bool
    runs: list[DryRunSummary]
    totals: dict[str, float | str]  # requests, and USD in each mode ("unpriced": a model has no price)


async def dry_run_set(sp: SetPlan) -> SetDryRun:
    """Each run priced as `run --dry-run` prices it (list, batch, prompt cache), and the
    set's totals: requests to send (every purpose's), and the cost in each mode
    ("unpriced" when a model has no price)."""
    runs: list[DryRunSummary] = [await dry_run(p) for p in sp.plans]
    modes = ("list", "batch", "prompt_cache", "batch_prompt_cache")
    totals: dict[str, float | str] = {"requests": sum(int(r["estimated_requests"]) for r in runs)}
    costs = [r["estimated_cost_usd"] for r in runs]
    totals["estimated_cost_usd"] = "unpriced" if "unpriced" in costs else round(sum(float(c) for c in costs), 6)
    for mode in modes:
        values = [r["by_purpose"]["eval"].get("cost_usd_by_mode", {}).get(mode, 0.0) for r in runs]
        totals[f"eval_{mode}_usd"] = ("unpriced" if "unpriced" in values
                                      else round(sum(float(v) for v in values), 6))
    return {"dry_run": True, "runs": runs, "totals": totals}
