"""Run a benchmark against a model: `asyncbench run BENCHMARK --model SPEC`.

BENCHMARK: longbench[:tasks], longbench-e, minilongbench, bamboo, 100-longbench, or
jsonl:PATH. SPEC: openai:MODEL, anthropic:MODEL, tgi:NAME, openai-compat:MODEL, sim
(the built-in simulator's baseline, started on 127.0.0.1), or auto (a real API when its
key is set, else sim). Several benchmarks (comma-separated), a repeated --model, or
--set FILE.toml make an eval set: every (model, benchmark) run together (run_set.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from ..providers.bounded import DEFAULT_MAX_RESPONSE_BYTES

if TYPE_CHECKING:
    from ..run_summary import DryRunSummary, RunSummary


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("benchmark", nargs="?",
                   help="longbench[:t1,t2] | longbench-e | minilongbench | bamboo | 100-longbench | jsonl:PATH "
                        "(not needed with --resume); several, comma-separated, make an eval set")
    p.add_argument("--model", action="append", default=None,
                   help="provider:model, 'sim', or 'auto' (default); repeat for an eval set of several models")
    p.add_argument("--set", dest="set_file", metavar="FILE.toml",
                   help="an eval set file: models (with their own base_url, rpm, tpm) x benchmarks, shared "
                        "options (examples/eval_set.toml)")
    p.add_argument("--base-url", action="append", default=[], dest="base_urls",
                   help="endpoint URL; repeat for a pool of replicas")
    p.add_argument("--endpoint-id", help="cache identity of the endpoint(s) (default: the sorted URLs)")
    p.add_argument("--api", choices=("chat", "completion"), default="chat",
                   help="chat (default) or completion endpoint for base models")
    p.add_argument("--data-dir", help="benchmark data directory (default: $ASYNCBENCH_DATA_DIR, else the hub)")
    p.add_argument("--cache", help="DuckDB cache file (default: ~/.cache/asyncbench/cache.duckdb)")
    p.add_argument("--out", help="output directory for run.json (default: runs/RUN_ID; runs/RUN_ID-CACHE with a --cache other than the default)")
    p.add_argument("--resume", metavar="RUN_ID", help="continue a stored run (id or unique prefix) with its stored "
                   "settings")
    p.add_argument("--limit", type=int, help="run the first N samples of each task only")
    p.add_argument("--concurrency", type=int, default=32,
                   help="max in-flight requests per endpoint (default 32, at most 4096)")
    p.add_argument("--rpm", type=float, help="requests per minute limit of the endpoint group")
    p.add_argument("--tpm", type=float, help="tokens per minute limit (prompt + max_tokens per request)")
    p.add_argument("--max-cost", type=float, metavar="USD", help="stop issuing requests before spend passes USD")
    p.add_argument("--dry-run", action="store_true", help="print requests, tokens and cost (each exact or an upper "
                   "bound; answers, judge and prior calls in the cache are free); send nothing")
    p.add_argument("--timeout", type=float, default=120.0, dest="timeout_s", help="per-request timeout, s")
    p.add_argument("--max-attempts", type=int, default=6, help="attempts per request for transient failures")
    p.add_argument("--max-response-bytes", type=int, default=DEFAULT_MAX_RESPONSE_BYTES, metavar="N",
                   help="refuse an answer whose (decoded) body is over N bytes (default 4 MiB)")
    p.add_argument("--max-input-tokens", type=int, help="truncate prompts in the middle to this many tokens")
    p.add_argument("--tokenizer", help="tokenizer for truncation: cl100k_base, o200k_base, hf:REPO, or a "
                   "model's tokenizer.json (file or folder)")
    p.add_argument("--official-model", metavar="NAME",
                   help="LongBench: the served model is pred.py's NAME (model2maxlen.json, e.g. llama2-7b-chat-4k): "
                        "its budget, build_chat text and cut (default: found from the server's /info or /v1/models)")
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--repeat", type=int, default=0, help="repeat index (a new cache key for a new sample)")
    p.add_argument("--judge", help="judge model spec for LLM-as-judge benchmarks")
    p.add_argument("--judge-base-url", action="append", default=[], dest="judge_base_urls")
    p.add_argument("--prices", help="price file overriding the shipped table")
    p.add_argument("--base-urls-file", metavar="FILE",
                   help="a fleet of endpoints: one URL per line (# comments allowed), added to --base-url")
    p.add_argument("--backend", choices=("local", "ray"), default="local",
                   help="local (default): this process; ray: requests and scoring on Ray workers")
    p.add_argument("--ray-address", help="Ray cluster: auto | HOST:PORT | ray://HOST:10001 (default: start a local one)")
    p.add_argument("--ray-workers", type=int, default=2, help="generation workers with --backend ray (default 2)")
    p.add_argument("--ray-shared-limiter", metavar="NAME",
                   help="with --backend ray: one RPM/TPM limiter shared by every run on the cluster that names it "
                        "(same model, endpoints and key); the last run to end removes it")
    p.add_argument("--batch", action="store_true",
                   help="send uncached requests through the provider's batch API (OpenAI, Anthropic): half "
                        "price, results within 24 h; an interrupted run is re-attached by the same command")
    p.add_argument("--no-wait", action="store_true",
                   help="with --batch: submit the batches and exit (exit 3, partial); the same command later "
                        "collects the results")
    p.add_argument("--batch-fallback", choices=("batch", "live"), default="batch",
                   help="requests a batch did not answer (expired, server error): in the next batch (default) "
                        "or live at list price")
    p.add_argument("--prompt-cache", choices=("auto", "off"), default="auto",
                   help="auto (default): prompts sharing a long prefix (a context several questions ask about) "
                        "mark it for the provider's prompt cache (Anthropic cache_control, OpenAI "
                        "prompt_cache_key): cached input costs 10-50%%; off: send prompts unmarked")
    p.add_argument("--stream", choices=("on", "off"), default="on",
                   help="on (default): live answers are streamed where the provider streams, which times "
                        "each one (time to first token, time per output token: the summary and report show "
                        "their percentiles by context length); the answer, usage and cache key are those of "
                        "the unstreamed request. off: answers come whole (no TTFT)")
    p.add_argument("--no-progress", action="store_false", dest="progress", default=None,
                   help="no progress bar (default: shown on a terminal only)")
    p.add_argument("--progress", action="store_true", dest="progress",
                   help="show the progress bar also when stderr is not a terminal (CI logs)")
    p.add_argument("--json", action="store_true", help="print run.json (or the dry run) as JSON instead of a table")
    _add_benchmark_options(p)


def _add_benchmark_options(p: argparse.ArgumentParser) -> None:
    """Each benchmark's own flags, as it declares them (benchmarks/*: OPTIONS)."""
    from ..benchmarks import benchmark_classes

    seen: set[str] = set()
    for name, cls in benchmark_classes().items():
        group = None
        for opt in cls.OPTIONS:
            if opt.flag in seen:
                continue
            seen.add(opt.flag)
            group = group or p.add_argument_group(f"{name} options")
            if opt.kind == "flag":
                group.add_argument(opt.flag, action="store_true", dest=opt.key, help=opt.help)
            else:
                kind = {"int": int, "float": float}.get(opt.kind, str)
                group.add_argument(opt.flag, type=kind, dest=opt.key, choices=opt.choices or None, help=opt.help)


