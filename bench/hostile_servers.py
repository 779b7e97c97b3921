"""How fast, and in how much memory, a run ends against each hostile server behaviour.

For every behaviour of asyncbench/sim/hostile.py and every transport (openai-compat:
our HTTP/1.1 client; openai: and anthropic: the official SDKs on httpx2), one real
`asyncbench run jsonl:...` subprocess of 20 samples with `--timeout T` against the
hostile server on 127.0.0.1; its exit code, wall time and peak RSS (wait4's ru_maxrss)
go in a table. A row passes when the run ends in at most 2 x T with a peak RSS of at
most 300 MB (issue 24's acceptance).

    PYTHONPATH=$PWD python bench/hostile_servers.py --timeout 10 --out bench/hostile_servers.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from asyncbench.sim.hostile import BEHAVIOURS  # noqa: E402

TRANSPORTS = {
    "openai-compat (http1)": ("openai-compat:m", "/v1"),
    "openai SDK (httpx2)": ("openai:gpt-4o-mini", "/v1"),
    "anthropic SDK (httpx2)": ("anthropic:claude-haiku-4-5", ""),
}
MAX_RSS_MB = 300
KEY = "sk-hostile-bench-0123456789abcdef"


def run_one(port: int, behaviour: str, model: str, suffix: str, timeout: float, tmp: Path, n: int) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    env["PYTHONPATH"] = str(REPO)
    env["ASYNCBENCH_API_KEY"] = KEY  # what `echo-key` echoes back in five disguises
    tag = f"{behaviour}-{model.split(':')[0]}"
    cmd = [sys.executable, "-m", "asyncbench.cli", "run", f"jsonl:{tmp / 'd.jsonl'}", "--model", model,
           "--base-url", f"http://127.0.0.1:{port}/{behaviour}{suffix}", "--timeout", f"{timeout:g}",
           "--cache", str(tmp / f"{tag}.duckdb"), "--out", str(tmp / tag), "--no-progress"]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    text = err.decode(errors="replace")
    last = text.strip().splitlines()[-1:] or [""]
    leaked = any(KEY in p.read_text(errors="replace") for p in tmp.rglob("*") if p.is_file() and tag in str(p))
    return {"rc": proc.returncode, "wall_s": wall, "rss_mb": usage.ru_maxrss / 1024, "last": last[0][:140],
            "traceback": "Traceback" in text, "leaked": leaked or KEY in text}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=10.0, help="the runs' --timeout (per request), s")
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--out", type=Path, help="write the markdown table here")
    parser.add_argument("--only", help="comma-separated behaviours to run (default: all); prints their rows")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        (tmp / "d.jsonl").write_text("".join(json.dumps({"id": f"s{i}", "prompt": f"question {i}", "answers": ["a"]})
                                             + "\n" for i in range(args.samples)))
        port_file = tmp / "port"
        server = subprocess.Popen([sys.executable, "-m", "asyncbench.sim.hostile", "--port-file", str(port_file)],
                                  env=dict(os.environ, PYTHONPATH=str(REPO)), stdout=subprocess.DEVNULL)
        try:
            while not port_file.exists():
                time.sleep(0.05)
            port = int(port_file.read_text())
            rows = []
            chosen = args.only.split(",") if args.only else list(BEHAVIOURS)
            for behaviour, what in ((b, BEHAVIOURS[b]) for b in chosen):
                for transport, (model, suffix) in TRANSPORTS.items():
                    got = run_one(port, behaviour, model, suffix, args.timeout, tmp, args.samples)
                    ok = (got["wall_s"] <= 2 * args.timeout and got["rss_mb"] <= MAX_RSS_MB and not got["traceback"]
                          and not got["leaked"])
                    rows.append((behaviour, what, transport, got, ok))
                    print(f"{behaviour:24} {transport:24} exit {got['rc']}  {got['wall_s']:6.1f} s  "
                          f"{got['rss_mb']:6.0f} MB  {'ok' if ok else 'FAIL'}  {got['last']}", flush=True)
        finally:
            server.kill()
            server.wait()
    lines = [f"| behaviour | transport | exit | time to end (s) | peak RSS (MB) | traceback | key in a file | "
             f"≤ 2×{args.timeout:g} s, ≤ {MAX_RSS_MB} MB, neither |", "|---|---|---|---|---|---|---|---|"]
    for behaviour, what, transport, got, ok in rows:
        lines.append(f"| `{behaviour}`: {what} | {transport} | {got['rc']} | {got['wall_s']:.1f} | "
                     f"{got['rss_mb']:.0f} | {'**yes**' if got['traceback'] else 'no'} | "
                     f"{'**yes**' if got['leaked'] else 'no'} | {'yes' if ok else '**no**'} |")
    table = "\n".join(lines)
    print(table)
    if args.out:
        cpu = platform.processor() or platform.machine()
        args.out.write_text(
            "# Hostile servers: how a run ends\n\n"
            "Each row: one `asyncbench run` of "
            f"{args.samples} samples (`jsonl:`), `--timeout {args.timeout:g}`, against one behaviour of the hostile "
            "server (asyncbench/sim/hostile.py, 127.0.0.1), through one transport. Exit 3 is a partial run (its "
            "samples failed, nothing lost; the same command retries them). Time to end is the whole process, "
            "Python start-up included; peak RSS is the run process's (wait4 ru_maxrss). Traceback: one on the "
            "run's stderr; key in a file: the run's key (ASYNCBENCH_API_KEY) found in its cache, journal, prompt "
            "files, run.json or stderr.\n\n"
            f"Machine: {os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, shared with other work.\n\n"
            "```\nPYTHONPATH=$PWD python bench/hostile_servers.py "
            f"--timeout {args.timeout:g} --out bench/hostile_servers.md\n```\n\n" + table + "\n\n"
            "What ends each: 429s (any Retry-After, cut to 60 s and to `--timeout`; unparsable ones count as absent) "
            "end the run once its endpoints have answered nothing but errors and 429s for one `--timeout`; a body "
            "is refused past `--max-response-bytes` (4 MiB by default) while it streams, gzip inflated in 64 KB "
            "pieces; a slow drip meets the attempt's total deadline (`--timeout`), which no byte extends. Framing is "
            "read by llhttp: a chunk size of -5 is malformed (retried until the endpoints are declared dead), a "
            "million one-byte chunks or endless 100 Continue heads break a per-answer cap at once on our client "
            "(the SDKs' httpcore skips interim heads unseen: those meet the attempt's deadline); a 200,000-deep "
            "JSON array fails its sample; Retry-After 0 or in the past is no wait asked, so our own back-off "
            "applies; a 307 to another origin is refused. A server's usage is a claim: out of bounds (10^15, "
            "900k for a one-letter answer, 1e300) it is booked at our bound and flagged, exit 0; a 200 with an "
            "error or null content is a failed attempt; escape sequences reach the terminal escaped; a key echoed "
            "hex-encoded, \\u-escaped, spaced or reversed is redacted before anything is written.\n")


if __name__ == "__main__":
    main()
