"""One run, end to end: samples -> requests -> (cache | scheduler) -> store -> scores ->
aggregate -> run.json.

The run id is a hash of what determines the results (benchmark, tasks, model, endpoint
identity, generation settings), so running the same command again continues the same
run: everything already answered comes from the cache and nothing is paid twice.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from dataclasses import asdict, dataclass, field
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from itertools import islice
from typing import Any, AsyncIterator, Iterable, Iterator, Sequence, Sized

import anyio

from .benchmarks import parse_benchmark
from .benchmarks.base import LoadOptions, RunContext
from .errors import ProviderError, UserError
from .limits import RateLimiter
from .percentiles import percentiles
from .pricing import Price, PriceTable
from .progress import RunProgress
from .providers.base import ModelSpec, Provider, api_key_for, make_provider, parse_model_spec
from .scheduler import Budget, EndpointPool, Job, Outcome, Scheduler
from .store import Store, default_cache_path
from .store.duckdb_store import CachedResponse
from .tokenizers import Tokenizer, approx_count, get_tokenizer, tiktoken_encoding_for
from .types import Request, Response, Sample, SampleResult, Usage


# Requests hashed and looked up per step after the first chunk: small enough that reading
# a streamed data file never holds the event loop for long, large enough to batch lookups.
STREAM_CHUNK = 256


@dataclass
class RunConfig:
    benchmark: str
    model: str
    base_urls: list[str] = field(default_factory=list)
    endpoint_id: str | None = None
    api: str = "chat"
    data_dir: str | None = None
    cache: str | None = None
    out: str | None = None
    limit: int | None = None
    concurrency: int = 32
    rpm: float | None = None
    tpm: float | None = None
    max_cost: float | None = None
    dry_run: bool = False
    timeout_s: float = 120.0
    max_attempts: int = 6
    max_input_tokens: int | None = None
    tokenizer: str | None = None
    temperature: float = 0.0
    repeat: int = 0
    judge: str | None = None
    judge_base_urls: list[str] = field(default_factory=list)
    prices: str | None = None
    progress: bool | None = None
    backend: str = "local"  # "local" | "ray"
    ray_address: str | None = None
    ray_workers: int = 2
    extra: dict[str, Any] = field(default_factory=dict)

    def run_id(self, endpoint_id: str) -> str:
        """Stable over what changes results; blind to limits, concurrency, paths, keys."""
        ident = {k: getattr(self, k) for k in ("benchmark", "model", "api", "limit", "max_input_tokens",
                                                "tokenizer", "temperature", "repeat", "judge", "extra")}
        ident["endpoint"] = endpoint_id
        blob = json.dumps(ident, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]


class ModelClient:
    """Everything needed to talk to one model: provider, endpoint pool, limiter, price."""

    def __init__(self, spec: ModelSpec, provider: Provider, cfg: RunConfig, prices: PriceTable,
                 rpm: float | None, tpm: float | None, api_key: str | None = None) -> None:
        self.spec = spec
        self.provider = provider
        self.api_key = api_key  # handed to Ray workers only; never stored or printed
        self.price: Price = prices.price(spec.provider, spec.model)
        self.limiter = RateLimiter(rpm, tpm)
        self.pool = EndpointPool(spec.base_urls, cfg.concurrency)
        # Token counting for TPM: tiktoken for OpenAI models, ceil(chars/4) otherwise.
        enc = tiktoken_encoding_for(spec.model) if spec.provider == "openai" else None
        self.counter: Tokenizer | None = get_tokenizer(enc) if enc else None
        # Checked before the first request is sent, not before the run: a fully cached
        # re-run needs no server.
        self.reachable = False

    def count(self, text: str) -> int:
        return self.counter.count(text) if self.counter else approx_count(text)

    def request(self, *, prompt: str | None = None, messages: list[dict[str, str]] | None = None,
                max_tokens: int, temperature: float = 0.0, repeat: int = 0, chat: bool = True) -> Request:
        """A Request in the shape this provider takes: one plain user message for chat APIs,
        raw text for completion endpoints and for TGI's non-chat prompts."""
        if messages is None:
            text = prompt or ""
            raw = self.spec.api == "completion" or (self.spec.provider == "tgi" and not chat)
            if raw:
                prompt, messages = text, None
            else:
                prompt, messages = None, [{"role": "user", "content": text}]
        return Request(provider=self.spec.provider, model=self.spec.model, endpoint_id=self.spec.endpoint_id,
                       prompt=prompt, messages=messages, max_tokens=max_tokens, temperature=temperature,
                       repeat=repeat)


