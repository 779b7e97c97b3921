"""Planning a run: the RunConfig, read once, becomes a frozen `RunPlan` — the benchmark and
its samples, one client per role, the prompt budget and tokenizer, the runner, the run id
and out folder, the price check. Nothing after planning reads the config: `execute(plan)`
(execute.py) runs it, and `--dry-run` prices it (`dry_run(plan)`) instead.

The run id is a hash of what determines the results (benchmark, tasks, model, endpoint
identity, generation settings), so running the same command again continues the same
run: everything already answered comes from the cache and nothing is paid twice.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..benchmarks import parse_benchmark
from ..benchmarks.base import Benchmark, Generating, Loaded, LoadOptions
from ..client import ModelClient, SharedEndpoints, make_client
from ..config import RunConfig
from ..errors import UserError
from ..pricing import SHAPE, PriceTable
from ..progress import StepProgress
from ..prompt_rules import PromptRules
from ..prompt_rules.budget import OFFICIAL_MARGIN, PromptBudget
from ..prompt_rules.official_models import OfficialModel, newline_stop
from ..providers import ModelSpec
from ..run_summary import DryRunSummary
from ..runners import LocalRunner, Runner
from ..sampling_rules import one_sampler_only
from ..secrets import redact_json
from ..store import Store, default_cache_path
from ..store.stored_plan import stored_plan
from ..tokenizers import Tokenizer
from ..types import Request, Sample, SampleResult
from .dry_run import Pricing
from .prompting import Prompting, Tally
from .resolve import official_model, prompt_budget, resolve_model, truncation_tokenizer

PlannedCalls = Callable[[list[Sample], Callable[[str], int]], Mapping[str, tuple[int, int, int]]]


@dataclass(frozen=True)
class Capabilities:
    """What a benchmark offers beyond `load`/`prepare`/`score`/`aggregate`, read once from
    the capabilities its class declares (benchmarks/base.py), so the engine asks none."""

    iter_load: Callable[[LoadOptions], Iterator[Sample]] | None  # streams its samples
    generate: Callable[[LoadOptions, Callable[[str], None]], Generating] | None  # builds its samples one at a time (CPU work)
    fingerprint: Callable[[], str] | None  # its data's content hash, for a streamed run's id
    rules: PromptRules  # how its samples become requests (prompt_rules/rules.py)
    planned_calls: PlannedCalls | None  # its judge / prior-knowledge calls, at most
    # an adaptive benchmark's rounds (benchmarks/longbench/adaptive.py): handed the samples
    # it may ask and `ask(batch)` (its Generated is opaque to it), it returns the rounds
    # asked and a report
    administer: Callable[[list[Sample], Callable[[list[Sample]], Awaitable[tuple[Any, list[SampleResult]]]]],
                         Awaitable[tuple[list[tuple[list[Sample], Any, list[SampleResult]]],
                                         Mapping[str, object]]]] | None
    rescores: bool  # its scores depend on this machine: a complete run's re-run scores again


def capabilities(benchmark: Benchmark) -> Capabilities:
    """The benchmark's optional capabilities (see Capabilities)."""
    return Capabilities(
        iter_load=benchmark.iter_load if benchmark.STREAMS else None,
        generate=benchmark.generate if benchmark.GENERATES else None,
        fingerprint=benchmark.fingerprint,
        rules=benchmark.RULES,
        planned_calls=benchmark.planned_calls,
        administer=benchmark.administer if benchmark.ADAPTIVE else None,
        rescores=benchmark.RESCORES,
    )


@dataclass(frozen=True)
class SampleSource:
    """The benchmark's samples: listed (read whole: `prepare` may filter them, and their
    digest is the run's data identity) or streamed (requests go out while the file is
    read; `prepare` is the identity for such benchmarks, the file's hash its identity).
    The engine takes both as a stream (`Prepared`). A dry run streams whatever need not
    be read whole to name the run: a streamed file, a generated benchmark's samples
    (named by what they are built from), `total` of them when known."""

    listed: list[Sample] | None
    stream: Iterator[Sample] | None
    data_id: str
    total: int | None = None
    drawn: Drawn | None = None  # generated (100-LongBench), in a run


