"""One run, end to end: samples -> requests -> (cache | runner) -> store -> scores ->
aggregate -> run.json.

The run id is a hash of what determines the results (benchmark, tasks, model, endpoint
identity, generation settings), so running the same command again continues the same
run: everything already answered comes from the cache and nothing is paid twice.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence, Sized
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import anyio

from .benchmarks import parse_benchmark
from .benchmarks.base import Benchmark, LoadOptions, RunContext
from .client import ModelClient, check_reachable, make_client
from .config import RunConfig
from .errors import ProviderError
from .pricing import PriceTable
from .progress import RunProgress
from .resolve import SimProcesses, max_input_tokens, resolve_model, truncation_tokenizer
from .run_summary import Accounts, PurposeTotals, dry_run_summary, out_dir, public_config, run_summary, write_out
from .runners import Runner, make_runner
from .scheduler import Budget, Job, Outcome
from .secrets import redact, redact_json, secret_values, strip_userinfo
from .store import Store, default_cache_path
from .store.duckdb_store import CachedResponse, FailureRow, ResponseRow
from .types import Request, Response, Sample, SampleResult, Usage

# Requests hashed and looked up per step after the first chunk: small enough that reading
# a streamed data file never holds the event loop for long, large enough to batch lookups.
STREAM_CHUNK = 256


@dataclass
class Generated:
    """What `Engine.generate` returns, one entry per request in order."""

    answers: list[Response | ProviderError | None]
    cached: list[bool]
    keys: list[str]


class Engine:
    """Cache-first generation through the scheduler; one writer to the store."""

    def __init__(self, store: Store, run_id: str, progress_enabled: bool | None, max_cost: float | None,
                 runner: Runner) -> None:
        self.store = store
        self.runner = runner
        self.run_id = run_id
        self.progress_enabled = progress_enabled
        self.budget = Budget(max_cost)
        self.accounts = Accounts()
        self.secrets = secret_values()
        self.pending_responses: list[ResponseRow] = []
        self.pending_failures: list[FailureRow] = []
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
            responses, self.pending_responses = self.pending_responses, []
            failures, self.pending_failures = self.pending_failures, []
            if responses:
                await anyio.to_thread.run_sync(self.store.put_responses, responses)
            if failures:
                await anyio.to_thread.run_sync(self.store.put_failures, failures)

    def wake_writer(self) -> None:
        self._flush_event.set()

    # -- generation -----------------------------------------------------------------
    async def keys_and_hits(self, requests: list[Request]) -> tuple[list[str], dict[str, CachedResponse]]:
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
        the runner at once: the first wave is on the wire while the rest of a large run
        is still being read, hashed and looked up. `requests` may be a lazy iterator (a
        streamed data file); `samples[i]` is the sample of the i-th request, for the
        failure log, and may grow as the iterator runs."""
        total = len(requests) if isinstance(requests, Sized) else None
        progress = RunProgress(total, 0, label or f"{purpose} {client.spec.label}", self.progress_enabled)
        call = _Generation(self, client, iter(requests), self.accounts.totals.setdefault(purpose, PurposeTotals()),
                           samples, progress)
        try:
            with progress:
                outcomes = await self.runner.run(client, call.jobs(), budget=self.budget, on_outcome=call.on_outcome)
        finally:  # also when the data stream fails part-way: keep every answer received
            await self.flush()
        return call.generated(outcomes)


