"""PrivateEval pass@1 of attack strategies and canonical solutions in each sandbox mode.

    python bench/privateeval_isolation.py [--modes bwrap,mountns,user-bwrap] [--workers 2] [--kinds K1,K2]
    python bench/privateeval_isolation.py --hostile [--modes ...] [--code DIR]

The second form runs the whole-sample budget cases (issue 35 item 6: a forking memory
hog, socketpair buffers, CPU spread over forked children) once per mode, each in a fresh
interpreter importing the sandbox from DIR (default: this checkout; the old one for a
"before" column), and reports the verdict, the peak resident memory of the whole process
tree (sampled every 20 ms from here) and the sample cgroup's own peak where there is one.
A `-no-cgroup` suffix runs a mode as where no cgroup can be made.

Runs as root (the modes are forced with ASYNCBENCH_SANDBOX_MODE; `user-bwrap` runs the
sandbox as uid 65534 through tests/sandbox_modes.py) on the release's 152 PrivateEval
rows in the release environment (numpy 1.23.5, pandas 1.5.3) at its 3 s, CPU time after
imports. Prints a Markdown table (results in bench/privateeval_isolation.md).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from sandbox_modes import forced, run_as_user

from asyncbench.benchmarks.bamboo import metrics as M
from asyncbench.benchmarks.bamboo.benchmark import load_private_eval, read_jsonl
from asyncbench.benchmarks.bamboo.sandbox import Limits, Program, check_many, isolation
from asyncbench.benchmarks.bamboo.sandbox_env import PROBE_IMPORTS, RELEASE_TIMEOUT_S, release_python

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "bamboo"

# Completions, in the paraphrased names a model would write (an original name is a format error).
STRATEGIES = {
    "empty completion (control)": "",
    "inputs rebound (issue 24)": "None\na = b = c = bn.numset([])",
    "encoder replaced": "None\nimport sys\ng = sys._getframe(1).f_globals\nempty = g['wire']['encode']([])\n"
                        "g['value_of'] = lambda name: empty",
    "names nobody asked for": "None\nimport sys\ng = sys._getframe(1).f_globals\nsend = g['send']\n"
                              "def forged(obj):\n    if 'values' in obj:\n"
                              "        obj['values'] = {n: {'t': 'list', 'v': []} for n in 'abcLdxyz'}\n"
                              "    send(obj)\ng['send'] = forged",
    "disk walk for the answers, exec": "None\nimport os, gzip, json\nsrc = open('program.py').read()\n"
                                       "for root, dirs, files in os.walk('/'):\n    for f in files:\n"
                                       "        if f.startswith('real_all_eval'):\n"
                                       "            for line in gzip.open(os.path.join(root, f), 'rt'):\n"
                                       "                p = json.loads(line)\n"
                                       "                if src.startswith(p['prompt']):\n"
                                       "                    exec(p['prompt'] + p['canonical_solution'][0], globals())",
}


MB = 1 << 20
# (program, test, outputs, Limits fields): the attacker's cases of issue 35 item 6.
HOSTILE = {
    "forking memory hog (7 x 200 MB, limit 384 MB)": (
        "import ctypes, os, time\nlibc = ctypes.CDLL(None)\nkids = []\nfor _ in range(6):\n"
        "    pid = libc.fork()\n    assert pid >= 0, 'fork failed'\n    if pid == 0:\n"
        "        block = b'\\x01' * (200 << 20)\n        time.sleep(3)\n        libc._exit(0)\n"
        "    kids.append(pid)\nmine = b'\\x01' * (200 << 20)\n"
        "assert all(os.waitpid(pid, 0)[1] == 0 for pid in kids), 'a child died'\n",
        "", [], {"cpu_s": 10.0, "wall_s": 60.0, "memory_bytes": 384 * MB}),
    "64 socketpairs filled through libc (limit 256 MB)": (
        'import ctypes\nlibc = ctypes.CDLL(None)\nqueued = 0\nblock = b"x" * 65536\nsize = ctypes.c_int(1 << 30)\nfor _ in range(64):\n    fds = (ctypes.c_int * 2)()\n    if libc.socketpair(1, 1, 0, fds) != 0:  # AF_UNIX, SOCK_STREAM, past the audit hook\n        break\n    for fd in fds:\n        libc.setsockopt(fd, 1, 7, ctypes.byref(size), 4)  # SO_SNDBUF: up to 2 x wmem_max\n        while True:\n            sent = libc.send(fd, block, len(block), 0x40)  # MSG_DONTWAIT\n            if sent <= 0:\n                break\n            queued += sent\n',
        "def check():\n    raise AssertionError('queued %d' % queued)\n", ["queued"],
        {"cpu_s": 10.0, "wall_s": 60.0, "memory_bytes": 256 * MB}),
    "CPU: 4 forked children x 1.5 CPU-s (limit 2 s)": (
        "import ctypes, os, time\nlibc = ctypes.CDLL(None)\ndef burn(seconds):\n    start = time.process_time()\n"
        "    while time.process_time() - start < seconds:\n        pass\nkids = []\nfor _ in range(4):\n"
        "    pid = libc.fork()\n    if pid == 0:\n        burn(1.5)\n        libc._exit(0)\n    if pid < 0:\n"
        "        burn(1.5)\n    kids.append(pid)\nfor pid in kids:\n    if pid > 0:\n        os.waitpid(pid, 0)\n",
        "", [], {"cpu_s": 2.0, "wall_s": 120.0}),
}

_DRIVER = """
import json, sys
from asyncbench.benchmarks.bamboo import sandbox
module, test, outputs, limits = json.loads(sys.argv[1])
out = sandbox.check(module, test, None, "", outputs, sandbox.Limits(**limits), sys.argv[2] or None)
print(json.dumps([out.status, getattr(out, "peak_bytes", None), sandbox.isolation(sys.argv[2] or sys.executable).mode]))
"""


def _tree_rss(root: int) -> int:
    """Resident bytes of every process descended from `root`."""
    parent: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            parent[int(entry)], rss[int(entry)] = int(fields[1]), int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
    total = 0
    for pid, size in rss.items():
        up, hops = parent.get(pid), 0
        while up and up != root and hops < 64:
            up, hops = parent.get(up), hops + 1
        total += size if up == root else 0
    return total


def _with_tree_peak(run: Callable[[], subprocess.CompletedProcess[str]]) -> tuple[subprocess.CompletedProcess[str], int]:
    """`run()`'s result and the largest resident memory of this process's descendants
    while it ran (sampled every 20 ms)."""
    peak = 0
    stop = threading.Event()
    me = os.getpid()

    def sample() -> None:
        nonlocal peak
        while not stop.wait(0.02):
            peak = max(peak, _tree_rss(me))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        return run(), peak
    finally:
        stop.set()
        sampler.join()


def hostile(modes: list[str], code: str) -> None:
    """One run of each HOSTILE case per mode: verdict, peak of the whole tree."""
    print("| case | mode | verdict | peak of the whole tree (sampled RSS) | cgroup peak (kernel memory included) |")
    print("|---|---|---|---|---|")
    for case, (module, test, outputs, limits) in HOSTILE.items():
        for mode in modes:
            env = dict(os.environ, PYTHONPATH=code, ASYNCBENCH_SANDBOX_MODE=mode.replace("-no-cgroup", ""))
            if mode.endswith("-no-cgroup"):
                env["ASYNCBENCH_SANDBOX_CGROUP"] = "0"
            # as root without a cgroup bwrap runs programs as a per-run uid: an interpreter any uid can run
            python = "/usr/bin/python3" if mode == "bwrap-no-cgroup" else ""
            cmd = [sys.executable, "-c", _DRIVER, json.dumps([module, test, outputs, limits]), python]
            if mode == "user-bwrap":
                env["ASYNCBENCH_SANDBOX_MODE"] = "bwrap"
                cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", "/usr/bin/python3",
                       *cmd[1:]]
            done, peak = _with_tree_peak(functools.partial(subprocess.run, cmd, capture_output=True, text=True,
                                                           env=env, cwd="/tmp", timeout=600))
            try:
                status, cg_peak, iso = json.loads(done.stdout.strip().splitlines()[-1])
            except (IndexError, ValueError):
                status, cg_peak, iso = f"driver failed: {done.stderr.strip()[-200:]}", None, "?"
            cg = f"{cg_peak / MB:.0f} MB" if cg_peak else "-"
            print(f"| {case} | {mode} ({iso}) | {status[:90]} | {peak / MB:.0f} MB | {cg} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--modes", default="bwrap,mountns,user-bwrap")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--kinds", default="", help="comma-separated prefixes of the completions to run (default: all)")
    ap.add_argument("--hostile", action="store_true", help="the whole-sample budget cases instead")
    ap.add_argument("--code", default=str(Path(__file__).resolve().parents[1]), help="where --hostile imports from")
    args = ap.parse_args()
    if args.hostile:
        hostile(args.modes.split(","), args.code)
        return
    python = release_python()
    res = load_private_eval(DATA)
    rows = [r for _, r in read_jsonl(DATA / "private_eval_4k.jsonl")[0]]
    kinds = {"canonical solution": None, **STRATEGIES}
    if args.kinds:
        kinds = {k: v for k, v in kinds.items() if k.startswith(tuple(args.kinds.split(",")))}
    limits = Limits(cpu_s=RELEASE_TIMEOUT_S)
    table: dict[str, dict[str, str]] = {k: {} for k in kinds}
    modes = args.modes.split(",")
    for mode in modes:
        for kind, completion in kinds.items():
            progs: list[Program | None] = [
                M.private_eval_program(res.problem(r["task_id"]), r["canonical_solution"][0] if completion is None
                                       else completion, res.keywords) for r in rows]
            runnable = [p for p in progs if p is not None]
            t0 = time.monotonic()
            if mode == "user-bwrap":
                with tempfile.TemporaryDirectory() as d:
                    _, statuses = run_as_user(runnable, Path(d), python, limits, PROBE_IMPORTS)
                passed = sum(s == "passed" for s in statuses)
                errors = sum(s.startswith("error") for s in statuses)
            else:
                with forced(mode):
                    assert isolation(python).mode == mode.replace("-no-cgroup", "")
                    outs = anyio.run(check_many, runnable, limits, args.workers, python, False, PROBE_IMPORTS)
                passed, errors = sum(o.passed for o in outs), sum(o.error for o in outs)
            cell = f"{passed}/{len(rows)}" + (f" ({len(rows) - len(runnable)} format errors)"
                                              if len(runnable) < len(rows) else "")
            table[kind][mode] = cell + (f", {errors} errors" if errors else "")
            print(f"{mode} {kind}: {table[kind][mode]} in {time.monotonic() - t0:.0f} s", file=sys.stderr)
    print(f"| completion | {' | '.join(modes)} |")
    print("|---|" + "---|" * len(modes))
    for kind in kinds:
        print(f"| {kind} | {' | '.join(table[kind].get(m, '-') for m in modes)} |")


if __name__ == "__main__":
    os.umask(0o022)
    main()
