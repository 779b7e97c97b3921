"""One run, end to end: samples -> requests -> (cache | runner) -> store -> scores ->
aggregate -> run.json.

The run id is a hash of what determines the results (benchmark, tasks, model, endpoint
identity, generation settings), so running the same command again continues the same
run: everything already answered comes from the cache and nothing is paid twice.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sys
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio

from .benchmarks import parse_benchmark
from .benchmarks.base import Benchmark, LoadOptions, RunContext, notes_of
from .benchmarks.longbench.budget import PromptBudget, model2maxlen_path
from .benchmarks.longbench.official_models import build_chat, has_post_process, postprocess, samsum_stop
from .client import ModelClient, make_client
from .config import RunConfig
from .errors import ProviderError, RunInterrupted, UserError
from .generation import Engine, Generated
from .ledger import SETTLED, InvocationEntry, SampleEntry, account, interrupted, merge_sample
from .pricing import SHAPE, PriceTable
from .resolve import official_model, prompt_budget, resolve_model, truncation_tokenizer
from .run_summary import dry_run_summary, out_dir, public_config, run_summary, write_out
from .runners import Runner, make_runner
from .scheduler import Budget
from .secrets import redact_json
from .store import Store, default_cache_path
from .store.duckdb_store import stored_plan
from .store.journal import Journal, replay
from .tokenizers import Tokenizer
from .types import Purpose, Request, Response, Sample, SampleResult

# Why a sample the benchmark's prepare() left out is excluded (run.json "prepare" says more).
EXCLUDED_BY_RULE = "left out by the benchmark's own rule (see run.json prepare)"

async def execute(cfg: RunConfig, sim_url: str | None = None) -> dict[str, Any]:
    """Run one evaluation; returns the run summary (also written to OUT/run.json).
    `sim_url`: the simulator the command started for `--model sim` (config.uses_sim)."""
    t_start = time.time()
    cfg.validate()
    from .datadir import resolve_data_dir

    data_dir = resolve_data_dir(cfg.data_dir)
    benchmark, tasks = parse_benchmark(cfg.benchmark, cfg.extra, data_dir)
    cache_path = Path(cfg.cache).expanduser() if cfg.cache else default_cache_path()
    opening = None if cfg.dry_run else _open_in_background(cache_path)
    runner: Runner | None = None
    try:
        opts = LoadOptions(data_dir=data_dir, tasks=tasks, limit=cfg.limit, extra=cfg.extra)
        # Streamed where the benchmark allows it: requests start while the file is read.
        samples: list[Sample] | Iterator[Sample] = (
            benchmark.iter_load(opts) if hasattr(benchmark, "iter_load") and not cfg.dry_run
            else benchmark.load(opts))
        prices = PriceTable(cfg.prices)
        spec = resolve_model(cfg.model, cfg.base_urls, cfg, sim_url)
        client = make_client(spec, cfg, prices, cfg.rpm, cfg.tpm)
        judge = None
        if cfg.judge:
            same = cfg.judge == cfg.model and not cfg.judge_base_urls
            judge_spec = spec if same else resolve_model(cfg.judge, cfg.judge_base_urls, cfg, sim_url)
            # The same model as judge is the same client: one limiter and pool for both.
            judge = client if same else make_client(judge_spec, cfg, prices, None, None)
        unpriced = _check_prices(cfg, [c for c in (client, judge) if c is not None])
        if cfg.batch and client.provider.batch_limits is None:
            from .runners.batch import no_batch_api

            raise no_batch_api(spec.label)
        if not cfg.dry_run:
            runner = make_runner(cfg)
        try:
            return await _execute(cfg, benchmark, samples, client, judge, prices, unpriced, t_start, opening, runner,
                                  data_dir)
        finally:
            await client.provider.aclose()
            if judge is not None and judge is not client:
                await judge.provider.aclose()
    finally:
        if runner is not None:
            runner.close()
        if opening is not None and opening.exception() is None:
            opening.result().close()  # closing twice is harmless


def _check_prices(cfg: RunConfig, clients: list[ModelClient]) -> list[str]:
    """Models whose cost is unknown. --max-cost cannot be kept for them: refuse to start
    (nothing sent yet); without a budget, warn once and label their costs "unpriced"."""
    unpriced = list(dict.fromkeys(c.spec.label for c in clients if not c.price.priced))
    if unpriced and cfg.max_cost is not None:
        raise UserError(f"{', '.join(unpriced)} has no price in asyncbench's table, so --max-cost cannot be kept; "
                        f"pass --prices FILE giving its USD per million tokens ({SHAPE})")
    if unpriced and not cfg.dry_run:
        print(f"asyncbench: warning: {', '.join(unpriced)} has no price; its cost shows as unpriced "
              "(pass --prices FILE to price it)", file=sys.stderr)
    return unpriced


def _open_in_background(path: Path) -> Future[Store]:
    """Open the cache in a thread while the benchmark loads: importing duckdb and opening
    the file (~70 ms, mostly outside the GIL) overlap the rest of the start-up instead of
    following it. A failure (the file locked by another process) is raised where the store
    is first needed, by `result()`."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="open-cache")
    future = pool.submit(Store, path, True)  # kept open between batches while nobody else waits
    pool.shutdown(wait=False)
    return future