@dataclass
class PurposeTotals:
    requests: int = 0
    cached: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    cost_usd: float = 0.0
    cost_saved_by_cache_usd: float = 0.0


@dataclass
class Generated:
    """What `Engine.generate` returns, one entry per request in order."""

    answers: list[Response | ProviderError | None]
    cached: list[bool]
    keys: list[str]


class Engine:
    """Cache-first generation through the scheduler; one writer to the store."""

    def __init__(self, store: Store, run_id: str, progress_enabled: bool | None, max_cost: float | None,
                 timeout_s: float, max_attempts: int, backend: Any = None) -> None:
        self.store = store
        self.backend = backend  # None: this process; else a RayBackend (distributed/ray_backend.py)
        self.run_id = run_id
        self.progress_enabled = progress_enabled
        self.budget = Budget(max_cost)
        self.timeout_s = timeout_s
        self.max_attempts = max_attempts
        self.totals: dict[str, PurposeTotals] = {}
        self.fresh_latencies: list[float] = []
        self.cached_latencies: list[float] = []
        self.schedulers: list[Any] = []  # Scheduler or RayRunner: both have .stats
        self._pending_responses: list[dict[str, Any]] = []
        self._pending_failures: list[dict[str, Any]] = []
        self._flush_event = anyio.Event()
        self._db_lock = anyio.Lock()

    # -- durable writes ----------------------------------------------------------------
    async def writer(self) -> None:
        """Write responses as they arrive, in small batches, until cancelled."""
        while True:
            await self._flush_event.wait()
            self._flush_event = anyio.Event()
            await self.flush()

    async def flush(self) -> None:
        async with self._db_lock:
            responses, self._pending_responses = self._pending_responses, []
            failures, self._pending_failures = self._pending_failures, []
            if responses:
                await anyio.to_thread.run_sync(self.store.put_responses, responses)
            if failures:
                await anyio.to_thread.run_sync(self.store.put_failures, failures)

    # -- generation -----------------------------------------------------------------
    def ray_group(self, client: ModelClient) -> Any:
        """The limiter actor and workers serving this client (Ray backend only)."""
        lim = client.limiter
        return self.backend.group(client.spec, client.api_key, lim.configured_rpm, lim.configured_tpm)

    def endpoint_health(self, client: ModelClient) -> list[dict[str, Any]]:
        """Served/failed per endpoint, from this process's pool or from the Ray workers."""
        return client.pool.health() if self.backend is None else self.ray_group(client).endpoint_health()

    async def _keys_and_hits(self, requests: list[Request]) -> tuple[list[str], dict[str, CachedResponse]]:
        """Hash a chunk of requests and look them up, off the event loop (sha256 of long
        prompts releases the GIL, so this overlaps requests already in flight)."""
        def work() -> tuple[list[str], dict[str, CachedResponse]]:
            keys = [r.key() for r in requests]
            return keys, self.store.lookup(keys)

        async with self._db_lock:
            return await anyio.to_thread.run_sync(work)

    async def generate(self, client: ModelClient, requests: Iterable[Request], purpose: str,
                       samples: Sequence[Sample] | None = None, label: str | None = None) -> Generated:
        """One answer per request (None: skipped by the budget), whether it was cached, and
        its cache key.

        Requests are hashed and looked up chunk by chunk, and each chunk's misses go to
        the scheduler at once: the first wave is on the wire while the rest of a large
        run is still being read, hashed and looked up. `requests` may be a lazy iterator
        (a streamed data file); `samples[i]` is the sample of the i-th request, for the
        failure log, and may grow as the iterator runs."""
        totals = self.totals.setdefault(purpose, PurposeTotals())
        source = iter(requests)
        reqs: list[Request] = []
        keys: list[str] = []
        cached_flags: list[bool] = []
        cached_hits: dict[int, Response] = {}
        first_index: dict[str, int] = {}
        duplicates: list[tuple[int, int]] = []
        total = len(requests) if isinstance(requests, Sized) else None
        progress = RunProgress(total, 0, label or f"{purpose} {client.spec.label}", self.progress_enabled)

        async def jobs() -> AsyncIterator[Job]:
            size = client.pool.capacity()  # the first chunk fills the endpoints, at once
            while chunk := list(islice(source, size)):
                size = STREAM_CHUNK
                lo = len(reqs)
                reqs.extend(chunk)
                chunk_keys, hits = await self._keys_and_hits(chunk)
                keys.extend(chunk_keys)
                cached_flags.extend([False] * len(chunk))
                for i, key in enumerate(chunk_keys, start=lo):
                    hit = hits.get(key)
                    if hit is not None:
                        usage = Usage(hit.prompt_tokens, hit.completion_tokens, hit.cached_prompt_tokens)
                        cached_hits[i] = Response(hit.text, usage, hit.latency_ms, hit.finish_reason, "cache")
                        cached_flags[i] = True
                        totals.cached += 1
                        totals.cost_saved_by_cache_usd += client.price.cost(usage)
                        self.cached_latencies.append(hit.latency_ms)
                        progress.add_cached()
                    elif key in first_index:  # identical request twice in one run: send once
                        duplicates.append((i, first_index[key]))
                        progress.add_cached()
                    else:
                        if not client.reachable:  # only once something must be sent
                            await _check_reachable(client)
                            client.reachable = True
                        first_index[key] = i
                        req = reqs[i]
                        tokens = client.count(req.text()) + req.max_tokens
                        est = client.price.estimate(tokens - req.max_tokens, req.max_tokens)
                        yield Job(index=i, request=req, tokens=tokens, est_cost=est)
            progress.set_total(len(reqs))

        def on_outcome(outcome: Outcome) -> None:
            req = reqs[outcome.index]
            key = keys[outcome.index]
            sid = samples[outcome.index].id if samples is not None else None
            if outcome.response is not None:
                resp = outcome.response
                cost = client.price.cost(resp.usage)
                totals.requests += 1
                totals.prompt_tokens += resp.usage.prompt_tokens
                totals.completion_tokens += resp.usage.completion_tokens
                totals.cached_prompt_tokens += resp.usage.cached_prompt_tokens
                totals.cost_usd += cost
                self.fresh_latencies.append(resp.latency_ms)
                canonical = req.canonical()
                # the prompt itself is benchmark data (and the key is its hash): keep only its size
                canonical["prompt_chars"] = len(canonical.pop("prompt") or "") + sum(
                    len(m.get("content", "")) for m in canonical.pop("messages") or [])
                self._pending_responses.append({
                    "key": key, "provider": req.provider, "model": req.model, "endpoint": req.endpoint_id,
                    "request_json": json.dumps(canonical, sort_keys=True), "text": resp.text,
                    "finish_reason": resp.finish_reason, "prompt_tokens": resp.usage.prompt_tokens,
                    "completion_tokens": resp.usage.completion_tokens,
                    "cached_prompt_tokens": resp.usage.cached_prompt_tokens, "latency_ms": resp.latency_ms,
                    "cost_usd": cost, "served_by": resp.endpoint, "created_at": time.time(),
                })
                progress.advance(True, resp.usage.prompt_tokens + resp.usage.completion_tokens, cost)
            elif outcome.error is not None:
                totals.failed += 1
                err = outcome.error
                self._pending_failures.append({"key": key, "run_id": self.run_id, "sample_id": sid,
                                               "kind": err.kind, "status": err.status, "message": err.message,
                                               "attempts": outcome.attempts})
                progress.advance(False, 0, 0.0)
            self._flush_event.set()

        cost_of = lambda r: client.price.cost(r.usage)  # noqa: E731
        if self.backend is None:
            scheduler: Any = Scheduler(client.provider, client.pool, client.limiter, budget=self.budget,
                                       timeout_s=self.timeout_s, max_attempts=self.max_attempts,
                                       on_outcome=on_outcome, cost_of=cost_of)
        else:
            scheduler = self.backend.runner(self.ray_group(client), self.budget, on_outcome, cost_of)
        self.schedulers.append(scheduler)
        try:
            with progress:
                outcomes = await scheduler.run(jobs())
        finally:  # also when the data stream fails part-way: keep every answer received
            await self.flush()
        results: list[Response | ProviderError | None] = [cached_hits.get(i) for i in range(len(reqs))]
        for o in outcomes:
            results[o.index] = o.response if o.response is not None else o.error
        for i, j in duplicates:
            results[i] = results[j]
        return Generated(results, cached_flags, keys)