def _extra(args: argparse.Namespace) -> dict[str, Any]:
    """The chosen benchmark's options, as it declares them (benchmarks.benchmark_options)."""
    from ..benchmarks import benchmark_options, option_keys

    model = args.model[0] if isinstance(args.model, list) else args.model or "auto"  # --model repeats for sets
    return benchmark_options(args.benchmark, {k: getattr(args, k) for k in option_keys()}, model, args.tokenizer)


def _fleet_urls(path: str) -> list[str]:
    """Endpoint URLs from a file, one per line; blank lines and # comments skipped."""
    from pathlib import Path

    from ..errors import UserError
    from ..urls import validate_base_url

    try:
        raw = Path(path).expanduser().read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read --base-urls-file {path}: {exc.strerror or exc}") from None
    urls = []
    for lineno, line_bytes in enumerate(raw.splitlines(), 1):
        try:
            line = line_bytes.decode("utf-8")
        except UnicodeDecodeError:
            raise UserError(f"{path}:{lineno}: not text; write one endpoint URL per line") from None
        url = line.split("#", 1)[0].strip()
        if not url:
            continue
        urls.append(validate_base_url(url, f"{path}:{lineno}"))
    if not urls:
        raise UserError(f"{path} lists no endpoint URLs; write one per line, e.g. http://tgi-0:80")
    return urls


# A run that ended with samples not settled (failed, skipped by the budget):
# distinct from 0 (complete), 1 (a crash) and 2 (a user error).
EXIT_PARTIAL = 3


