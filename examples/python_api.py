"""The Python API, notebook style: evaluate, look at the samples, reload the run.

    .venv/bin/python examples/python_api.py [DATA_DIR]

Uses the built-in simulator (no key, no network) and the reference data in
../shared/data (or DATA_DIR); the cache goes to out/python-api-example/.
"""

from __future__ import annotations

import sys
from pathlib import Path

import asyncbench

data = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "shared" / "data"
out = Path("out/python-api-example")

# In a notebook: `result = await asyncbench.evaluate_async(...)`, or the same call as here.
result = asyncbench.evaluate("bamboo", "sim", length="4k", data_dir=data,
                             cache=out / "cache.duckdb", out=out / "run")
print(f"run {result.run_id}: complete={result.complete} overall={result.scores['overall']:.2f} "
      f"cost=${result.cost['total']:.4f}")

# the worst-scored samples of one task, with what the metric read from each answer
meeting = sorted((s for s in result.samples if s.task == "meetingqa_4k"), key=lambda s: s.score or 0)
for s in meeting[:3]:
    print(f"{s.sample_id}: score {s.score} parsed {s.parsed!r} reference {s.references[0]!r} "
          f"({s.prompt_tokens} prompt tokens, {s.latency_ms:.0f} ms)")

# the same run from the store, e.g. in another session
again = asyncbench.load_run(result.run_id[:6], cache=out / "cache.duckdb")
assert again.scores == result.scores

try:
    frame = result.to_pandas()
    print(frame.groupby("task")["score"].mean().round(3).to_string())
except asyncbench.errors.UserError as exc:  # pandas not installed
    print(exc)