def _resolve_model(model: str, base_urls: list[str], cfg: RunConfig, stack: "ExitStackLike") -> ModelSpec:
    """`sim` starts the built-in simulator; `auto` picks a real API when a key is set."""
    if model == "auto":
        if os.environ.get("OPENAI_API_KEY"):
            model = "openai:gpt-4o-mini"
        elif os.environ.get("ANTHROPIC_API_KEY"):
            model = "anthropic:claude-haiku-4-5"
        else:
            model = "sim"
    if model == "sim":
        from .sim.testing import start_sim_subprocess

        proc, base_url = start_sim_subprocess([])
        stack.append(proc)
        # A fixed identity: every simulator run answers the same way, whatever its port.
        return parse_model_spec("openai-compat:sim", [base_url + "/v1"], endpoint_id="asyncbench-sim", api=cfg.api)
    return parse_model_spec(model, base_urls, endpoint_id=cfg.endpoint_id, api=cfg.api)


class ExitStackLike(list):
    """Subprocesses to stop at the end of a run (the simulator for `--model sim`)."""

    def close(self) -> None:
        from .sim.testing import stop_sim_subprocess

        for proc in self:
            stop_sim_subprocess(proc)


async def _max_input_tokens(cfg: RunConfig, spec: ModelSpec, provider: Provider) -> tuple[int | None, str]:
    if cfg.max_input_tokens:
        return cfg.max_input_tokens, "--max-input-tokens"
    if spec.provider == "tgi":
        limit = await _fleet_max_input_tokens(spec, provider)
        if limit is not None:
            return limit, f"tgi /info ({len(spec.base_urls)} endpoint{'s' if len(spec.base_urls) > 1 else ''})"
    from .prompts import max_input_tokens_for

    found = max_input_tokens_for(spec.model)
    return (found, "model-context table") if found else (None, "none")