async def _execute(cfg: RunConfig, benchmark: Benchmark, samples: list[Sample] | Iterator[Sample], client: ModelClient,
                   judge: ModelClient | None, prices: PriceTable, unpriced: list[str], t_start: float,
                   opening: Future[Store] | None, runner: Runner | None, data_dir: Path | None) -> dict[str, Any]:
    spec = client.spec
    if isinstance(samples, list):
        data_id = samples_digest(samples)
    else:  # streamed: the benchmark hashes its file's bytes (content, not path)
        data_id = benchmark.fingerprint() if hasattr(benchmark, "fingerprint") else ""
    run_id = cfg.run_id(spec.endpoint_id, data_id, spec.label, judge.spec.label if judge is not None else None)
    official = getattr(benchmark, "MODEL2MAXLEN", None)  # the benchmark's model2maxlen.json, if it has one
    maxlen_path = model2maxlen_path(data_dir, official) if official else None
    open_model, official_info = None, None
    if official == "longbench":  # prompted as LongBench's pred.py prompts open models (official_models.py)
        open_model, official_info = await official_model(cfg, spec, client.provider, maxlen_path)
    elif cfg.official_model:
        raise UserError(f"--official-model is LongBench pred.py's model name; {cfg.benchmark} does not use it")
    release = getattr(benchmark, "release_request", None)  # the benchmark's own request shape (100-LongBench)
    open_server = client.provider.serves_open_models
    prompt_limit = (PromptBudget(None, None, "none: the release sends prompts uncut") if release is not None
                    else await prompt_budget(cfg, spec, client.provider, maxlen_path, open_model))
    if release is None and prompt_limit.input is None and prompt_limit.total is None \
            and getattr(benchmark, "LONG_CONTEXT", False):
        raise UserError(getattr(client.provider, "unreachable", None) or  # a down server, said first
                        f"cannot find {spec.label}'s context length (not in the benchmark's model2maxlen.json or "
                        "the model-context table, and the server does not report it); pass --max-input-tokens N "
                        "(its context minus 500)")
    # a tokenizer only where something may be cut (a server's is asked for only then)
    tokenizer: Tokenizer | None = None
    tokenizer_name, stand_in = "none", False
    if prompt_limit.input is not None or prompt_limit.total is not None:
        tokenizer, tokenizer_name, stand_in = await truncation_tokenizer(cfg, spec, client.provider, open_model)
    limits: dict[str, Any] = {"budget": prompt_limit.describe(), "tokenizer": tokenizer_name,
                              "tokenizer_stand_in": stand_in}
    if official_info is not None:
        limits["official"] = official_info
    if release is not None:
        limits["release_requests"] = benchmark.describe_requests(spec.provider, open_server)  # type: ignore[attr-defined]
    newline_stop = await samsum_stop(client.provider, spec.base_urls, tokenizer) if open_model else None
    as_chat: set[str] = set()  # tasks pred.py sends without a template, sent as chat here (chat-only APIs)

    from .benchmarks.longbench.prompts import build_request_prompt

    truncated: dict[str, int] = {}

    def build(s: Sample) -> Request:
        if s.messages is not None:
            return client.request(messages=s.messages, max_tokens=s.max_tokens, temperature=cfg.temperature,
                                  repeat=cfg.repeat, chat=True, stop=s.stop)
        if open_model is not None:
            return build_open(s)
        if release is not None:  # as the release sends it: never cut (a prompt too long fails at the server)
            return client.request(max_tokens=s.max_tokens, repeat=cfg.repeat, stop=s.stop,
                                  **release(s.prompt or "", spec.provider, open_server))
        templated = not client.provider.sends_raw(s.chat)
        if templated and not s.chat:
            as_chat.add(s.task)
        return client.request(prompt=cut_prompt(s, templated), max_tokens=s.max_tokens,
                              temperature=cfg.temperature, repeat=cfg.repeat, chat=s.chat, stop=s.stop)

    def cut_prompt(s: Sample, templated: bool) -> str:
        """The sample's prompt cut to its budget (the room a server's template takes when
        `templated`); what was removed is counted in `truncated`."""
        cut = prompt_limit.for_sample(s.max_tokens, templated)
        try:
            text, removed = (build_request_prompt(s, tokenizer=tokenizer, max_input_tokens=cut)
                             if tokenizer is not None else (s.prompt or "", 0))
        except ProviderError as exc:  # the server's /tokenize refused or timed out on it
            size = len(s.prompt or "") / 1e6
            raise UserError(f"sample {s.id}: cannot tokenize its {size:.1f}M-character prompt to fit the context "
                            f"({exc.message}); shorten that prompt or pass --tokenizer cl100k_base") from None
        if removed:
            truncated[s.id] = removed
        return text

    def build_open(s: Sample) -> Request:
        """pred.py's request for an open model: its cut, then its build_chat text (chat
        datasets), sent raw; samsum's newline rule (samsum_stop)."""
        assert open_model is not None
        text = cut_prompt(s, templated=False)
        if s.chat:
            text = build_chat(text, open_model.name)
        params: dict[str, Any] = {}
        if s.stop and newline_stop is not None:
            params = dict(newline_stop.params)
            limits["samsum"] = newline_stop.describe()
        if s.stop and newline_stop is not None and newline_stop.client_cut:
            s.meta["postprocess"] = {"model": open_model.name, "newline_cut": True}
        elif has_post_process(open_model.name):
            s.meta["postprocess"] = {"model": open_model.name, "newline_cut": False}
        return client.request(prompt=text, max_tokens=s.max_tokens, temperature=cfg.temperature,
                              repeat=cfg.repeat, chat=False, params=params)

    if cfg.dry_run or opening is None or runner is None:
        samples = list(samples)
        requests = [build(s) for s in samples]
        limits["no_template_sent_as_chat"] = sorted(as_chat)
        cache = Path(cfg.cache).expanduser() if cfg.cache else default_cache_path()
        planned = benchmark.planned_calls(samples, client.count) if hasattr(benchmark, "planned_calls") else {}
        return dry_run_summary(cfg, samples, requests, client, judge, run_id, truncated, limits,
                               stored_plan(cache, run_id, [r.key() for r in requests]), planned)

    out = out_dir(cfg, run_id)  # checked before anything is sent
    with opening.result() as store:
        with store.session():
            replay(store)  # answers a crashed process had received but not stored
            store.start_run(run_id, cfg.benchmark, spec.label, public_config(cfg, spec))
            store.book_killed(run_id, interrupted)  # an earlier invocation killed before it could
            before = store.ledger(run_id)
            invocation = InvocationEntry(len(before.invocations) + 1, t_start, pid=os.getpid(),
                                         host=socket.gethostname())
            store.put_invocation(run_id, invocation)
        runner.bind(store, run_id)
        # --max-cost is the run's budget across its invocations: what earlier ones paid counts
        budget = Budget(cfg.max_cost, spent=sum(g.cost_usd for g in before.requests))
        engine = Engine(store, run_id, invocation.invocation, cfg.progress, budget, runner,
                        Journal(store.path, run_id), prompt_cache=cfg.prompt_cache == "auto")

        async def ctx_generate(reqs: list[Request], purpose: Purpose) -> list[Response | ProviderError]:
            target = judge if purpose == "judge" and judge is not None else client
            answers = (await engine.generate(target, reqs, purpose)).answers
            return [a if a is not None else ProviderError("fatal", "budget reached (--max-cost)") for a in answers]

        def ctx_make_request(spec_or_none: str | None = None, prompt: str | None = None,
                             messages: list[dict[str, str]] | None = None, max_tokens: int = 128,
                             task: str | None = None, temperature: float = 0.0,
                             params: dict[str, Any] | None = None, repeat: int = 0) -> Request:
            target = judge if spec_or_none and judge is not None else client
            if not spec_or_none and release is not None and messages is None and prompt is not None:
                return client.request(max_tokens=max_tokens, task=task, repeat=repeat,
                                      **release(prompt, spec.provider, open_server))
            return target.request(prompt=prompt, messages=messages, max_tokens=max_tokens, task=task,
                                  temperature=temperature, params=params, repeat=repeat)

        ctx = RunContext(model_spec=spec.label, generate=ctx_generate, make_request=ctx_make_request,
                         options={"judge": cfg.judge, **cfg.extra},
                         map_chunks=runner.map_chunks)
        try:
            return await _generate_and_close(cfg, benchmark, samples, client, engine, store, runner, invocation,
                                              before.invocations, build, ctx, t_start, run_id, spec, truncated,
                                              limits, as_chat, prices, unpriced, out)
        except BaseException as exc:  # Ctrl-C, a cancellation, an error: book what this invocation did
            if invocation.finished:
                raise
            try:
                summary = _book_interrupted(cfg, store, engine, runner, invocation, t_start, run_id, spec, out)
            except Exception:  # the store unusable too: the first error is the one to show
                raise exc from None
            if isinstance(exc, Exception):
                raise
            raise RunInterrupted(summary) from None


