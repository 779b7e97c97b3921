"""asyncbench's serving latency against NVIDIA AIPerf's, on the same prompts to the same real
llama.cpp `llama-server` (issue 38 item 6).

    PYTHONPATH=$PWD /work/main/.venv/bin/python bench/latency.py [--n 40] [--rounds 2] \
        [--size small|tiny] [--aiperf /work/aiperf-venv/bin/aiperf]

The server is the one tests/servers/llama_build.py builds, serving a random-weight model
with the Llama-2 vocabulary (tests/servers/tiny_gguf.py; `--size small`, the default: 4
layers of 256, ~1 s of prefill for 3,000 tokens and 2-12 ms a token on one thread here, so
that a client's own few milliseconds are a small part of what it measures; `tiny`: the
tests' 1 layer of 64) on one slot of 4,096 tokens, one thread, its prompt cache off (`--no-cache-prompt --cache-ram 0`), so that every request
pays its whole prefill whichever tool sends it and in whichever order; the server pinned to
CPU 0 and each client to CPU 1 (AIPerf with one worker and one record processor), the
server at nice -10 and the clients at -5 (the machine is shared: other users' processes
would otherwise slow the server between one tool's run and the other's). The prompts: `--n`
distinct texts of 100 to 3,300 random words, each a chat message asking for 64 tokens at
temperature 0, sent one at a time (concurrency 1) by each tool in turn, `--rounds` times
(asyncbench then AIPerf, AIPerf then asyncbench, ..., after a warm-up of 4 requests):

- asyncbench: `asyncbench run jsonl:FILE --model openai-compat:tiny --concurrency 1` (the
  real CLI, streaming by default), each request's timing read back with `asyncbench
  samples` (ttft_ms, tpot_ms, itl_ms: what run.json's serving block is computed from);
- AIPerf (`pip install aiperf`, its own venv, v0.13.0): `aiperf profile --endpoint-type chat
  --streaming --custom-dataset-type single_turn --concurrency 1 --use-server-token-count`,
  its tokenizer the shared Llama-2 tokenizer.json served from a local hub cache (offline),
  each record's `time_to_first_token`, `inter_token_latency` (its TPOT: (request latency -
  TTFT) / (output tokens - 1), aiperf/metrics/types/inter_token_latency_metric.py) and
  `inter_chunk_latency` read from its profile_export.jsonl.

The server's speed is not the same under both tools: its own prefill time of a prompt (its
log's `prompt eval time`) was up to twice as long during AIPerf's runs as during
asyncbench's on this shared two-core machine. So TTFT is also given with the server's
prefill equalised: each request's TTFT less the server's prefill of it, plus the mean of
that prompt's two prefills (one under each tool): what each client measures beyond the
server's work, on one server speed.

Both sides' percentiles are computed here by the same function (asyncbench.serving.quantiles,
numpy's linear method); the paired difference matches each prompt's two measurements by the
order they were sent (both send the file in order). The script reports; it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from statistics import median
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
TOKENIZER = ROOT.parent / "shared" / "data" / "tokenizers" / "llama-2" / "tokenizer.json"
WORDS = ["the", "of", "and", "to", "in", "a", "is", "that", "for", "it", "as", "was", "with", "be", "by", "on", "not", "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an", "they", "you", "were", "her", "she", "there", "been", "one", "all", "we", "their", "long", "context", "model", "answer", "question", "document"]
MAX_TOKENS = 64
# The server on CPU 0 (every thread: `taskset -a`), each client on CPU 1: on two cores a
# client's CPU (AIPerf is a dozen processes) would otherwise slow the server it measures.
SERVER_CPU, CLIENT_CPU = "0", ["nice", "-n", "-5", "taskset", "-c", "1"]


def prompts(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    lengths = [100 + (3200 * i) // max(1, n - 1) for i in range(n)]
    rng.shuffle(lengths)
    return [f"document {i}: " + " ".join(rng.choice(WORDS) for _ in range(k)) for i, k in enumerate(lengths)]


def run_asyncbench(texts: list[str], url: str, tmp: Path, k: int) -> list[dict[str, Any]]:
    data = tmp / "prompts.jsonl"
    data.write_text("".join(json.dumps({"id": str(i), "messages": [{"role": "user", "content": t}], "answers": ["x"],
                                        "max_tokens": MAX_TOKENS}) + "\n" for i, t in enumerate(texts)))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cache, out = tmp / f"c{k}.duckdb", tmp / f"o{k}"
    done = subprocess.run([*CLIENT_CPU, sys.executable, "-m", "asyncbench.cli", "run", f"jsonl:{data}", "--model",
                           "openai-compat:tiny", "--base-url", f"{url}/v1", "--cache", str(cache), "--out", str(out),
                           "--concurrency", "1", "--no-progress"], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"asyncbench failed: {done.stderr[-2000:]}")
    run_id = json.loads((out / "run.json").read_text())["run_id"]
    rows = subprocess.run([sys.executable, "-m", "asyncbench.cli", "samples", run_id, "--cache", str(cache),
                           "--format", "jsonl"], env=env, capture_output=True, text=True, check=True).stdout
    by_id = {r["sample_id"]: r for r in map(json.loads, filter(None, rows.split("\n")))}  # not splitlines: U+2028
    return [{"ttft": r["ttft_ms"], "tpot": r["tpot_ms"], "itl": r["itl_ms"] or [], "e2e": r["e2e_ms"],
             "isl": r["prompt_tokens"], "osl": r["completion_tokens"]} for r in (by_id[str(i)] for i in range(len(texts)))]


def hub_cache(tmp: Path) -> Path:
    """The shared tokenizer as an offline Hugging Face hub cache entry AIPerf can load."""
    home = tmp / "hf"
    entry = home / "hub" / "models--asyncbench--llama-2-tokenizer"
    snap = entry / "snapshots" / ("0" * 40)
    snap.mkdir(parents=True, exist_ok=True)
    (entry / "refs").mkdir(exist_ok=True)
    (entry / "refs" / "main").write_text("0" * 40)
    (snap / "tokenizer.json").write_bytes(TOKENIZER.read_bytes())
    (snap / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "LlamaTokenizerFast", "bos_token": "<s>",
                                                            "eos_token": "</s>", "unk_token": "<unk>"}))
    return home


def run_aiperf(aiperf: str, texts: list[str], url: str, tmp: Path, k: int) -> list[dict[str, Any]]:
    data = tmp / "aiperf.jsonl"
    data.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    out = tmp / f"aiperf{k}"
    env = {**os.environ, "HF_HOME": str(hub_cache(tmp)), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run([*CLIENT_CPU, aiperf, "profile", "--workers-max", "1", "--record-processors", "1", "--model", "tiny", "--url", url, "--endpoint-type", "chat", "--streaming",
                           "--input-file", str(data), "--custom-dataset-type", "single_turn",
                           "--dataset-sampling-strategy", "sequential", "--request-count", str(len(texts)),
                           "--concurrency", "1", "--tokenizer", "asyncbench/llama-2-tokenizer",
                           "--use-server-token-count", "--extra-inputs", f"max_tokens:{MAX_TOKENS}", "--extra-inputs",
                           "temperature:0", "--artifact-dir", str(out), "--ui-type", "none", "--export-level", "records"],
                          env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"aiperf failed: {done.stdout[-2000:]} {done.stderr[-2000:]}")
    records = [json.loads(line) for line in (out / "profile_export.jsonl").read_text().splitlines()]
    records.sort(key=lambda r: r["metadata"]["request_start_ns"])

    def value(r: dict[str, Any], name: str) -> Any:
        return (r["metrics"].get(name) or {}).get("value")

    return [{"ttft": value(r, "time_to_first_token"), "tpot": value(r, "inter_token_latency"),
             "itl": value(r, "inter_chunk_latency") or [], "e2e": value(r, "request_latency"),
             "isl": value(r, "input_sequence_length"), "osl": value(r, "output_sequence_length")} for r in records]


def table(rounds: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]]) -> list[str]:
    from asyncbench.serving import quantiles

    lines = ["| round | measure | n | asyncbench p50 / p90 / p95 / p99 ms | AIPerf p50 / p90 / p95 / p99 ms | "
             "difference p50 / p90 / p95 / p99 | paired median |", "|---|---|---|---|---|---|---|"]
    for k, (ours, theirs) in enumerate(rounds, 1):
        for name, key in (("TTFT", "ttft"), ("TTFT, the server's prefill equalised", "ttft_same_server"),
                          ("TPOT", "tpot"), ("e2e", "e2e"), ("ITL (chunk gaps)", "itl")):
            if key == "itl":
                a = quantiles(g for r in ours for g in r["itl"])
                b = quantiles(g for r in theirs for g in r["itl"])
                paired, n = "", sum(len(r["itl"]) for r in ours)
            else:
                a = quantiles(r[key] for r in ours if r[key] is not None)
                b = quantiles(r[key] for r in theirs if r[key] is not None)
                rel = [(x[key] - y[key]) / y[key] for x, y in zip(ours, theirs) if x[key] and y[key]]
                paired, n = f"{100 * median(rel):+.1f}%", len(ours)
            qs = ("p50", "p90", "p95", "p99")
            lines.append(f"| {k} | {name} | {n} | {' / '.join(f'{a[q]:.2f}' for q in qs)} | "
                         f"{' / '.join(f'{b[q]:.2f}' for q in qs)} | "
                         f"{' / '.join(_rel(a[q], b[q]) for q in qs)} | {paired} |")
    return lines


def _rel(a: float | None, b: float | None) -> str:
    return "-" if a is None or not b else f"{100 * (a - b) / b:+.1f}%"


def main() -> None:
    import servers.tiny_gguf as model_file
    from servers.llama_build import built_binary
    from servers.llama_server import running

    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=40, help="prompts")
    ap.add_argument("--rounds", type=int, default=2, help="asyncbench then AIPerf, this many times")
    ap.add_argument("--aiperf", default="/work/aiperf-venv/bin/aiperf")
    ap.add_argument("--size", choices=("small", "tiny"), default="small", help="the random-weight model's size")
    args = ap.parse_args()
    binary = built_binary()
    if binary is None:
        raise SystemExit("llama-server is not built: python tests/servers/llama_build.py")
    texts = prompts(args.n)
    print(f"load average at start: {os.getloadavg()}", flush=True)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        if args.size == "small":
            model_file.N_EMBD, model_file.N_HEAD, model_file.N_LAYER, model_file.N_FF = 256, 4, 4, 768
        model = model_file.write_model(TOKENIZER, tmp / f"{args.size}.gguf")
        with running(binary, model, tmp / "server.log", ctx=4096, slots=1, alias="tiny",
                     extra=("--no-cache-prompt", "--cache-ram", "0")) as server:
            subprocess.run(["taskset", "-a", "-p", "-c", SERVER_CPU, str(server.proc.pid)], check=True,
                           capture_output=True)
            for task in Path(f"/proc/{server.proc.pid}/task").iterdir():  # every thread of it, ahead of
                subprocess.run(["renice", "-n", "-10", "-p", task.name], capture_output=True)  # other users'
            run_asyncbench(texts[:4], server.url, tmp, -1)  # a warm-up, not measured
            rounds = []
            for k in range(args.rounds):  # the order alternates: a drift of the machine favours neither
                if k % 2:
                    theirs = run_aiperf(args.aiperf, texts, server.url, tmp, k)
                    ours = run_asyncbench(texts, server.url, tmp, k)
                else:
                    ours = run_asyncbench(texts, server.url, tmp, k)
                    theirs = run_aiperf(args.aiperf, texts, server.url, tmp, k)
                if [r["isl"] for r in ours] != [r["isl"] for r in theirs]:
                    print("note: the two sides' prompt token counts differ (pairs by order)", flush=True)
                rounds.append((ours, theirs))
                print(f"round {k + 1}: {len(ours)} asyncbench and {len(theirs)} AIPerf requests; prompt tokens "
                      f"{min(r['isl'] for r in ours)}-{max(r['isl'] for r in ours)}, output tokens "
                      f"{min(r['osl'] for r in ours)}-{max(r['osl'] for r in ours)} (AIPerf "
                      f"{min(r['osl'] for r in theirs)}-{max(r['osl'] for r in theirs)})", flush=True)
            server_log = (tmp / "server.log").read_text(errors="replace")
    # the server's own prefill time of each request (its log's `prompt eval time`), each
    # round's two sides in the order they ran: the same prompt's two prefills differ when the
    # machine ran the server slower under one tool than under the other
    evals = [float(x.split("=")[1].split("ms")[0]) for x in server_log.splitlines() if "prompt eval time" in x][4:]
    n = len(texts)
    for k, (ours, theirs) in enumerate(rounds):
        first, second = evals[2 * k * n:(2 * k + 1) * n], evals[(2 * k + 1) * n:(2 * k + 2) * n]
        mine, other = (second, first) if k % 2 else (first, second)
        for side, ev in ((ours, mine), (theirs, other)):
            for r, e, both in zip(side, ev, zip(mine, other)):
                r["prefill"], r["ttft_same_server"] = e, r["ttft"] - e + sum(both) / 2
    print("\n".join(table(rounds)))
    for k, (ours, theirs) in enumerate(rounds):
        first, second = evals[2 * k * n:(2 * k + 1) * n], evals[(2 * k + 1) * n:(2 * k + 2) * n]
        mine, other = (second, first) if k % 2 else (first, second)
        # what each client adds to the server's own prefill: TTFT less the server's time
        added = [median(r["ttft"] - e for r, e in zip(side, ev)) for side, ev in ((ours, mine), (theirs, other))]
        print(f"round {k + 1}: the server's own prefill (its log's `prompt eval time`), median {median(mine):.1f} ms "
              f"under asyncbench, {median(other):.1f} ms under AIPerf; TTFT less it, median: asyncbench "
              f"{added[0]:.2f} ms, AIPerf {added[1]:.2f} ms", flush=True)
    print(f"load average at end: {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()
