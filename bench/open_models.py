"""Open models in ../shared/data's layout (issue 42): how many MiniLongBench requests
reach a self-hosted server as LongBench's pred.py sends them, and how many a small
context refuses, for a checkout TREE (run it for main and for a branch).

    .venv/bin/python bench/open_models.py TREE [DATA_DIR]   # default ../shared/data

Each case starts the simulator as a Llama-2-7b-chat server (the shared Llama-2 tokenizer)
behind the tests' recording proxy (tests/capture.py), runs TREE's CLI with ../shared/data
as it is (no model2path.json), and compares every prompt that reached the server with
pred.py's (tests/pred_py.py). Prints a Markdown table (bench/selfhosted_requests.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE / "tests"))
from capture import CaptureProxy  # noqa: E402
from pred_py import LLAMA2_TOKENIZER, SUBSET_2048, pred_py_prompt, sent_prompt  # noqa: E402

REPO_ID = "meta-llama/Llama-2-7b-chat-hf"
# (label, provider, simulator flags, benchmark)
CASES = [
    ("TGI, 4096", "tgi", ["--max-context-tokens", "4096"], "minilongbench"),
    ("vLLM --served-model-name llama, 4096", "openai-compat",
     ["--max-context-tokens", "4096", "--served-model-name", "llama"], "minilongbench"),
    ("TGI, 2048, 89-row subset", "tgi", ["--max-context-tokens", "2048"], SUBSET_2048),
    ("vLLM, 2048, 89-row subset", "openai-compat", ["--max-context-tokens", "2048"], SUBSET_2048),
]


def expected(data: Path, bench: str) -> list[tuple[str, str]]:
    from asyncbench.benchmarks.base import LoadOptions
    from asyncbench.benchmarks.longbench.benchmark import MiniLongBench

    tasks = bench.split(":", 1)[1].split(",") if ":" in bench else None
    return [(s.task, pred_py_prompt(s.prompt or "", s.task))
            for s in MiniLongBench(data_dir=data).load(LoadOptions(data_dir=data, tasks=tasks))]


def case(tree: Path, data: Path, provider: str, flags: list[str], bench: str) -> dict[str, object]:
    from asyncbench.sim.testing import sim_subprocess

    sim = ["--model-id", REPO_ID, "--tokenizer-file", str(LLAMA2_TOKENIZER), *flags]
    with tempfile.TemporaryDirectory() as tmp, sim_subprocess(sim) as url, CaptureProxy(url) as proxy:
        import httpx

        base = proxy.url + ("/v1" if provider == "openai-compat" else "")
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "asyncbench.cli", "run", bench, "--model", f"{provider}:llama",
                               "--base-url", base, "--data-dir", str(data), "--cache", f"{tmp}/c.duckdb",
                               "--out", f"{tmp}/o", "--no-progress"], env=dict(env, PYTHONPATH=str(tree)),
                              capture_output=True, text=True, timeout=1200, cwd=tmp)
        wall = time.perf_counter() - t0
        stats = httpx.get(f"{url}/stats").json()
        sent = [p for path, body in proxy.bodies() if (p := sent_prompt(path, body)) is not None
                and not path.endswith(("/tokenize", "/detokenize"))]
        run = json.loads(Path(f"{tmp}/o/run.json").read_text()) if done.returncode == 0 else {}
    want = expected(data, bench)
    pool, exact = Counter(sent), Counter()
    for task, text in want:
        if pool[text] > 0:
            pool[text] -= 1
            exact[task] += 1
    per_task = Counter(task for task, _ in want)
    said = [line for line in done.stderr.splitlines() if line.startswith("asyncbench:")]
    return {"rc": done.returncode, "rows": f"{sum(exact.values())}/{len(want)}",
            "datasets": f"{sum(exact[t] == n for t, n in per_task.items())}/{len(per_task)}",
            "refused": f"{stats['context_length_errors']}/{len(want)}",
            "official": (run.get("truncation") or {}).get("official", {}).get("applied"),
            "said": len(said), "wall": f"{wall:.0f} s"}


def main() -> None:
    tree = Path(sys.argv[1]).resolve()
    data = Path(sys.argv[2]) if len(sys.argv) > 2 else HERE.parent / "shared" / "data"
    print(f"tree {tree}\n")
    print("| server | rows as pred.py | datasets all as pred.py | refused | official applied | lines said | wall |")
    print("|---|---|---|---|---|---|---|")
    for label, provider, flags, bench in CASES:
        r = case(tree, data, provider, flags, bench)
        print(f"| {label} | {r['rows']} | {r['datasets']} | {r['refused']} | {r['official']} | {r['said']} | "
              f"{r['wall']} |", flush=True)


if __name__ == "__main__":
    main()