def _book_stats(invocation: InvocationEntry, runner: Runner, t_start: float) -> None:
    """The invocation's wall time and the runner's request counts, finished or not."""
    stats = runner.stats()
    invocation.wall_s = round(time.time() - t_start, 3)
    invocation.requests, invocation.retries = stats.requests_sent, stats.retries
    invocation.rate_limited, invocation.transient_errors = stats.rate_limited, stats.transient_errors


def _book_interrupted(cfg: RunConfig, store: Store, engine: Engine, runner: Runner, invocation: InvocationEntry,
                      t_start: float, run_id: str, spec: Any, out: Path) -> dict[str, Any]:
    """An invocation that did not finish (Ctrl-C, a crash): store the answers and ledger
    rows still queued, book its requests and wall time, and write run.json from the
    ledger (no scores: they need every sample). Synchronous: the event loop is being
    torn down, and the store's own lock waits for a batch a worker thread is writing."""
    pending = (engine.pending_responses, engine.pending_failures, engine.pending_ledger, engine.pending_prompts)
    engine.pending_responses, engine.pending_failures, engine.pending_ledger, engine.pending_prompts = [], [], [], []
    with store.session():
        engine._write(*pending)  # the journal holds them too: replaying them later adds nothing twice
        _book_stats(invocation, runner, t_start)
        store.put_invocation(run_id, invocation)
        ledger = store.ledger(run_id)
        summary = {"run_id": run_id, "benchmark": cfg.benchmark, "model": spec.label, "endpoint": spec.endpoint_id,
                   "interrupted": True, **account(ledger), "complete": False,
                   "samples_so_far": store.samples_seen(run_id)}
        summary["this_invocation"] = summary["invocations"][-1]
        summary["partial"] = "interrupted"
        summary["next_step"] = f"continue it with `asyncbench run --resume {run_id}` (or the same command)"
        summary["scores"] = None
        summary = dict(redact_json(summary))
    engine.journal.close()
    write_out(out, summary)
    return summary