class _Generation:
    """The state of one `Engine.generate` call, in one place: the requests read so far,
    their keys, cache hits and in-run duplicates; the methods that feed the runner, take
    its outcomes (accounts, cache rows, progress) and put the answers in request order."""

    def __init__(self, engine: Engine, client: ModelClient, source: Iterator[Request], totals: PurposeTotals,
                 samples: Sequence[Sample] | None, progress: RunProgress) -> None:
        self.engine = engine
        self.client = client
        self.source = source
        self.totals = totals
        self.samples = samples
        self.progress = progress
        self.requests: list[Request] = []
        self.keys: list[str] = []
        self.cached: list[bool] = []
        self.hits: dict[int, Response] = {}
        self.first_index: dict[str, int] = {}
        self.duplicates: list[tuple[int, int]] = []

    async def jobs(self) -> AsyncIterator[Job]:
        """The cache misses as jobs, chunk by chunk; hits and duplicates are settled here."""
        client = self.client
        size = client.pool.capacity()  # the first chunk fills the endpoints, at once
        while chunk := list(islice(self.source, size)):
            size = STREAM_CHUNK
            lo = len(self.requests)
            self.requests.extend(chunk)
            chunk_keys, hits = await self.engine.keys_and_hits(chunk)
            self.keys.extend(chunk_keys)
            self.cached.extend([False] * len(chunk))
            for i, key in enumerate(chunk_keys, start=lo):
                hit = hits.get(key)
                if hit is not None:
                    self._from_cache(i, hit)
                elif key in self.first_index:  # identical request twice in one run: send once
                    self.duplicates.append((i, self.first_index[key]))
                    self.progress.add_cached()
                else:
                    if not client.reachable:  # only once something must be sent
                        await check_reachable(client)
                        client.reachable = True
                    self.first_index[key] = i
                    req = self.requests[i]
                    tokens = client.count(req.text()) + req.max_tokens
                    est = client.price.estimate(tokens - req.max_tokens, req.max_tokens)
                    yield Job(index=i, request=req, tokens=tokens, est_cost=est)
        self.progress.set_total(len(self.requests))

    def _from_cache(self, i: int, hit: CachedResponse) -> None:
        usage = Usage(hit.prompt_tokens, hit.completion_tokens, hit.cached_prompt_tokens)
        self.hits[i] = Response(hit.text, usage, hit.latency_ms, hit.finish_reason, "cache")
        self.cached[i] = True
        self.totals.cached += 1
        self.totals.cost_saved_by_cache_usd += self.client.price.cost(usage)
        self.engine.accounts.cached_latencies.append(hit.latency_ms)
        self.progress.add_cached()

    def on_outcome(self, outcome: Outcome) -> None:
        """Account for one outcome and queue its row for the store (written by the
        engine's writer in small batches)."""
        if outcome.response is not None:
            self._answered(outcome.index, outcome.response)
        elif outcome.error is not None:
            self._failed(outcome.index, outcome.error, outcome.attempts)
        self.engine.wake_writer()

    def _answered(self, i: int, resp: Response) -> None:
        engine, req, totals = self.engine, self.requests[i], self.totals
        if engine.secrets and any(s in resp.text for s in engine.secrets):
            resp.text = redact(resp.text)  # a server that echoes the key into its answer
        cost = self.client.price.cost(resp.usage)
        totals.requests += 1
        totals.prompt_tokens += resp.usage.prompt_tokens
        totals.completion_tokens += resp.usage.completion_tokens
        totals.cached_prompt_tokens += resp.usage.cached_prompt_tokens
        totals.cost_usd += cost
        engine.accounts.fresh_latencies.append(resp.latency_ms)
        canonical = req.canonical()
        # the prompt itself is benchmark data (and the key is its hash): keep only its size
        canonical["prompt_chars"] = len(canonical.pop("prompt") or "") + sum(
            len(m.get("content", "")) for m in canonical.pop("messages") or [])
        engine.pending_responses.append(ResponseRow(
            key=self.keys[i], provider=req.provider, model=req.model, endpoint=req.endpoint_id,
            request_json=json.dumps(canonical, sort_keys=True), text=resp.text, finish_reason=resp.finish_reason,
            prompt_tokens=resp.usage.prompt_tokens, completion_tokens=resp.usage.completion_tokens,
            cached_prompt_tokens=resp.usage.cached_prompt_tokens, latency_ms=resp.latency_ms, cost_usd=cost,
            served_by=strip_userinfo(resp.endpoint), created_at=time.time()))
        self.progress.advance(True, resp.usage.prompt_tokens + resp.usage.completion_tokens, cost)

    def _failed(self, i: int, err: ProviderError, attempts: int) -> None:
        self.totals.failed += 1
        sid = self.samples[i].id if self.samples is not None else None
        self.engine.pending_failures.append(FailureRow(key=self.keys[i], run_id=self.engine.run_id, sample_id=sid,
                                                       kind=err.kind, status=err.status, message=err.message,
                                                       attempts=attempts))
        self.progress.advance(False, 0, 0.0)

    def generated(self, outcomes: list[Outcome]) -> Generated:
        answers: list[Response | ProviderError | None] = [self.hits.get(i) for i in range(len(self.requests))]
        for o in outcomes:
            answers[o.index] = o.response if o.response is not None else o.error
        for i, j in self.duplicates:
            answers[i] = answers[j]
        return Generated(answers, self.cached, self.keys)