def main(args: argparse.Namespace) -> int:
    import gc

    import anyio

    # A run keeps many objects alive at once (a listed benchmark's samples, a window's
    # requests and answers, its keys): with the default thresholds (700, 10, 10) the
    # cyclic collector walks them again and again, ~15% of a 100k-sample run's CPU
    # (bench/raw_client_ratio.md). Almost nothing they hold is cyclic: collect less often.
    gc.set_threshold(100_000, 50, 1000)

    from ..config import RunConfig
    from ..errors import RunInterrupted, UserError
    from ..run.flow import run

    models: list[str] = args.model or []
    if not args.resume:
        from ..run.eval_set import split_benchmarks

        benchmarks = split_benchmarks(args.benchmark) if args.benchmark else []
        if args.set_file or len(models) > 1 or len(benchmarks) > 1:
            from .run_set import main_set

            return main_set(args, models, benchmarks, _fleet_urls(args.base_urls_file) if args.base_urls_file else [])
    args.model = models[0] if models else "auto"
    if args.resume:
        from ..store import Store, default_cache_path

        with Store(args.cache or default_cache_path()) as store:
            stored_json = store.runs.config_json(store.runs.find_run(args.resume))
        stored = json.loads(stored_json) if stored_json else None
        if stored is None:
            raise UserError(f"run {args.resume!r} has no stored settings; run its command again instead")
        # the stored endpoint_id is the resolved identity (the --endpoint-id given, else the
        # one derived from the same URLs): kept, so the resumed run has the same id
        stored.pop("resolved_model", None)
        stored.update(cache=args.cache, progress=args.progress, dry_run=False, backend=args.backend,
                      ray_address=args.ray_address, ray_workers=args.ray_workers, batch=args.batch,
                      ray_shared_limiter=args.ray_shared_limiter, no_wait=args.no_wait, batch_fallback=args.batch_fallback, prompt_cache=args.prompt_cache,
                      max_response_bytes=args.max_response_bytes, stream=args.stream)
        cfg = RunConfig(**stored)
    else:
        if not args.benchmark:
            raise UserError("name a benchmark (e.g. `asyncbench run minilongbench --model sim`), or --resume RUN_ID")
        base_urls = args.base_urls + (_fleet_urls(args.base_urls_file) if args.base_urls_file else [])
        cfg = RunConfig(
            benchmark=args.benchmark, model=args.model, base_urls=base_urls, endpoint_id=args.endpoint_id,
            api=args.api, data_dir=args.data_dir, cache=args.cache, out=args.out, limit=args.limit,
            concurrency=args.concurrency, rpm=args.rpm, tpm=args.tpm, max_cost=args.max_cost,
            dry_run=args.dry_run, timeout_s=args.timeout_s, max_attempts=args.max_attempts,
            max_input_tokens=args.max_input_tokens, tokenizer=args.tokenizer, official_model=args.official_model,
            temperature=args.temperature,
            repeat=args.repeat, judge=args.judge, judge_base_urls=args.judge_base_urls, prices=args.prices,
            progress=args.progress,
            backend=args.backend, ray_address=args.ray_address,
            ray_workers=args.ray_workers, ray_shared_limiter=args.ray_shared_limiter, batch=args.batch,
            no_wait=args.no_wait,
            batch_fallback=args.batch_fallback, prompt_cache=args.prompt_cache, extra=_extra(args),
            max_response_bytes=args.max_response_bytes, stream=args.stream,
        )
    from ..sim.testing import sim_if

    cfg.validate()  # before the simulator starts
    try:
        with sim_if(cfg.uses_sim()) as sim_url:
            result = anyio.run(run, cfg, sim_url)
    except RunInterrupted as stop:
        print(f"asyncbench: interrupted; run {stop.summary['run_id']} booked what it did (run.json written); "
              f"{stop.summary['next_step']}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:  # before the run started (planning, generating samples) or a dry run
        import shlex

        again = shlex.join(["asyncbench", *sys.argv[1:]])
        what = "a dry run" if cfg.dry_run else "the run had not started"
        print(f"asyncbench: interrupted ({what}): nothing was sent or recorded; to start again: {again}",
              file=sys.stderr)
        return 130
    return _show(result, args.json)


def _show(result: RunSummary | DryRunSummary, as_json: bool) -> int:
    """Print the summary (or the dry run) as a table or as JSON; the exit status."""
    from ..run_summary import RunSummary

    if as_json:
        shown = {**result.to_json(), "out_dir": result.out_dir} if isinstance(result, RunSummary) else result
        json.dump(shown, sys.stdout, indent=2, ensure_ascii=False, default=str)
        print()
    elif isinstance(result, RunSummary):
        from ..report.summary import print_summary

        print_summary(result)
    else:
        from ..report.dry_run import print_dry_run

        print_dry_run(result)
    if not isinstance(result, RunSummary) or result.complete:
        return 0
    why = f"run ended partial: {result.aborted}" if result.aborted else f"run {result.run_id} ended"
    from ..ledger import KEY_HINT_START
    from ..terminal import shown as escaped

    step = "" if result.aborted and (result.next_step or "").startswith(KEY_HINT_START) else f"; {result.next_step}"
    print(escaped(f"asyncbench: {why} ({result.partial}){step}"), file=sys.stderr)
    return EXIT_PARTIAL
