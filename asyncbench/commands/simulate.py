"""Start the local endpoint simulator (OpenAI, Anthropic and TGI wire formats).

It listens on 127.0.0.1 and prints "listening on http://127.0.0.1:PORT" once ready
(`--port 0` picks a free port; `--port-file` also writes the port to a file). Point an
OpenAI client at http://127.0.0.1:PORT/v1, an Anthropic client at http://127.0.0.1:PORT,
a TGI client at http://127.0.0.1:PORT. GET /stats shows what it received. Tokens are
counted as ceil(characters / 4). The model is a deterministic baseline answerer.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _rate(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; "
                        "another address also needs --allow-remote)")
    parser.add_argument("--allow-remote", action="store_true", help="allow binding a non-loopback --host")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (0 = pick a free one)")
    parser.add_argument("--port-file", type=Path, help="write the chosen port to this file once listening")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="base latency per response")
    parser.add_argument("--per-token-ms", type=float, default=0.0,
                        help="decode time per output token (a streamed answer's gap between tokens)")
    parser.add_argument("--prefill-ms-per-ktok", type=float, default=0.0,
                        help="prefill time per 1,000 uncached prompt tokens, before the first token")
    parser.add_argument("--jitter-ms", type=float, default=0.0, help="uniform +/- jitter on the latency")
    parser.add_argument("--rpm", type=int, help="requests per minute limit (default: none)")
    parser.add_argument("--tpm", type=int, help="tokens per minute limit, prompt + max_tokens (default: none)")
    parser.add_argument("--burst-s", type=float, default=1.0,
                        help="bucket capacity in seconds of the limit (default 1.0, as OpenAI's per-second quantisation)")
    parser.add_argument("--error-rate", type=_rate, default=0.0, help="fraction of 500/502/503 answers")
    parser.add_argument("--drop-rate", type=_rate, default=0.0, help="fraction of connections closed without a response")
    parser.add_argument("--stall-rate", type=_rate, default=0.0, help="fraction of requests that hang for --stall-s")
    parser.add_argument("--stall-s", type=float, default=600.0, help="how long a stalled request hangs (default 600)")
    parser.add_argument("--malformed-rate", type=_rate, default=0.0, help="fraction of 200s with a truncated JSON body")
    parser.add_argument("--max-context-tokens", type=int, default=131072,
                        help="context window: prompt + max_tokens above it gets the API's context-length error")
    parser.add_argument("--seed", type=int, default=0, help="seed of the fault and jitter draws")
    parser.add_argument("--prompt-cache-ttl-s", type=float, default=300.0,
                        help="prompt-cache entries expire this long after their last use (default 300, as the "
                             "providers' 5 minutes)")
    parser.add_argument("--batch-turnaround-s", type=float, default=1.0,
                        help="seconds a batch (OpenAI Batch, Anthropic Message Batches) takes to end (default 1)")
    parser.add_argument("--batch-hold", action="append", default=[], metavar="STAGE=SECONDS",
                        help="hold batch calls at STAGE (upload, create, created) for SECONDS: a client "
                             "killed meanwhile leaves the state a crash at that point would")
    parser.add_argument("--batch-expire", type=int, default=0,
                        help="the first N batches expire with half their requests unprocessed (default 0)")
    parser.add_argument("--batch-max-requests", type=int,
                        help="requests per batch, both APIs (default: the real limits, 50,000 and 100,000)")
    parser.add_argument("--batch-max-bytes", type=int,
                        help="bytes per batch, both APIs (default: the real limits, 200 MB and 256 MB)")
    parser.add_argument("--api-key-env", metavar="VAR",
                        help="accept only the key in this environment variable (Bearer or x-api-key); any other "
                             "key, or none, gets the provider's 401 (default: any key)")
    parser.add_argument("--model-id", default="asyncbench-sim", help="model name reported by /info and /v1/models")
    parser.add_argument("--served-model-name", help="as vLLM's flag: /v1/models lists this as the model's id and "
                        "--model-id as its root")
    parser.add_argument("--tokenizer-file", help="the simulated model's tokenizer.json (e.g. Llama-2's): /tokenize, "
                        "/detokenize and token counts as a real TGI/vLLM server serving it")


def _holds(items: list[str]) -> dict[str, float]:
    from ..errors import UserError

    out = {}
    for item in items:
        stage, _, seconds = item.partition("=")
        try:
            out[stage] = float(seconds)
        except ValueError:
            stage = ""
        if stage not in ("upload", "create", "created"):
            raise UserError(f"--batch-hold {item!r}: give STAGE=SECONDS with STAGE upload, create or created")
    return out


def _key(var: str | None) -> str | None:
    """The key the simulator accepts, from an environment variable (never the command line,
    where `ps` shows it)."""
    import os

    from ..errors import UserError

    if var is None:
        return None
    if not os.environ.get(var):
        raise UserError(f"--api-key-env {var}: that variable is not set")
    return os.environ[var]


def main(args: argparse.Namespace) -> int:
    import asyncio

    from ..errors import UserError
    from ..sim.server import SimConfig, serve_forever

    if args.host not in _LOOPBACK and not args.allow_remote:
        raise UserError(f"refusing to bind {args.host}: the simulator is for local use; add --allow-remote to bind it anyway")
    if not 0 <= args.port <= 65535:
        raise UserError(f"--port {args.port} is not a TCP port: give 1-65535, or 0 to pick a free one")
    config = SimConfig(
        host=args.host,
        port=args.port,
        latency_ms=args.latency_ms,
        per_token_ms=args.per_token_ms,
        prefill_ms_per_ktok=args.prefill_ms_per_ktok,
        jitter_ms=args.jitter_ms,
        rpm=args.rpm,
        tpm=args.tpm,
        burst_s=args.burst_s,
        error_rate=args.error_rate,
        drop_rate=args.drop_rate,
        stall_rate=args.stall_rate,
        stall_s=args.stall_s,
        malformed_rate=args.malformed_rate,
        max_context_tokens=args.max_context_tokens,
        seed=args.seed,
        model_id=args.model_id,
        served_model_name=args.served_model_name,
        api_key=_key(args.api_key_env),
        tokenizer_file=args.tokenizer_file,
        batch_turnaround_s=args.batch_turnaround_s,
        prompt_cache_ttl_s=args.prompt_cache_ttl_s,
        batch_expire=args.batch_expire,
        batch_hold_s=_holds(args.batch_hold),
        **({"openai_batch_max_requests": args.batch_max_requests,
            "anthropic_batch_max_requests": args.batch_max_requests} if args.batch_max_requests else {}),
        **({"openai_batch_max_bytes": args.batch_max_bytes,
            "anthropic_batch_max_bytes": args.batch_max_bytes} if args.batch_max_bytes else {}),
    )

    def announce(port: int) -> None:
        if args.port_file:
            tmp = args.port_file.with_name(args.port_file.name + ".tmp")
            tmp.write_text(f"{port}\n")
            tmp.replace(args.port_file)
        host = f"[{args.host}]" if ":" in args.host else args.host
        print(f"listening on http://{host}:{port}", flush=True)

    try:
        asyncio.run(serve_forever(config, announce))
    except KeyboardInterrupt:
        print("simulator stopped", file=sys.stderr)
    return 0