@dataclass(frozen=True)
class Drawn:
    """A generated benchmark's samples in a run, both halves or neither: every sample's
    head (drawn, no prompt) for `prepare`, and what builds the samples it kept as the
    engine takes them (Generating.select)."""

    heads: list[Sample]
    select: Callable[[Callable[[str], bool]], Iterator[Sample]]


@dataclass(frozen=True)
class RunPlan:
    """Everything a run does, decided before anything is sent. It holds open resources
    (clients, the runner, the cache being opened): `aclose` ends them."""

    benchmark: Benchmark
    benchmark_name: str  # as the user named it ("longbench:hotpotqa")
    caps: Capabilities
    samples: SampleSource
    client: ModelClient  # eval (and the prior-knowledge calls)
    judge: ModelClient | None  # the judge model; the eval client's own object when the same
    judge_needed: str | None  # why the benchmark's scores need a judge (the run refuses without one)
    prompting: Prompting
    runner: Runner | None  # None: a dry run
    run_id: str
    out: Path | None  # None: a dry run
    cache_path: Path
    opening: Future[Store] | None
    prices: PriceTable
    unpriced: tuple[str, ...]
    max_cost: float | None
    progress: bool | None
    prompt_cache: bool  # mark shared prefixes for the provider's prompt cache
    options: Mapping[str, object]  # the benchmark's RunContext options
    stored_config: Mapping[str, object]  # the credential-free configuration stored with the run
    started: float

    def client_for(self, purpose: str) -> ModelClient:
        """The client of a purpose: the judge's for "judge" calls, else the evaluated model's."""
        return self.judge if purpose == "judge" and self.judge is not None else self.client

    async def aclose(self) -> None:
        """End what planning opened (each closed once; closing a store twice is harmless)."""
        try:
            await self.client.aclose()
            if self.judge is not None and self.judge is not self.client:
                await self.judge.aclose()
        finally:
            if self.runner is not None:
                await self.runner.aclose()
            if self.opening is not None and self.opening.exception() is None:
                self.opening.result().close()


@dataclass(frozen=True)
class SetShared:
    """What the runs of an eval set (eval_set.py) share: the limiter and endpoint pool of
    each provider account, one runner (closed by the set, not by a run), and one store
    (one DuckDB connection, so two runs writing the same answer never collide)."""

    endpoints: SharedEndpoints
    runner: Runner | None
    opening: Future[Store] | None