async def _fleet_max_input_tokens(spec: ModelSpec, provider: Provider) -> int | None:
    """Ask every TGI replica's /info: the prompt must fit the smallest of them (a fleet
    can mix launch settings), and all must serve the same model, or the cache would
    file one model's answers under another's name. Replicas that are down are left to
    the pool's health checks, as long as one answers."""
    infos: dict[str, dict[str, Any]] = {}
    errors: list[str] = []

    async def ask(url: str) -> None:
        try:
            infos[url] = await provider.info(url)  # type: ignore[attr-defined]
        except ProviderError as exc:
            errors.append(f"{url}/info ({exc.message})")

    async with anyio.create_task_group() as tg:
        for url in spec.base_urls:
            tg.start_soon(ask, url)
    if not infos:
        raise UserError(f"cannot read {'; '.join(errors)}; is the TGI server up?")
    models = {str(i.get("model_id")) for i in infos.values() if i.get("model_id")}
    if len(models) > 1:
        raise UserError(f"the TGI endpoints serve different models ({', '.join(sorted(models))}); "
                        "give one model's replicas per run")
    limits = [int(i["max_input_tokens"]) for i in infos.values() if i.get("max_input_tokens")]
    return min(limits) if limits else None


def _truncation_tokenizer(cfg: RunConfig, spec: ModelSpec) -> Tokenizer:
    """The target model's tokenizer when known; cl100k_base as a documented stand-in."""
    if cfg.tokenizer:
        try:
            return get_tokenizer(cfg.tokenizer)
        except Exception as exc:  # noqa: BLE001 - any loader failure is a user error here
            raise UserError(f"cannot load tokenizer {cfg.tokenizer!r}: {exc}") from None
    enc = tiktoken_encoding_for(spec.model)
    return get_tokenizer(enc or "cl100k_base")


