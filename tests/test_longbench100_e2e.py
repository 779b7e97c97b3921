"""End to end: 100-LongBench against the built-in simulator, which also acts as judge."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from asyncbench.config import RunConfig
from asyncbench.run.flow import run
from asyncbench.sim.testing import sim_subprocess

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
pytestmark = pytest.mark.skipif(not (DATA / "minilongbench").is_dir(), reason="../shared/data not available")
LENGTHS = ["2k", "4k", "6k", "8k", "16k"]


def test_run_against_simulator_reports_scores_longscore_exclusions_and_judge_cost(tmp_path: Path) -> None:
    cfg = RunConfig.build("100-longbench", "sim", {"judge": "sim", "data_dir": str(DATA), "cache": str(tmp_path / "cache.duckdb"),
                                                   "out": str(tmp_path / "out"), "progress": False},
                          {"lengths": LENGTHS, "rows": 2})
    with sim_subprocess([]) as sim_url:  # what `asyncbench run --model sim` starts
        summary = anyio.run(run, cfg, sim_url).to_json()
    assert summary["samples"]["failed"] == 0 and summary["complete"]
    scores = summary["scores"]
    # per-task and overall scores per length
    assert set(scores["by_task_length"]["kv_retrieval"]) == set(LENGTHS)
    # the release's base set comes first (synthetic tasks: rows // 3 at each of 2k/4k/6k, none for 2 rows)
    assert list(scores["by_length"]) == ["base", *LENGTHS]
    assert set(scores["by_task_length"]["single_doc_qa"]) == {"base", *LENGTHS}
    assert all(0 <= v <= 100 for v in scores["by_length"].values())
    # LongScore against the release's base set by default, LC at every length
    assert set(scores["longscore"]["lc"]) == set(LENGTHS) and scores["base_ability_from"].startswith("release")
    assert scores["longscore"]["base_ability"] == pytest.approx(scores["by_length"]["base"])
    # prior-knowledge exclusions are reported
    prior = summary["prepare"]["prior_knowledge"]
    assert prior["checked"] == 2 * 2 * (len(LENGTHS) + 1) and prior["excluded"] + prior["unverified"] <= prior["checked"]
    assert summary["samples"]["excluded"] == prior["excluded"]  # left out by the rule: counted, not lost
    # lengths measured in cl100k_base, recorded as a stand-in for the release's Llama-2 tokenizer
    assert summary["prepare"]["lengths"] == {"tokenizer": "cl100k_base", "stand_in_for_llama_2": True}
    # the simulator also answers as a judge (JSON verdicts), so judged tasks are scored
    assert set(scores["by_task_length"]["single_doc_qa"]) == {"base", *LENGTHS}
    assert set(scores["by_task_length"]["multi_doc_sum"]) == {"base", *LENGTHS}
    assert not any(scores["unscored"].values())
    # judge (and prior) tokens and cost are kept apart from the evaluated model's
    tokens, cost = summary["tokens"], summary["cost_usd"]
    assert all(tokens[p]["prompt_tokens"] > 0 and cost[p] > 0 for p in ("eval", "judge", "prior"))
    assert tokens["total"]["prompt_tokens"] == sum(tokens[p]["prompt_tokens"] for p in ("eval", "judge", "prior"))
    # judge and prior calls are booked on the task they were made for
    assert sum(t["cost_usd"]["judge"] for t in summary["by_task"].values()) == pytest.approx(cost["judge"], abs=1e-5)
    assert summary["by_task"]["single_doc_qa"]["cost_usd"]["prior"] > 0