async def plan(cfg: RunConfig, sim_url: str | None = None, shared: SetShared | None = None) -> RunPlan:
    """The RunPlan of a config; what it opened is closed again when planning fails.
    `sim_url`: the simulator the command started for `--model sim` (config.uses_sim);
    `shared`: what an eval set's runs share."""
    started = time.time()
    cfg.validate()
    from ..datadir import resolve_data_dir

    data_dir = resolve_data_dir(cfg.storage.data_dir)
    benchmark, tasks = parse_benchmark(cfg.benchmark, cfg.extra, data_dir)
    caps = capabilities(benchmark)
    judge_needed = benchmark.needs_judge(tasks)
    if judge_needed and not cfg.target.judge and not cfg.mode.dry_run:  # before any sample is built or run recorded
        raise UserError(judge_needed)
    cache_path = Path(cfg.storage.cache).expanduser() if cfg.storage.cache else default_cache_path()
    opening = None if cfg.mode.dry_run else _opening(cache_path, shared)
    clients: list[ModelClient] = []
    runner: Runner | None = None
    try:
        opts = LoadOptions(data_dir=data_dir, tasks=tasks, limit=cfg.limits.limit, extra=dict(cfg.extra))
        source = await _source(cfg, caps, benchmark, opts)
        prices = PriceTable(cfg.storage.prices)
        client, judge = _clients(cfg, prices, sim_url, clients, shared)
        unpriced = _check_prices(cfg, clients)
        if cfg.sending.batch and not client.has_batch_api:
            from ..runners.batch import no_batch_api

            raise no_batch_api(client.spec.label)
        if not cfg.mode.dry_run:
            runner = _runner(cfg, shared)
        run_id = cfg.run_id(client.spec.endpoint_id, source.data_id, client.spec.label,
                            judge.spec.label if judge is not None else None)
        prompting = await _prompting(cfg, caps, client, data_dir)
        return RunPlan(
            benchmark=benchmark, benchmark_name=cfg.benchmark, caps=caps,
            samples=source, client=client, judge=judge, judge_needed=judge_needed, prompting=prompting,
            runner=runner, run_id=run_id, out=None if cfg.mode.dry_run else out_dir(cfg.storage.out, run_id, cache_path),
            cache_path=cache_path, opening=opening, prices=prices, unpriced=tuple(unpriced), max_cost=cfg.limits.max_cost,
            progress=cfg.mode.progress, prompt_cache=cfg.generation.prompt_cache == "auto",
            options={"judge": cfg.target.judge, **cfg.extra},
            stored_config=public_config(cfg, client.spec), started=started)
    except BaseException:
        try:
            for c in dict.fromkeys(clients):
                await c.aclose()
        finally:
            if runner is not None:
                await runner.aclose()
            if opening is not None and opening.exception() is None:
                opening.result().close()
        raise


async def _source(cfg: RunConfig, caps: Capabilities, benchmark: Benchmark, opts: LoadOptions) -> SampleSource:
    """The samples and what names them in the run id. Streamed where the benchmark allows
    it (requests start while the file is read; its bytes' hash names it). Generated ones
    (100-LongBench) are announced in one line, named by what they are built from, and
    none is built here: a dry run takes them as a stream and prices them as they come; a
    run takes their heads (drawn, not built), and the engine builds the samples `prepare`
    keeps while it sends (engine._built). Anything else is loaded whole and named by its
    digest."""
    if caps.generate is not None:
        def say(line: str) -> None:
            if cfg.mode.progress is not False:
                print(f"asyncbench: {cfg.benchmark}: {line}", file=sys.stderr, flush=True)

        generating = caps.generate(opts, say)
        say(generating.what)
        if cfg.mode.dry_run:
            return SampleSource(None, generating.samples, generating.fingerprint, generating.total)
        heads = Loaded(generating.heads(), generating.notes)
        return SampleSource(None, None, generating.fingerprint, len(heads), Drawn(heads, generating.select))
    if caps.iter_load is not None:  # the benchmark hashes its file's bytes (content, not path)
        return SampleSource(None, caps.iter_load(opts), caps.fingerprint() if caps.fingerprint else "")
    listed = benchmark.load(opts)
    return SampleSource(listed, None, samples_digest(listed), len(listed))


def _opening(cache_path: Path, shared: SetShared | None) -> Future[Store]:
    """The store being opened: an eval set's one, else this run's own."""
    return shared.opening if shared is not None and shared.opening is not None else open_in_background(cache_path)


def _runner(cfg: RunConfig, shared: SetShared | None) -> Runner:
    """The runner: an eval set's one (lent: the set closes it), else this run's own."""
    return shared.runner if shared is not None and shared.runner is not None else runner_for(cfg)


