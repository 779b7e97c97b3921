"""PrivateEval's programs checked through a runner's `map_chunks` (the Ray backend's
path, here with an in-process map): the sandbox is chosen and probed where the chunk
runs, and a machine that cannot sandbox fails its samples with the sandbox's one-line
reason, never a score of 0. Verdicts equal to the local path on a real two-node cluster:
tests/test_ray_backend.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from asyncbench.benchmarks.bamboo import metrics as M
from asyncbench.benchmarks.bamboo.benchmark import BambooBenchmark
from asyncbench.benchmarks.bamboo.sandbox import MODE_ENV, isolation
from asyncbench.benchmarks.bamboo.sandbox_spread import CHUNK_PROGRAMS
from asyncbench.benchmarks.base import LoadOptions, RunContext

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
pytestmark = [pytest.mark.skipif(not (DATA / "bamboo").is_dir(), reason="reference data ../shared/data/bamboo not available"),
              pytest.mark.xdist_group("sandbox")]  # see test_sandbox_forgery


def _not_called(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("PrivateEval scoring sends no requests")


def test_a_node_without_a_sandbox_fails_its_samples_with_the_reason(monkeypatch, tmp_path):
    bench = BambooBenchmark(data_dir=DATA)
    samples = [s for s in bench.load(LoadOptions(data_dir=DATA, tasks=["private_eval@4k"]))
               if M.domain_of(s.meta["problem"]["task_id"]) in ("numpy", "pandas")][:CHUNK_PROGRAMS + 2]
    calls: list[int] = []

    def chunks_here(fn: Any, args: list[tuple[Any, ...]]) -> list[Any]:
        calls.extend(len(a[0]) for a in args)
        return [fn(*a) for a in args]

    ctx = RunContext("m", _not_called, _not_called, options={"sandbox_own_python": True}, map_chunks=chunks_here)
    # This "node" has neither bwrap nor unshare on its PATH: no sandbox mode can work.
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv(MODE_ENV, raising=False)
    isolation.cache_clear()
    try:
        _, report = anyio.run(bench.prepare, samples, ctx)  # the driver does not probe: the nodes do
        scores = anyio.run(bench.score, samples, [s.answers[0] for s in samples], ctx)
    finally:
        isolation.cache_clear()
    assert report["sandbox"]["isolation"].startswith("checked on each node")
    assert sorted(calls) == [3, 3]  # six distinct programs dealt into two chunks
    assert [sc.value for sc in scores] == [None] * len(samples)  # failed, never 0
    assert all(sc.failed for sc in scores)
    for sc in scores:
        why = sc.error or ""
        assert why.startswith("PrivateEval sandbox: error: on ") and "no sandbox here" in why and "\n" not in why, why
