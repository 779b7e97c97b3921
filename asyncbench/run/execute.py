"""Executing a plan (plan.py): samples -> requests -> (cache | runner) -> store -> scores
-> record (record.py). flow.run(config) plans and executes.

One engine for listed, streamed and generated samples: all reach it as a stream of
requests (a listed source built whole first, so a prompt that cannot be cut fails before
anything is sent), and the samples that went by are collected for scoring and the ledger.
Streamed and generated samples go a window at a time, so memory stays flat in their
number: a generated benchmark's `prepare` reads their heads (no prompt), and the samples
it keeps are built in a worker thread a window ahead of the requests.
"""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from functools import partial
from itertools import islice

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..benchmarks.base import RunContext
from ..errors import ProviderError, RunInterrupted
from ..ledger import InvocationEntry, interrupted
from ..progress import RunProgress
from ..run_summary import RunSummary
from ..runners import Runner
from ..scheduler import Budget
from ..store import Store
from ..store.journal import Journal, replay
from ..types import Purpose, Request, RequestSource, Response, Sample, SampleResult, SampleStatus
from . import reuse
from .generate import CacheFirst, Generated
from .plan import Drawn, RunPlan
from .prompting import Tally
from .record import Recorder, Scored, book_interrupted, close_run, slim

# Samples of a streamed source generated, scored and recorded at a time: large enough that
# the pause between windows (the last requests of one answered before the next is sent)
# is a small part of the run, small enough that a window's objects are a few MB.
STREAM_WINDOW = 2048
# A window of generated samples also ends at this many prompt characters: 100-LongBench's
# 128k-token rows are ~0.5 MB each, and two windows are held at once (one sent, one built).
BUILT_WINDOW_CHARS = 12_000_000


async def execute(p: RunPlan, budget: Budget | None = None) -> RunSummary:
    """Run the plan: generate -> score -> record. Returns the run's summary (also stored
    with the run and written to OUT/run.json). Resuming is running the same plan again.
    `budget`: an eval set's one budget (eval_set.py), counting what its runs paid before."""
    if p.runner is None or p.opening is None:
        raise ValueError("a dry-run plan sends nothing: price it with plan.dry_run")
    runner = p.runner
    fingerprint = reuse.fingerprint(p)
    with p.opening.result() as store:
        with store.session():
            replay(store)  # answers a crashed process had received but not stored
            store.runs.book_killed(p.run_id, interrupted)  # an earlier invocation killed before it could
            before = store.runs.ledger(p.run_id)
            stored = reuse.stored_summary(store, p, before, fingerprint)
            if stored is None:
                store.runs.start_run(p.run_id, p.benchmark_name, p.client.spec.label, dict(p.stored_config))
                invocation = InvocationEntry(len(before.invocations) + 1, p.started, pid=os.getpid(),
                                             host=socket.gethostname())
                store.runs.put_invocation(p.run_id, invocation)
        if stored is not None:  # complete, and nothing changed since: booked from the store
            assert fingerprint is not None
            return reuse.book(p, store, before, stored, fingerprint)
        # --max-cost is the run's budget across its invocations: what earlier ones paid counts
        if budget is None:
            budget = Budget(p.max_cost, spent=sum(g.cost_usd for g in before.requests))
        engine = CacheFirst(store, p.run_id, invocation.invocation, p.progress, budget, runner,
                        Journal(store.path, p.run_id), prompt_cache=p.prompt_cache)
        tally = Tally()
        try:
            outcome = await _generate(p, engine, _context(p, engine, runner), tally)
            return close_run(p, store, engine, invocation, before.invocations, outcome, tally, fingerprint)
        except BaseException as exc:  # Ctrl-C, a cancellation, an error: book what this invocation did
            _book_failed(p, store, runner, engine, invocation, exc)
            raise


def _book_failed(p: RunPlan, store: Store, runner: Runner, engine: CacheFirst, invocation: InvocationEntry,
                 exc: BaseException) -> None:
    """Book an invocation that ended by `exc`, then say how: an error is re-raised as it
    is, an interruption as RunInterrupted carrying the summary written."""
    if invocation.finished:
        return
    try:
        summary = book_interrupted(p, store, engine, invocation)
    except Exception:  # the store unusable too: the first error is the one to show
        raise exc from None
    if not isinstance(exc, Exception):
        raise RunInterrupted({**summary.to_json(), "out_dir": summary.out_dir}) from None