def _make_client(spec: ModelSpec, cfg: RunConfig, prices: PriceTable, rpm: float | None,
                 tpm: float | None) -> ModelClient:
    key = api_key_for(spec.provider, spec.base_urls)
    return ModelClient(spec, make_provider(spec, key), cfg, prices, rpm, tpm, key)


async def _check_reachable(client: ModelClient) -> None:
    """Fail fast with one line when no endpoint answers at all (wrong URL, server down)."""
    from urllib.parse import urlsplit

    errors = []
    for url in client.spec.base_urls:
        parts = urlsplit(url)
        try:
            with anyio.fail_after(5):
                stream = await anyio.connect_tcp(parts.hostname or "127.0.0.1",
                                                 parts.port or (443 if parts.scheme == "https" else 80))
                await stream.aclose()
            return
        except (OSError, TimeoutError) as exc:
            errors.append(f"{url} ({type(exc).__name__})")
    raise UserError(f"cannot reach {', '.join(errors)}; check --base-url and that the server is running")


async def execute(cfg: RunConfig) -> dict[str, Any]:
    """Run one evaluation; returns the run summary (also written to OUT/run.json)."""
    t_start = time.time()
    benchmark, tasks = parse_benchmark(cfg.benchmark)
    from .datadir import resolve_data_dir

    data_dir = resolve_data_dir(cfg.data_dir)
    cache_path = Path(cfg.cache).expanduser() if cfg.cache else default_cache_path()
    opening = None if cfg.dry_run else _open_in_background(cache_path)
    stack = ExitStackLike()
    backend = None
    try:
        opts = LoadOptions(data_dir=data_dir, tasks=tasks, limit=cfg.limit, extra=cfg.extra)
        # Streamed where the benchmark allows it: requests start while the file is read.
        samples: list[Sample] | Iterator[Sample] = (
            benchmark.iter_load(opts) if hasattr(benchmark, "iter_load") and not cfg.dry_run
            else benchmark.load(opts))
        prices = PriceTable(cfg.prices)
        spec = _resolve_model(cfg.model, cfg.base_urls, cfg, stack)
        client = _make_client(spec, cfg, prices, cfg.rpm, cfg.tpm)
        judge = None
        if cfg.judge:
            same = cfg.judge == cfg.model and not cfg.judge_base_urls
            judge_spec = spec if same else _resolve_model(cfg.judge, cfg.judge_base_urls, cfg, stack)
            judge = _make_client(judge_spec, cfg, prices, None, None)
        if not cfg.dry_run:
            backend = _make_backend(cfg)
        try:
            return await _execute(cfg, benchmark, samples, client, judge, prices, t_start, opening, backend)
        finally:
            await client.provider.aclose()
            if judge is not None and judge is not client:
                await judge.provider.aclose()
    finally:
        if backend is not None:
            backend.close()
        if opening is not None and opening.exception() is None:
            opening.result().close()  # closing twice is harmless
        stack.close()