async def execute(cfg: RunConfig) -> dict[str, Any]:
    """Run one evaluation; returns the run summary (also written to OUT/run.json)."""
    t_start = time.time()
    cfg.validate()
    from .datadir import resolve_data_dir

    data_dir = resolve_data_dir(cfg.data_dir)
    benchmark, tasks = parse_benchmark(cfg.benchmark, cfg.extra, data_dir)
    cache_path = Path(cfg.cache).expanduser() if cfg.cache else default_cache_path()
    opening = None if cfg.dry_run else _open_in_background(cache_path)
    stack = SimProcesses()
    runner: Runner | None = None
    try:
        opts = LoadOptions(data_dir=data_dir, tasks=tasks, limit=cfg.limit, extra=cfg.extra)
        # Streamed where the benchmark allows it: requests start while the file is read.
        samples: list[Sample] | Iterator[Sample] = (
            benchmark.iter_load(opts) if hasattr(benchmark, "iter_load") and not cfg.dry_run
            else benchmark.load(opts))
        prices = PriceTable(cfg.prices)
        spec = resolve_model(cfg.model, cfg.base_urls, cfg, stack)
        client = make_client(spec, cfg, prices, cfg.rpm, cfg.tpm)
        judge = None
        if cfg.judge:
            same = cfg.judge == cfg.model and not cfg.judge_base_urls
            judge_spec = spec if same else resolve_model(cfg.judge, cfg.judge_base_urls, cfg, stack)
            # The same model as judge is the same client: one limiter and pool for both.
            judge = client if same else make_client(judge_spec, cfg, prices, None, None)
        if not cfg.dry_run:
            runner = make_runner(cfg)
        try:
            return await _execute(cfg, benchmark, samples, client, judge, prices, t_start, opening, runner)
        finally:
            await client.provider.aclose()
            if judge is not None and judge is not client:
                await judge.provider.aclose()
    finally:
        if runner is not None:
            runner.close()
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


async def _execute(cfg: RunConfig, benchmark: Benchmark, samples: list[Sample] | Iterator[Sample], client: ModelClient,
                   judge: ModelClient | None, prices: PriceTable, t_start: float,
                   opening: Future[Store] | None, runner: Runner | None) -> dict[str, Any]:
    spec = client.spec
    run_id = cfg.run_id(spec.endpoint_id)
    max_input, max_input_source = await max_input_tokens(cfg, spec, client.provider)
    tokenizer = truncation_tokenizer(cfg, spec) if max_input else None

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

    if cfg.dry_run or opening is None or runner is None:
        samples = list(samples)
        return dry_run_summary(cfg, samples, [build(s) for s in samples], client, run_id, truncated, max_input)

    out_dir(cfg, run_id)  # checked before anything is sent
    with opening.result() as store:
        store.start_run(run_id, cfg.benchmark, spec.label, public_config(cfg, spec))
        engine = Engine(store, run_id, cfg.progress, cfg.max_cost, runner)

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
                         map_chunks=runner.map_chunks)
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
            except Exception as exc:
                failure = exc
            await engine.flush()
            tg.cancel_scope.cancel()
        if failure is not None:
            raise failure
        for r, key in zip(results, out.keys):
            r.key = key
        store.put_results([_result_row(run_id, r) for r in results])
        scores = benchmark.aggregate(results, prep_report)
        loaded = samples if isinstance(samples, list) else kept
        summary = run_summary(cfg, run_id, spec, loaded, results, engine.accounts, runner, scores, prep_report, t_start,
                           truncated, max_input, max_input_source, prices, client)
        summary = dict(redact_json(summary))
        n_failed = summary["n_failed"]
        store.finish_run(run_id, "completed" if n_failed == 0 and summary["n_skipped_budget"] == 0 else "partial",
                         summary)
    write_out(cfg, summary)
    return summary


def _collect(items: Iterator[Sample], into: list[Sample]) -> Iterator[Sample]:
    """Pass a stream through, keeping what went by."""
    for item in items:
        into.append(item)
        yield item


async def _score(benchmark: Benchmark, samples: list[Sample], answers: list[Response | ProviderError | None],
                 cached: list[bool], client: ModelClient, truncated: dict[str, int],
                 ctx: RunContext) -> list[SampleResult]:
    results: list[SampleResult] = []
    ok_samples, ok_preds, ok_results = [], [], []
    for s, ans, was_cached in zip(samples, answers, cached):
        r = SampleResult(sample_id=s.id, task=s.task, status="failed", cached=was_cached,
                         truncated_tokens=truncated.get(s.id, 0), meta=dict(s.meta), references=list(s.answers))
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