async def _generate_and_close(cfg: RunConfig, benchmark: Benchmark, samples: list[Sample] | Iterator[Sample],
                              client: ModelClient, engine: Engine, store: Store, runner: Runner,
                              invocation: InvocationEntry, earlier: list[InvocationEntry], build: Any,
                              ctx: RunContext, t_start: float, run_id: str, spec: Any, truncated: dict[str, int],
                              limits: dict[str, Any], as_chat: set[str], prices: PriceTable, unpriced: list[str],
                              out: Path) -> dict[str, Any]:
    """Generate and score every sample, then book the invocation and write run.json."""
    failure: Exception | None = None
    async with anyio.create_task_group() as tg:
        tg.start_soon(engine.writer)
        try:
            administer = getattr(benchmark, "administer", None)
            if isinstance(samples, list):
                kept, prep_report = await benchmark.prepare(samples, ctx)
                kept_requests: Iterable[Request] = [build(s) for s in kept] if administer is None else []
            else:  # streamed: prepare() is the identity for such benchmarks
                kept, prep_report = [], {}
                kept_requests = (build(s) for s in _collect(samples, kept))
            if administer is not None:  # adaptive: the benchmark chooses each batch (bench/adaptive.py)
                kept, generated, results, more = await _administer(administer, kept, engine, client, build,
                                                                   benchmark, truncated, ctx, cfg.benchmark)
                prep_report = {**prep_report, **more}
            else:
                generated = await engine.generate(client, kept_requests, "eval", kept,
                                                  label=f"{cfg.benchmark} {spec.label}")
                results = await _score(benchmark, kept, generated, client, truncated, ctx)
        except Exception as exc:
            failure = exc
        await engine.flush()
        engine.journal.close()
        tg.cancel_scope.cancel()
    if failure is not None:
        raise failure
    loaded = samples if isinstance(samples, list) else kept
    with store.session():  # the closing writes and reads in one opening of the file
        # earlier invocations' statuses and payments: an answer this run produced stays its own
        previous = {e.sample_id: e for e in store.sample_entries(run_id)} if earlier else {}
        paid = store.paid_keys(run_id) if earlier else {}
        rows = [_result_row(run_id, r, merge_sample(previous.get(r.sample_id),
                                                    SampleEntry(r.sample_id, r.task, status, invocation.invocation),
                                                    paid.get(r.key or "")))
                for r, status in zip(results, _statuses(results, generated.sources))]
        rows += _unsent_rows(run_id, invocation.invocation, loaded, kept,
                             str(prep_report.get("excluded_reason") or EXCLUDED_BY_RULE))
        store.put_results(rows)
        _book_stats(invocation, runner, t_start)
        invocation.finished = True
        ledger = store.ledger(run_id)
        invocation.complete = all(c.status in SETTLED for c in ledger.statuses)
        store.put_invocation(run_id, invocation)
        ledger.invocations[-1] = invocation
        scores = benchmark.aggregate(results, prep_report)
        limits["no_template_sent_as_chat"] = sorted(as_chat)
        entries = store.sample_entries(run_id)
        summary = run_summary(cfg, run_id, spec, account(ledger), [e for e in entries if e.status not in SETTLED],
                              engine.latencies, runner, scores, prep_report, truncated, limits, prices, client,
                              unpriced, [e for e in entries if e.status == "excluded"])
        summary = dict(redact_json(summary))
        store.finish_run(run_id, "complete" if summary["complete"] else "partial", summary)
    write_out(out, summary)
    return summary