def _open_in_background(path: Path) -> Future[Store]:
    """Open the cache in a thread while the benchmark loads: importing duckdb and opening
    the file (~70 ms, mostly outside the GIL) overlap the rest of the start-up instead of
    following it. A failure (the file locked by another process) is raised where the store
    is first needed, by `result()`."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="open-cache")
    future = pool.submit(Store, path)
    pool.shutdown(wait=False)
    return future


def _make_backend(cfg: RunConfig) -> Any:
    """None for this process; a RayBackend for `--backend ray` (Ray imported only then)."""
    if cfg.backend == "local":
        return None
    if cfg.backend != "ray":
        raise UserError(f"unknown backend {cfg.backend!r}; use local or ray")
    from .distributed.ray_backend import RayBackend

    return RayBackend(cfg.ray_address, cfg.ray_workers, cfg.concurrency, cfg.timeout_s, cfg.max_attempts)


async def _execute(cfg: RunConfig, benchmark: Any, samples: list[Sample] | Iterator[Sample], client: ModelClient,
                   judge: ModelClient | None, prices: PriceTable, t_start: float,
                   opening: Future[Store] | None, backend: Any) -> dict[str, Any]:
    spec = client.spec
    run_id = cfg.run_id(spec.endpoint_id)
    max_input, max_input_source = await _max_input_tokens(cfg, spec, client.provider)
    tokenizer = _truncation_tokenizer(cfg, spec) if max_input else None

    from .prompts import build_request_prompt

    truncated: dict[str, int] = {}

    def build(s: Sample) -> Request:
        if s.messages is not None:
            return client.request(messages=s.messages, max_tokens=s.max_tokens, temperature=cfg.temperature,
                                  repeat=cfg.repeat, chat=True)
        text, removed = (build_request_prompt(s, tokenizer=tokenizer, max_input_tokens=max_input)
                         if tokenizer else (s.prompt or "", 0))
        if removed:
            truncated[s.id] = removed
        return client.request(prompt=text, max_tokens=s.max_tokens, temperature=cfg.temperature,
                              repeat=cfg.repeat, chat=s.chat)

    if cfg.dry_run or opening is None:
        samples = list(samples)
        return _dry_run_summary(cfg, samples, [build(s) for s in samples], client, run_id, truncated, max_input)

    with opening.result() as store:
        store.start_run(run_id, cfg.benchmark, spec.label, _public_config(cfg, spec))
        engine = Engine(store, run_id, cfg.progress, cfg.max_cost, cfg.timeout_s, cfg.max_attempts, backend)

        async def ctx_generate(reqs: list[Request], purpose: str) -> list[Response | ProviderError]:
            target = judge if purpose == "judge" and judge is not None else client
            answers = (await engine.generate(target, reqs, purpose)).answers
            return [a if a is not None else ProviderError("fatal", "budget reached (--max-cost)") for a in answers]

        def ctx_make_request(spec_or_none: str | None = None, prompt: str | None = None,
                             messages: list[dict[str, str]] | None = None, max_tokens: int = 128) -> Request:
            target = judge if spec_or_none and judge is not None else client
            return target.request(prompt=prompt, messages=messages, max_tokens=max_tokens)

        ctx = RunContext(model_spec=spec.label, generate=ctx_generate, make_request=ctx_make_request,
                         options={"judge": cfg.judge, **cfg.extra},
                         map_chunks=backend.map_chunks if backend is not None else None)
        failure: Exception | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(engine.writer)
            try:
                if isinstance(samples, list):
                    kept, prep_report = await benchmark.prepare(samples, ctx)
                    kept_requests: Iterable[Request] = [build(s) for s in kept]
                else:  # streamed: prepare() is the identity for such benchmarks
                    kept, prep_report = [], {}
                    kept_requests = (build(s) for s in _collect(samples, kept))
                out = await engine.generate(client, kept_requests, "eval", kept,
                                            label=f"{cfg.benchmark} {spec.label}")
                results = await _score(benchmark, kept, out.answers, out.cached, client, truncated, ctx)
            except Exception as exc:  # noqa: BLE001 - raised below, outside the task group's ExceptionGroup
                failure = exc
            await engine.flush()
            tg.cancel_scope.cancel()
        if failure is not None:
            raise failure
        for r, key in zip(results, out.keys):
            r.key = key
        store.put_results([_result_row(run_id, r) for r in results])
        scores = benchmark.aggregate(results)
        loaded = samples if isinstance(samples, list) else kept
        summary = _summary(cfg, run_id, spec, loaded, results, engine, scores, prep_report, t_start,
                           truncated, max_input, max_input_source, prices, client)
        n_failed = summary["n_failed"]
        store.finish_run(run_id, "completed" if n_failed == 0 and summary["n_skipped_budget"] == 0 else "partial",
                         summary)
    _write_out(cfg, summary)
    return summary


def _collect(items: Iterator[Sample], into: list[Sample]) -> Iterator[Sample]:
    """Pass a stream through, keeping what went by."""
    for item in items:
        into.append(item)
        yield item


async def _score(benchmark: Any, samples: list[Sample], answers: list[Response | ProviderError | None],
                 cached: list[bool], client: ModelClient, truncated: dict[str, int],
                 ctx: RunContext) -> list[SampleResult]:
    results: list[SampleResult] = []
    ok_samples, ok_preds, ok_results = [], [], []
    for s, ans, was_cached in zip(samples, answers, cached):
        r = SampleResult(sample_id=s.id, task=s.task, status="failed", cached=was_cached,
                         truncated_tokens=truncated.get(s.id, 0), meta=dict(s.meta))
        if isinstance(ans, Response):
            r.status = "ok"
            r.prediction = ans.text
            r.prompt_tokens = ans.usage.prompt_tokens
            r.completion_tokens = ans.usage.completion_tokens
            r.cached_prompt_tokens = ans.usage.cached_prompt_tokens
            r.cost_usd = client.price.cost(ans.usage)
            r.latency_ms = ans.latency_ms
            ok_samples.append(s)
            ok_preds.append(ans.text)
            ok_results.append(r)
        elif isinstance(ans, ProviderError):
            r.error = f"{ans.kind}: {ans.message}"
        else:
            r.status = "skipped"
            r.error = "budget reached (--max-cost)"
        results.append(r)
    if ok_samples:
        scores = await benchmark.score(ok_samples, ok_preds, ctx)
        for r, sc in zip(ok_results, scores):
            r.score = sc
    return results


def _result_row(run_id: str, r: SampleResult) -> dict[str, Any]:
    row = dict(vars(r))  # shallow: dataclasses.asdict deep-copies and costs ~0.1 ms a row
    meta = row.pop("meta")
    row.update(run_id=run_id, purpose="eval", meta_json=json.dumps(meta, default=str, ensure_ascii=False))
    return row


def _public_config(cfg: RunConfig, spec: ModelSpec) -> dict[str, Any]:
    """The run's configuration as stored: no credentials exist in RunConfig by design."""
    out = asdict(cfg)
    out["resolved_model"] = spec.label
    out["endpoint_id"] = spec.endpoint_id
    return out