def _clients(cfg: RunConfig, prices: PriceTable, sim_url: str | None, opened: list[ModelClient],
             set_shared: SetShared | None = None) -> tuple[ModelClient, ModelClient | None]:
    """The eval client and the judge's (the same object when the judge is the same model:
    one limiter and pool for both); each appended to `opened` as it is made, and pointed
    at its provider account's limiter and pool when an eval set shares them (`shared`)."""
    shared = set_shared.endpoints if set_shared is not None else None
    target, limits = cfg.target, cfg.limits

    def resolved(model: str, base_urls: tuple[str, ...]) -> ModelSpec:
        return resolve_model(model, base_urls, sim_url, endpoint_id=target.endpoint_id, api=target.api,
                             stream=cfg.generation.stream == "on")

    spec = resolved(cfg.model, target.base_urls)
    client = make_client(spec, prices, concurrency=limits.concurrency, rpm=limits.rpm, tpm=limits.tpm,
                         max_response_bytes=limits.max_response_bytes)
    opened.append(client)
    if shared is not None:
        shared.attach(client)
    if not target.judge:
        return client, None
    if target.judge == cfg.model and not target.judge_base_urls:
        return client, client
    judge = make_client(resolved(target.judge, target.judge_base_urls), prices, concurrency=limits.concurrency,
                        max_response_bytes=limits.max_response_bytes)
    opened.append(judge)
    if shared is not None:
        shared.attach(judge)
    return client, judge


async def _prompting(cfg: RunConfig, caps: Capabilities, client: ModelClient, data_dir: Path | None) -> Prompting:
    """How samples become requests, as the benchmark's prompt rules say: the official open
    model where the rules prompt them and the server is one, the prompt budget (none for
    a benchmark's release requests, which are sent uncut) and the tokenizer that cuts to
    it (asked of a server only where something may be cut)."""
    spec, rules = client.spec, caps.rules
    maxlen_path = rules.budget_table.path(data_dir) if rules.budget_table is not None else None
    open_model, official_info = None, None
    if rules.open_models and rules.budget_table is not None:  # pred.py's open-model prompts (official_models.py)
        open_model, official_info = await official_model(cfg.target.official_model, spec, client.provider,
                                                         maxlen_path, rules.budget_table.folder)
    elif cfg.target.official_model:
        raise UserError(f"--official-model is LongBench pred.py's model name; {cfg.benchmark} does not use it")
    release = rules.release
    budget = (PromptBudget(None, None, "none: the release sends prompts uncut") if release is not None
              else await prompt_budget(cfg.generation.max_input_tokens, spec, client.provider, maxlen_path,
                                       open_model))
    if release is None and budget.input is None and budget.total is None and rules.needs_context:
        raise UserError(client.unreachable or  # a down server, said first
                        f"cannot find {spec.label}'s context length (not in the benchmark's model2maxlen.json or "
                        "the model-context table, and the server does not report it); pass --max-input-tokens N "
                        "(its context minus 500)")
    _say_open_model(client, official_info, open_model, budget)
    tokenizer: Tokenizer | None = None
    tokenizer_name, stand_in = "none", False
    if budget.input is not None or budget.total is not None:
        tokenizer, tokenizer_name, stand_in = await truncation_tokenizer(cfg.generation.tokenizer, cfg.limits.timeout_s,
                                                                         spec, client.provider, open_model)
    limits: dict[str, object] = {"budget": budget.describe(), "tokenizer": tokenizer_name,
                                 "tokenizer_stand_in": stand_in}
    if official_info is not None:
        limits["official"] = official_info
    if release is not None:
        limits["release_requests"] = _as_sent(spec, release.describe(spec.provider, client.serves_open_models))
    newline = await newline_stop(client.provider, spec.base_urls, tokenizer) if open_model else None
    return Prompting(client, cfg.generation.temperature, cfg.generation.repeat, rules, budget, tokenizer, open_model,
                     newline, limits)


def _as_sent(spec: ModelSpec, described: dict[str, object]) -> dict[str, object]:
    """The release's requests as this provider sends them: an Anthropic model that refuses
    `temperature` and `top_p` together is sent temperature alone (sampling_rules.py)."""
    if spec.provider == "anthropic" and "top_p" in described and one_sampler_only(spec.model):
        return {**described, "top_p": None, "top_p_not_sent": f"{spec.model} refuses temperature and top_p together"}
    return described