async def _administer(administer: Any, samples: list[Sample], engine: Engine, client: ModelClient,
                      build: Any, benchmark: Benchmark, truncated: dict[str, int], ctx: RunContext,
                      label: str) -> tuple[list[Sample], Generated, list[SampleResult], dict[str, Any]]:
    """Rounds of generate + score, each batch chosen by the benchmark from the answers so
    far; returns the samples asked, their answers and results in the order asked."""
    async def ask(batch: list[Sample]) -> tuple[Generated, list[SampleResult]]:
        generated = await engine.generate(client, [build(s) for s in batch], "eval", batch,
                                          label=f"{label} {client.spec.label} (adaptive, {len(batch)})")
        return generated, await _score(benchmark, batch, generated, client, truncated, ctx)

    rounds, report = await administer(samples, ask)
    asked = [s for batch, _, _ in rounds for s in batch]
    generated = Generated([a for _, g, _ in rounds for a in g.answers], [x for _, g, _ in rounds for x in g.sources],
                          [k for _, g, _ in rounds for k in g.keys])
    return asked, generated, [r for _, _, rs in rounds for r in rs], report


def _statuses(results: list[SampleResult], sources: list[str]) -> list[str]:
    """Each scored sample's ledger status, from what became of its request."""
    out = []
    for r, source in zip(results, sources):
        if r.status == "ok":
            out.append({"sent": "answered", "from_cache": "from_cache"}.get(source, "shared"))
        else:
            out.append("failed" if r.status == "failed" else "skipped_budget")
    return out