def _dry_run_summary(cfg: RunConfig, samples: list[Sample], requests: list[Request], client: ModelClient,
                     run_id: str, truncated: dict[str, int], max_input: int | None) -> dict[str, Any]:
    prompt_tokens = sum(client.count(r.text()) for r in requests)
    output_tokens = sum(r.max_tokens for r in requests)
    summary = {
        "run_id": run_id, "benchmark": cfg.benchmark, "model": client.spec.label, "dry_run": True,
        "n_samples": len(samples), "requests": len(requests),
        "estimated_prompt_tokens": prompt_tokens, "estimated_max_output_tokens": output_tokens,
        "estimated_cost_usd": round(client.price.estimate(prompt_tokens, output_tokens), 6),
        "token_counting": "tiktoken" if client.counter else "approx ceil(chars/4)",
        "max_input_tokens": max_input, "n_truncated": len(truncated),
    }
    return summary


def _summary(cfg: RunConfig, run_id: str, spec: ModelSpec, samples: list[Sample], results: list[SampleResult],
             engine: Engine, scores: dict[str, Any], prep_report: dict[str, Any], t_start: float,
             truncated: dict[str, int], max_input: int | None, max_input_source: str, prices: PriceTable,
             client: ModelClient) -> dict[str, Any]:
    wall = time.time() - t_start
    ev = engine.totals.get("eval", PurposeTotals())
    stats = [s.stats for s in engine.schedulers]
    latencies = engine.fresh_latencies or engine.cached_latencies
    purposes = {k: asdict(v) for k, v in engine.totals.items()}
    total_cost = sum(v.cost_usd for v in engine.totals.values())
    return {
        "run_id": run_id,
        "benchmark": cfg.benchmark,
        "model": spec.label,
        "endpoint": spec.endpoint_id,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t_start)),
        "wall_s": round(wall, 3),
        "n_samples": len(samples),
        "n_completed": sum(r.status == "ok" for r in results),
        "n_failed": sum(r.status == "failed" for r in results),
        "n_skipped_budget": sum(r.status == "skipped" for r in results),
        "n_cached": ev.cached,
        "requests_sent": sum(s.requests_sent for s in stats),
        "retries": sum(s.retries for s in stats),
        "rate_limited": sum(s.rate_limited for s in stats),
        "transient_errors": sum(s.transient_errors for s in stats),
        "prompt_tokens": ev.prompt_tokens,
        "completion_tokens": ev.completion_tokens,
        "cached_prompt_tokens": ev.cached_prompt_tokens,
        "cost_usd": round(total_cost, 6),
        "cost_saved_by_cache_usd": round(sum(v.cost_saved_by_cache_usd for v in engine.totals.values()), 6),
        "by_purpose": purposes,
        "prices_version": prices.version,
        "latency_ms": {**percentiles(latencies), "source": "requests" if engine.fresh_latencies else "cache"},
        "throughput_rps": round(sum(s.requests_sent for s in stats) / wall, 2) if wall > 0 else None,
        "truncation": {"max_input_tokens": max_input, "source": max_input_source,
                       "n_truncated": len(truncated), "tokens_removed": sum(truncated.values())},
        "endpoints": engine.endpoint_health(client),
        "backend": _backend_summary(cfg, engine, client),
        "by_task_cost": _by_task_cost(results),
        "failures": [{"sample_id": r.sample_id, "error": r.error} for r in results if r.status == "failed"][:50],
        "prepare": prep_report,
        "scores": scores,
    }