def _say_open_model(client: ModelClient, official_info: dict[str, object] | None, open_model: OfficialModel | None,
                    budget: PromptBudget) -> None:
    """What a run on an open-model server says before it sends, once the server has
    answered (a down one is said first, alone): that pred.py does not name its model (and
    how to name it), or that its context is smaller than pred.py's model's, so prompts
    are cut further to fit it."""
    if official_info is not None and (notice := official_info.pop("notice", None)) is not None \
            and not client.unreachable:
        _say(str(notice))
    if open_model is not None and budget.total is not None and budget.total < open_model.maxlen + OFFICIAL_MARGIN:
        _say(f"{client.spec.label}: the server's context ({budget.total} tokens) is smaller than {open_model.name}'s "
             f"({open_model.maxlen + OFFICIAL_MARGIN}: pred.py's {open_model.maxlen}-token prompts and their answers); "
             "prompts that would not fit are cut further (run.json truncation.fitted)")


def _say(line: str) -> None:
    """One line on stderr, said while planning: before anything is sent."""
    print(f"asyncbench: {line}", file=sys.stderr, flush=True)


def runner_for(cfg: RunConfig) -> Runner:
    """The runner the config names: the provider's batch API (--batch), this process
    (local) or Ray workers (imported only when chosen: Ray is an optional extra)."""
    sending, limits = cfg.sending, cfg.limits
    if sending.batch:
        if sending.backend != "local":
            raise UserError("--batch sends through the provider's batch API: it takes no --backend")
        from ..runners.batch import BatchRunner

        return BatchRunner(limits.timeout_s, limits.max_attempts, wait=not sending.no_wait,
                           fallback=sending.batch_fallback, progress=cfg.mode.progress)
    if sending.backend == "local":
        return LocalRunner(limits.timeout_s, limits.max_attempts)
    if sending.backend != "ray":
        raise UserError(f"unknown backend {sending.backend!r}; use local or ray")
    from ..runners.ray import RayRunner

    return RayRunner(sending.ray_address, sending.ray_workers, limits.concurrency, limits.timeout_s,
                     limits.max_attempts, shared_limiter=sending.ray_shared_limiter)


def _check_prices(cfg: RunConfig, clients: list[ModelClient]) -> list[str]:
    """Models whose cost is unknown. --max-cost cannot be kept for them: refuse to start
    (nothing sent yet); without a budget, warn once and label their costs "unpriced"."""
    unpriced = list(dict.fromkeys(c.spec.label for c in clients if not c.price.priced))
    if unpriced and cfg.limits.max_cost is not None:
        raise UserError(f"{', '.join(unpriced)} has no price in asyncbench's table, so --max-cost cannot be kept; "
                        f"pass --prices FILE giving its USD per million tokens ({SHAPE})")
    if unpriced and not cfg.mode.dry_run:
        print(f"asyncbench: warning: {', '.join(unpriced)} has no price; its cost shows as unpriced "
              "(pass --prices FILE to price it)", file=sys.stderr)
    return unpriced


def open_in_background(path: Path) -> Future[Store]:
    """Open the cache in a thread while the benchmark loads: importing duckdb and opening
    the file (~70 ms, mostly outside the GIL) overlap the rest of the start-up instead of
    following it. A failure (the file locked by another process) is raised where the store
    is first needed, by `result()`."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="open-cache")
    future = pool.submit(Store, path, True)  # kept open between batches while nobody else waits
    pool.shutdown(wait=False)
    return future


def samples_digest(samples: list[Sample]) -> str:
    """sha256 of what the samples ask and expect, in order."""
    h = hashlib.sha256()
    for s in samples:
        h.update(json.dumps([s.id, s.task, s.messages, s.answers, s.max_tokens, s.metric, s.chat],
                            default=str, ensure_ascii=False).encode())
        h.update((s.prompt or "").encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def public_config(cfg: RunConfig, spec: ModelSpec) -> dict[str, object]:
    """The run's configuration as stored: no credentials exist in RunConfig by design."""
    out = cfg.flat()
    out["resolved_model"] = spec.label
    out["endpoint_id"] = spec.endpoint_id
    redacted: dict[str, object] = redact_json(out)  # URL user-info, keys echoed into paths...
    return redacted