def _unsent_rows(run_id: str, invocation: int, loaded: list[Sample], kept: list[Sample],
                 rule: str) -> list[dict[str, Any]]:
    """Ledger rows of samples that never became requests, "excluded" with their reason:
    left out by the benchmark's own rule (prepare's "excluded_reason", else a generic
    one), or malformed data rows (file, line, parse error), which no re-run can fix."""
    kept_ids = {s.id for s in kept}
    rows = [{"run_id": run_id, "sample_id": s.id, "task": s.task, "purpose": "eval", "status": "excluded",
             "error": rule, "invocation": invocation, "meta_json": "{}"}
            for s in loaded if s.id not in kept_ids]
    for bad in notes_of(loaded).get("skipped_rows", []):
        rows.append({"run_id": run_id, "sample_id": bad.sample_id, "task": bad.task, "purpose": "eval",
                     "status": "excluded", "error": f"malformed data row: {bad.describe()}", "invocation": invocation,
                     "meta_json": "{}"})
    return rows


def samples_digest(samples: list[Sample]) -> str:
    """sha256 of what the samples ask and expect, in order."""
    h = hashlib.sha256()
    for s in samples:
        h.update(json.dumps([s.id, s.task, s.messages, s.answers, s.max_tokens, s.metric, s.chat],
                            default=str, ensure_ascii=False).encode())
        h.update((s.prompt or "").encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def _collect(items: Iterator[Sample], into: list[Sample]) -> Iterator[Sample]:
    """Pass a stream through, keeping what went by."""
    for item in items:
        into.append(item)
        yield item


async def _score(benchmark: Benchmark, samples: list[Sample], generated: Generated, client: ModelClient,
                 truncated: dict[str, int], ctx: RunContext) -> list[SampleResult]:
    results: list[SampleResult] = []
    ok_samples, ok_preds, ok_results = [], [], []
    for s, ans, source, key in zip(samples, generated.answers, generated.sources, generated.keys):
        r = SampleResult(sample_id=s.id, task=s.task, status="failed", cached=source != "sent", key=key,
                         truncated_tokens=truncated.get(s.id, 0), meta=s.meta, references=list(s.answers))
        if isinstance(ans, Response):
            r.status = "ok"
            r.prediction = postprocess(ans.text, s.meta.get("postprocess"))
            r.prompt_tokens = ans.usage.prompt_tokens
            r.completion_tokens = ans.usage.completion_tokens
            r.cached_prompt_tokens = ans.usage.cached_prompt_tokens
            r.cost_usd = client.price.cost(ans.usage, ans.discount)
            r.latency_ms = ans.latency_ms
            ok_samples.append(s)
            ok_preds.append(r.prediction)
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
            if sc is None and r.meta.get("score_error"):  # scoring failed, not the answer: retried on resume
                r.status, r.error = "failed", str(r.meta["score_error"])
    return results


def _result_row(run_id: str, r: SampleResult, entry: SampleEntry) -> dict[str, Any]:
    row = dict(vars(r))  # shallow: dataclasses.asdict deep-copies and costs ~0.1 ms a row
    meta = row.pop("meta")
    row.update(run_id=run_id, purpose="eval", meta_json=json.dumps(meta, default=str, ensure_ascii=False),
               status=entry.status, invocation=entry.invocation,
               references_json=json.dumps(row.pop("references"), ensure_ascii=False))
    return row