def _context(p: RunPlan, engine: CacheFirst, runner: Runner) -> RunContext:
    """What a benchmark's prepare and score reach the models through: judge and prior
    calls go through the same engine (cache, budget, ledger) as the evaluated requests."""
    client, prompting = p.client, p.prompting

    async def generate(reqs: list[Request], purpose: Purpose) -> list[Response | ProviderError]:
        answers = (await engine.generate(p.client_for(purpose), reqs, purpose)).answers
        return [a if a is not None else ProviderError("fatal", "budget reached (--max-cost)") for a in answers]

    def make_request(spec_or_none: str | None = None, prompt: str | None = None,
                     messages: list[dict[str, str]] | None = None, max_tokens: int = 128,
                     task: str | None = None, temperature: float = 0.0,
                     params: dict[str, object] | None = None, repeat: int = 0) -> Request:
        target = p.judge if spec_or_none and p.judge is not None else client
        if not spec_or_none and prompting.rules.release is not None and messages is None and prompt is not None:
            return prompting.release_request(prompt, max_tokens, repeat, task=task)
        return target.request(prompt=prompt, messages=messages, max_tokens=max_tokens, task=task,
                              temperature=temperature, params=params, repeat=repeat)

    return RunContext(model_spec=client.spec.label, generate=generate, make_request=make_request,
                      options=dict(p.options), map_chunks=runner.map_chunks)


@dataclass
class _Prepared:
    """Listed samples as the engine takes them: `requests` to generate, the samples asked
    (`kept`), all the samples loaded, prepare's report."""

    requests: list[Request]
    kept: list[Sample]
    loaded: list[Sample]
    report: dict[str, object]


async def _prepare(p: RunPlan, listed: list[Sample], ctx: RunContext, tally: Tally) -> _Prepared:
    """Listed samples go through the benchmark's prepare (which may filter them) and are
    built whole, so a prompt that cannot be cut fails before anything is sent."""
    kept, report = await p.benchmark.prepare(listed, ctx)
    requests = [] if p.caps.administer is not None else [p.prompting.build(s, tally) for s in kept]
    return _Prepared(requests, kept, listed, dict(report))


async def _generate(p: RunPlan, engine: CacheFirst, ctx: RunContext, tally: Tally) -> Scored:
    """Generate and score every sample (the writer storing answers as they come), then
    flush what is queued; an error is raised after the flush."""
    failure: Exception | None = None
    outcome: Scored | None = None
    async with anyio.create_task_group() as tg:
        tg.start_soon(engine.writer)
        try:
            listed = p.samples.listed
            if p.samples.drawn is not None:  # generated: prepare reads the heads, the kept are built as sent
                outcome = await _generated(p, p.samples.drawn, engine, ctx, tally, tg)
            elif listed is None:  # streamed (prepare is the identity): a window at a time, memory flat in its size
                outcome = await _windows(p, engine, ctx, tally, _slices(p.samples.stream or iter(())))
            elif p.caps.administer is not None:  # adaptive: the benchmark chooses each batch (longbench/adaptive.py)
                outcome = await _administer(p, await _prepare(p, listed, ctx, tally), engine, ctx, tally)
            else:
                prepared = await _prepare(p, listed, ctx, tally)
                generated = await engine.generate(p.client, prepared.requests, "eval", prepared.kept,
                                                  label=f"{p.benchmark_name} {p.client.spec.label}")
                results = await _score(p, prepared.kept, generated, tally, ctx)
                outcome = Scored(prepared.loaded, prepared.kept, generated, results, prepared.report)
        except Exception as exc:
            failure = exc
        await engine.flush()
        engine.journal.close()
        tg.cancel_scope.cancel()
    if failure is not None:
        raise failure
    assert outcome is not None
    return outcome


async def _administer(p: RunPlan, prepared: _Prepared, engine: CacheFirst, ctx: RunContext, tally: Tally) -> Scored:
    """Rounds of generate + score, each batch chosen by the benchmark from the answers so
    far; the samples asked, their answers and results in the order asked."""
    assert p.caps.administer is not None

    async def ask(batch: list[Sample]) -> tuple[Generated, list[SampleResult]]:
        generated = await engine.generate(p.client, [p.prompting.build(s, tally) for s in batch], "eval", batch,
                                          label=f"{p.benchmark_name} {p.client.spec.label} (adaptive, {len(batch)})")
        return generated, await _score(p, batch, generated, tally, ctx)

    rounds, report = await p.caps.administer(prepared.kept, ask)
    asked = [s for batch, _, _ in rounds for s in batch]
    generated = Generated([a for _, g, _ in rounds for a in g.answers], [x for _, g, _ in rounds for x in g.sources],
                          [k for _, g, _ in rounds for k in g.keys])
    return Scored(prepared.loaded, asked, generated, [r for _, _, rs in rounds for r in rs],
                   {**prepared.report, **report})


async def _generated(p: RunPlan, drawn: Drawn, engine: CacheFirst, ctx: RunContext, tally: Tally,
                     tg: TaskGroup) -> Scored:
    """A generated source: `prepare` decides on the samples' heads (100-LongBench's
    prior-knowledge filter reads questions only), then the samples it kept are built in a
    worker thread (`_build`, in `tg`) a window ahead of the requests, so memory holds two
    windows whatever the number of samples, and the event loop keeps answering."""
    kept, report = await p.benchmark.prepare(drawn.heads, ctx)
    wanted = {s.id for s in kept}
    send, receive = anyio.create_memory_object_stream[list[Sample] | Exception](0)
    tg.start_soon(_build, drawn.select(wanted.__contains__), send)
    streamed = await _windows(p, engine, ctx, tally, _received(receive), total=len(kept))
    return Scored(drawn.heads, kept, streamed.generated, streamed.results, dict(report), streamed.recorder)