def _backend_summary(cfg: RunConfig, engine: Engine, client: ModelClient) -> dict[str, Any]:
    if engine.backend is None:
        return {"name": "local"}
    group = engine.ray_group(client)
    return {"name": "ray", "address": cfg.ray_address or "local", "workers": cfg.ray_workers,
            "workers_replaced": group.replaced}


def _by_task_cost(results: list[SampleResult]) -> dict[str, dict[str, Any]]:
    """Where the money and the time went: spend, tokens and latency per task."""
    out: dict[str, dict[str, Any]] = {}
    latencies: dict[str, list[float]] = {}
    for r in results:
        t = out.setdefault(r.task, {"samples": 0, "cost_usd": 0.0, "cached": 0, "prompt_tokens": 0,
                                    "completion_tokens": 0})
        t["samples"] += 1
        t["cached"] += int(r.cached)
        if not r.cached:
            t["cost_usd"] += r.cost_usd
            t["prompt_tokens"] += r.prompt_tokens
            t["completion_tokens"] += r.completion_tokens
            if r.latency_ms is not None:
                latencies.setdefault(r.task, []).append(r.latency_ms)
    for task, t in out.items():
        t["cost_usd"] = round(t["cost_usd"], 6)
        t["latency_ms"] = percentiles(latencies.get(task, []))
    return out


def _write_out(cfg: RunConfig, summary: dict[str, Any]) -> None:
    out = Path(cfg.out).expanduser() if cfg.out else Path("runs") / summary["run_id"]
    out.mkdir(parents=True, exist_ok=True)
    (out / "run.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False, default=_json_default))
    summary["out_dir"] = str(out)


def _json_default(o: Any) -> Any:
    if isinstance(o, float) and math.isnan(o):
        return None
    if hasattr(o, "tolist"):
        return o.tolist()
    return str(o)