def _default_name(run_id: str, cache: Path | None) -> str:
    from ..store import default_cache_path

    if cache is None or cache.expanduser().resolve() == default_cache_path().expanduser().resolve():
        return run_id
    return f"{run_id}-{hashlib.sha256(str(cache.expanduser().resolve()).encode()).hexdigest()[:6]}"


# in an --out folder's name, stands for the run id (an eval set names each run's folder so)
RUN_ID = "{run_id}"


def out_dir(out: str | None, run_id: str, cache: Path | None = None) -> Path:
    """The run's output folder, made and test-written before any request is sent: an
    unwritable --out found after the work would lose the report of a paid-for run.
    `{run_id}` in `out` is the run's id. Without --out: runs/RUN_ID, or with a cache other
    than the default runs/RUN_ID-CACHE (a hash of the cache's path): the run id does not
    depend on the cache, and a partial run on --cache /tmp/x.duckdb once replaced the
    complete run's run.json."""
    path = Path(out.replace(RUN_ID, run_id)).expanduser() if out else Path("runs") / _default_name(run_id, cache)
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".asyncbench-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise UserError(f"cannot write the output folder {path}: {exc.strerror or exc}; "
                        "pass --out DIR in a writable place") from None
    return path


# A streamed dry run's window: samples priced together (their prompt-cache prefixes found
# among them), then let go; bounded in prompt text, so memory stays flat however many.
DRY_WINDOW_SAMPLES = 512
DRY_WINDOW_CHARS = 8 << 20


async def dry_run(p: RunPlan) -> DryRunSummary:
    """What the plan would send and cost, sending nothing (estimate.Pricing). A streamed
    source is priced a window at a time as its samples come (a progress bar over them, a
    checkpoint between two so one Ctrl-C stops it); a listed one in one window."""
    import anyio

    tally = Tally()
    stored = stored_plan(p.cache_path, p.run_id, [])
    pricing = Pricing(p.client, stored, lambda keys: _cached(p, keys))
    if p.samples.listed is not None:
        pricing.add(p.samples.listed, [p.prompting.build(s, tally) for s in p.samples.listed])
    else:
        window: list[Sample] = []
        requests: list[Request] = []
        chars = 0
        with StepProgress(p.samples.total, f"pricing {p.benchmark_name}", p.progress) as bar:
            for s in p.samples.stream or ():
                window.append(s)
                requests.append(p.prompting.build(s, tally))
                chars += len(s.prompt or "") + sum(len(m.get("content", "")) for m in s.messages or ())
                if len(window) >= DRY_WINDOW_SAMPLES or chars >= DRY_WINDOW_CHARS:
                    pricing.add(window, requests)
                    window, requests, chars = [], [], 0
                bar.advance()
                await anyio.lowlevel.checkpoint()
            pricing.add(window, requests)
    planned = p.caps.planned_calls(pricing.samples, p.client.count) if p.caps.planned_calls is not None else {}
    return pricing.summary(p.benchmark_name, p.judge, p.judge_needed, p.run_id, tally.truncated,
                           p.prompting.limits_found(tally), planned)


def _cached(p: RunPlan, keys: list[str]) -> set[str]:
    """The cache's answers among `keys` (read-only; empty when it cannot be read)."""
    stored = stored_plan(p.cache_path, p.run_id, keys)
    return stored.cached if stored is not None else set()