async def _build(samples: Iterator[Sample], send: MemoryObjectSendStream[list[Sample] | Exception]) -> None:
    """Build generated samples one at a time in a worker thread (a Ctrl-C abandons the one
    being built), sent on in windows of STREAM_WINDOW samples or BUILT_WINDOW_CHARS of
    prompt; an error building one is sent on too, for the run to raise."""
    async with send:
        window: list[Sample] = []
        chars = 0
        try:
            while (s := await anyio.to_thread.run_sync(next, samples, None, abandon_on_cancel=True)) is not None:
                window.append(s)
                chars += len(s.prompt or "")
                if len(window) >= STREAM_WINDOW or chars >= BUILT_WINDOW_CHARS:
                    await send.send(window)
                    window, chars = [], 0
        except Exception as exc:
            await send.send(exc)
            return
        if window:
            await send.send(window)


async def _received(receive: MemoryObjectReceiveStream[list[Sample] | Exception]) -> AsyncIterator[Iterator[Sample]]:
    """The windows `_build` sends, as the windows `_windows` takes (an error raised)."""
    async with receive:
        async for item in receive:
            if isinstance(item, Exception):
                raise item
            yield iter(item)


async def _slices(stream: Iterator[Sample]) -> AsyncIterator[Iterator[Sample]]:
    """A streamed file's windows: STREAM_WINDOW samples each, read as they are sent (the
    last one empty)."""
    while True:
        yield islice(stream, STREAM_WINDOW)


async def _windows(p: RunPlan, engine: CacheFirst, ctx: RunContext, tally: Tally,
                   windows: AsyncIterator[Iterator[Sample]], total: int | None = None) -> Scored:
    """Samples a window at a time: each window generated (one progress bar for all, over
    `total` when known), scored and its sample rows written, then let go; what the
    aggregate reads of each result is kept (record.slim)."""
    recorder = Recorder(p.run_id, engine.invocation, engine.invocation > 1)
    kept: list[SampleResult] = []
    label = f"{p.benchmark_name} {p.client.spec.label}"
    with RunProgress(total, label, engine.progress_enabled, stats=engine.counts) as progress:
        async for source in windows:
            window: list[Sample] = []  # filled as the window is read: requests go while the file is read
            requests = (p.prompting.build(s, tally) for s in _collect(source, window))
            generated = await engine.generate(p.client, requests, "eval", window, label=label, progress=progress)
            if not window:
                break
            results = await _score(p, window, generated, tally, ctx)
            await engine.in_store(partial(recorder.write, engine.store, results))
            kept += map(slim, results)
        progress.set_total(len(kept))
    return Scored([], [], Generated([], [], []), kept, {}, recorder)


def _collect(items: Iterator[Sample], into: list[Sample]) -> Iterator[Sample]:
    """Pass a stream through, keeping what went by."""
    for item in items:
        into.append(item)
        yield item


async def _score(p: RunPlan, samples: list[Sample], generated: Generated, tally: Tally,
                 ctx: RunContext) -> list[SampleResult]:
    """Each sample's result from its answer; the answered ones scored by the benchmark."""
    results: list[SampleResult] = []
    ok_samples, ok_preds, ok_results = [], [], []
    for s, ans, source, key in zip(samples, generated.answers, generated.sources, generated.keys):
        r = SampleResult(sample_id=s.id, task=s.task, status=SampleStatus.FAILED, cached=source != RequestSource.SENT,
                         key=key, truncated_tokens=tally.truncated.get(s.id, 0), meta=s.meta,
                         references=list(s.answers))
        if isinstance(ans, Response):
            # answered, read from the cache, or a twin's answer (sent once)
            r.status = source.sample_status() if source in _ANSWERED else SampleStatus.SHARED
            r.prediction = tally.answer(s.id, ans.text)
            r.prompt_tokens = ans.usage.prompt_tokens
            r.completion_tokens = ans.usage.completion_tokens
            r.cached_prompt_tokens = ans.usage.cached_prompt_tokens
            r.cost_usd = p.client.price.cost(ans.usage, ans.discount)
            r.latency_ms = ans.latency_ms
            ok_samples.append(s)
            ok_preds.append(r.prediction)
            ok_results.append(r)
        elif isinstance(ans, ProviderError):
            r.error = f"{ans.kind}: {ans.message}"
        else:
            r.status = SampleStatus.SKIPPED_BUDGET
            r.error = "budget reached (--max-cost)"
        results.append(r)
    if ok_samples:
        scores = await p.benchmark.score(ok_samples, ok_preds, ctx)
        for r, sc in zip(ok_results, scores):
            r.score, r.scored = sc.value, sc
            if sc.failed:  # scoring failed, not the answer: retried on resume
                r.status, r.error = SampleStatus.FAILED, sc.error
    return results


_ANSWERED = (RequestSource.SENT, RequestSource.FROM_CACHE)
