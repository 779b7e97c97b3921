"""`--prompt-cache auto|off`: shared prefixes found per run (prompt_cache.py), sent as
the providers take them (Anthropic: a marked text block; OpenAI: prompt_cache_key), the
simulator's prompt cache (TTL, minimum length, usage fields), cache-write tokens in the
ledger (schema v4) and priced; a run against the simulator reads most shared-prefix
tokens from cache and answers exactly as with --prompt-cache off."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from asyncbench.pricing import PriceTable
from asyncbench.prompt_cache import mark_requests, plan_prefixes, prompt_text
from asyncbench.providers.anthropic import AnthropicProvider
from asyncbench.providers.openai import OpenAIProvider
from asyncbench.sim.server import SimConfig, run_sim_in_thread
from asyncbench.sim.testing import sim_subprocess
from asyncbench.store import Store
from asyncbench.tokenizers import approx_count
from asyncbench.types import Request, Usage

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
needs_data = pytest.mark.skipif(not (DATA / "bamboo").is_dir(), reason="../shared/data is not beside the checkout")

PAPER_A = "Paper A.\n" + "alpha beta gamma. " * 400  # ~1,800 tokens
PAPER_B = "Paper B.\n" + "delta epsilon zeta. " * 400
INSTRUCTION = "Read the paper and answer the question.\n\n"


def _prompt(paper: str, question: str) -> str:
    return f"{INSTRUCTION}{paper}\n\nQuestion: {question}\nAnswer:"


def test_groups_are_the_contexts_several_questions_share_cut_at_a_line_boundary() -> None:
    texts = [_prompt(PAPER_A, "What is alpha?"), _prompt(PAPER_B, "What is delta?"),
             _prompt(PAPER_A, "What is beta?"), _prompt(PAPER_B, "What is zeta?"), _prompt(PAPER_A, "Why?"),
             "a short prompt of its own"]
    plan = plan_prefixes(texts, approx_count, 1024)
    groups = sorted((sorted(g.members), texts[g.members[0]][:g.chars]) for g in plan.groups)
    # "Question: What is " is common to two questions of paper A, but the prefix stops
    # where the per-sample part begins: the same for every member of a group
    assert groups == [([0, 2, 4], f"{INSTRUCTION}{PAPER_A}\n\n"), ([1, 3], f"{INSTRUCTION}{PAPER_B}\n\n")]
    assert plan.expected_read_tokens == 2 * approx_count(groups[0][1]) + approx_count(groups[1][1])


def test_short_prefixes_lone_prompts_and_identical_prompts_are_not_marked() -> None:
    assert plan_prefixes([_prompt("short paper", "q1?"), _prompt("short paper", "q2?")], approx_count, 1024).groups == []
    assert plan_prefixes([_prompt(PAPER_A, "q1?"), _prompt(PAPER_B, "q1?")], approx_count, 1024).groups == []
    # the same prompt twice is sent once: nothing to share
    assert plan_prefixes([_prompt(PAPER_A, "q?")] * 3, approx_count, 1024).groups == []
    # a longer minimum (Haiku's 2,048) leaves out a 1,800-token paper
    pair = [_prompt(PAPER_A, "q1?"), _prompt(PAPER_A, "q2?")]
    assert len(plan_prefixes(pair, approx_count, 1024).groups) == 1
    assert plan_prefixes(pair, approx_count, 2048).groups == []


def test_a_long_shared_instruction_gives_way_to_the_papers_when_those_save_more() -> None:
    long_instruction = "Rules.\n" + "Follow these rules carefully. " * 200 + "\n"  # ~1,500 tokens
    texts = [long_instruction + _prompt(p, q) for p in (PAPER_A, PAPER_B) for q in ("q1?", "q2?", "q3?")]
    plan = plan_prefixes(texts, approx_count, 1024)
    assert sorted(sorted(g.members) for g in plan.groups) == [[0, 1, 2], [3, 4, 5]]


def _requests(provider: str, texts: list[str]) -> list[Request]:
    return [Request(provider=provider, model="m", endpoint_id="e", messages=[{"role": "user", "content": t}],
                    max_tokens=8) for t in texts]


def test_markers_do_not_change_the_cache_key_and_the_blocks_are_the_prompt() -> None:
    texts = [_prompt(PAPER_A, "q1?"), _prompt(PAPER_A, "q2?")]
    plain, marked = _requests("anthropic", texts), _requests("anthropic", texts)
    mark_requests(marked, approx_count, 1024)
    assert all(r.cache_prefix > 0 for r in marked)
    assert [r.key() for r in marked] == [r.key() for r in plain]
    assert [r.canonical() for r in marked] == [r.canonical() for r in plain]

    params, _ = AnthropicProvider("claude-sonnet-4-5", None)._params(marked[0])
    (turn,) = params["messages"]
    first, rest = turn["content"]
    assert first["cache_control"] == {"type": "ephemeral"} and "cache_control" not in rest
    assert first["text"] + rest["text"] == texts[0]
    assert AnthropicProvider("claude-sonnet-4-5", None)._params(plain[0])[0]["messages"] == plain[0].messages

    openai_reqs = _requests("openai", texts)
    mark_requests(openai_reqs, approx_count, 1024)
    provider = OpenAIProvider("gpt-4.1", None)
    keys = {provider._body(r)[0]["prompt_cache_key"] for r in openai_reqs}
    assert len(keys) == 1 and "prompt_cache_key" not in provider._body(_requests("openai", texts)[0])[0]
    assert [r.key() for r in openai_reqs] == [r.key() for r in _requests("openai", texts)]
    assert prompt_text(openai_reqs[0]) == texts[0]


def test_cache_reads_and_writes_are_priced_by_provider() -> None:
    table = PriceTable()
    sonnet = table.price("claude-sonnet-4-5", by_prefix=True, billed=True, provider="anthropic")
    usage = Usage(prompt_tokens=3000, completion_tokens=0, cached_prompt_tokens=1000, cache_write_tokens=1000)
    assert sonnet.cost(usage) == pytest.approx((1000 * 3.0 + 1000 * 0.3 + 1000 * 3.75) / 1e6)
    gpt = table.price("gpt-4.1", by_prefix=True, billed=True, provider="openai")
    assert gpt.cost(Usage(2000, 0, 1024)) == pytest.approx((976 * 2.0 + 1024 * 0.5) / 1e6)


# -- the simulator's prompt cache ----------------------------------------------------
HTTP = httpx.Client(timeout=10)
ANTHROPIC_HEADERS = {"x-api-key": "k", "anthropic-version": "2023-06-01"}


def teardown_module() -> None:
    HTTP.close()


def _anthropic(url: str, text: str, cut: int | None, model: str = "claude-sonnet-4-5") -> dict[str, Any]:
    content: Any = text if cut is None else [
        {"type": "text", "text": text[:cut], "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": text[cut:]}]
    r = HTTP.post(url + "/v1/messages", headers=ANTHROPIC_HEADERS,
                  json={"model": model, "max_tokens": 8, "messages": [{"role": "user", "content": content}]})
    r.raise_for_status()
    return dict(r.json())


def _openai(url: str, text: str, key: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "gpt-4.1", "max_tokens": 8, "messages": [{"role": "user", "content": text}]}
    if key:
        body["prompt_cache_key"] = key
    r = HTTP.post(url + "/v1/chat/completions", json=body)
    r.raise_for_status()
    return dict(r.json())


def test_simulator_anthropic_caches_marked_blocks_with_minimum_and_ttl() -> None:
    with run_sim_in_thread(SimConfig(prompt_cache_ttl_s=0.5)) as sim:
        url = sim.base_url
        prefix = f"{INSTRUCTION}{PAPER_A}\n\n"
        q1, q2 = prefix + "Question: one?", prefix + "Question: two?"
        n = -(-len(prefix) // 4)
        first = _anthropic(url, q1, len(prefix))["usage"]
        assert (first["cache_creation_input_tokens"], first["cache_read_input_tokens"]) == (n, 0)
        second = _anthropic(url, q2, len(prefix))["usage"]
        assert (second["cache_creation_input_tokens"], second["cache_read_input_tokens"]) == (0, n)
        assert second["input_tokens"] + n == -(-len(q2) // 4)  # the prompt's tokens, split
        # the answer reads the prompt the two blocks make: the same as unmarked
        plain = _anthropic(url, q2, None)
        assert plain["usage"]["cache_read_input_tokens"] == 0 and plain["usage"]["cache_creation_input_tokens"] == 0
        assert plain["content"] == _anthropic(url, q2, len(prefix))["content"]
        # below Haiku's 2,048-token minimum: nothing cached
        haiku = _anthropic(url, q1, len(prefix), model="claude-haiku-4-5")["usage"]
        assert (haiku["cache_creation_input_tokens"], haiku["cache_read_input_tokens"]) == (0, 0)
        time.sleep(0.7)  # past the TTL: written again
        assert _anthropic(url, q1, len(prefix))["usage"]["cache_creation_input_tokens"] == n
        stats = HTTP.get(url + "/stats").json()
        assert stats["cache_write_tokens"] == 2 * n and stats["cached_tokens"] == 2 * n


def test_simulator_openai_caches_keyed_prefixes_in_128_token_steps() -> None:
    with run_sim_in_thread(SimConfig()) as sim:
        url = sim.base_url
        q1, q2, q3, q4 = (_prompt(PAPER_A, q) for q in ("one?", "two?", "three?", "four?"))
        # without prompt_cache_key the simulator's old rule holds: only an exact repeat
        assert _openai(url, q1, None)["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
        assert _openai(url, q2, None)["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
        assert _openai(url, q1, None)["usage"]["prompt_tokens_details"]["cached_tokens"] == (len(q1) + 3) // 4 // 128 * 128
        assert _openai(url, q3, "k")["usage"]["prompt_tokens_details"]["cached_tokens"] == 0  # written now
        cached = _openai(url, q4, "k")["usage"]["prompt_tokens_details"]["cached_tokens"]
        common = len(f"{INSTRUCTION}{PAPER_A}\n\nQuestion: ")
        assert cached == (common // 512) * 128 and cached >= 1024
        assert _openai(url, "short " * 100, "k")["usage"]["prompt_tokens_details"]["cached_tokens"] == 0


# -- end to end ----------------------------------------------------------------------
def _run(tmp: Path, url: str, model: str, mode: str) -> tuple[dict[str, Any], list[tuple[Any, ...]]]:
    base = url + "/v1" if model.startswith("openai") else url
    out = tmp / f"{model.split(':')[0]}-{mode}"
    cmd = [sys.executable, "-m", "asyncbench.cli", "run", "bamboo:paperqa,meetingqa", "--length", "4k",
           "--model", model, "--base-url", base, "--data-dir", str(DATA),
           "--cache", f"{out}.duckdb", "--out", str(out), "--json", "--no-progress", "--prompt-cache", mode]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    with Store(f"{out}.duckdb") as store:
        rows = [(r["key"], r["text"], r["prompt_tokens"], r["cached_prompt_tokens"], r["cache_write_tokens"])
                for r in store.cache.rows()]
    HTTP.post(url + "/stats/reset").raise_for_status()  # the next run starts with an empty prompt cache
    return json.loads((out / "run.json").read_text()), rows


@pytest.mark.slow
@needs_data
@pytest.mark.parametrize("model", ["anthropic:claude-sonnet-4-5", "openai:gpt-4.1"])
def test_a_run_reads_most_shared_context_from_cache_with_the_same_answers(tmp_path: Path, model: str) -> None:
    # answers take 100 ms: a group's requests sent together would all miss the cache
    with sim_subprocess(["--latency-ms", "100"]) as url:
        auto, auto_rows = _run(tmp_path, url, model, "auto")
        off, off_rows = _run(tmp_path, url, model, "off")
    assert auto["scores"] == off["scores"]
    # the same cache keys and answers; only the usage differs
    assert [(k, t, p) for k, t, p, _, _ in auto_rows] == [(k, t, p) for k, t, p, _, _ in off_rows]
    tokens = auto["tokens"]["total"]
    assert off["tokens"]["total"]["cached_prompt_tokens"] == 0
    assert tokens["cached_prompt_tokens"] >= 0.6 * tokens["prompt_tokens"]
    assert (tokens["cache_write_tokens"] > 0) == model.startswith("anthropic")
    assert auto["cost_usd"]["total"] < 0.6 * off["cost_usd"]["total"]
    last = auto["invocations"][-1]  # what the provider's cache did, said per invocation too
    assert (last["prompt_cache_read_tokens"], last["prompt_cache_write_tokens"]) == (
        tokens["cached_prompt_tokens"], tokens["cache_write_tokens"])
    if model.startswith("anthropic"):
        # a group's first request goes alone and writes the prefix; the others follow it
        # and read: at most one write per paper (25) and meeting (32)
        assert 0 < sum(1 for row in auto_rows if row[4] > 0) <= 57


def test_a_v3_cache_gains_the_cache_write_columns(tmp_path: Path) -> None:
    import duckdb

    from asyncbench.store.schema import SCHEMA_VERSION

    path = tmp_path / "v3.duckdb"
    Store(path).close()
    con = duckdb.connect(str(path))  # back to v3: the tables without the new columns
    for table in ("responses", "ledger_requests"):
        for column in ("sent_at", "ttft_ms", *(("itl_ms",) if table == "responses" else ())):  # v6's
            con.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
        con.execute(f"ALTER TABLE {table} DROP COLUMN usage_flag")  # v5's, after v4's
        con.execute(f"ALTER TABLE {table} DROP COLUMN cache_write_tokens")
    con.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    con.execute("INSERT INTO responses VALUES ('k', 'p', 'm', 'e', '{}', 'answer', 'stop', 10, 2, 4, 1.0, 0.5, "
                "'u', 1.0)")
    con.close()
    with Store(path) as store:
        hit = store.cache.lookup(["k"])["k"]
        assert (hit.text, hit.cached_prompt_tokens, hit.cache_write_tokens) == ("answer", 4, 0)
    con = duckdb.connect(str(path), read_only=True)
    assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
    con.close()
    assert SCHEMA_VERSION == 7


@needs_data
def test_the_dry_run_prices_list_batch_prompt_cache_and_both(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "asyncbench.cli", "run", "bamboo:paperqa,meetingqa", "--length", "4k",
           "--model", "anthropic:claude-sonnet-4-5", "--base-url", "http://127.0.0.1:9", "--data-dir", str(DATA),
           "--cache", str(tmp_path / "c.duckdb"), "--dry-run", "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    modes = summary["by_purpose"]["eval"]["cost_usd_by_mode"]
    assert modes["list"] == summary["estimated_cost_usd"]
    assert modes["batch"] == pytest.approx(modes["list"] / 2, abs=1e-6)
    assert modes["batch_prompt_cache"] == pytest.approx(modes["prompt_cache"] / 2, abs=1e-6)
    assert modes["expected_cache_read_tokens"] >= 0.6 * summary["estimated_prompt_tokens"]
    assert modes["expected_cache_write_tokens"] > 0 and modes["shared_prefix_groups"] >= 25
    assert modes["batch_prompt_cache"] <= 0.4 * modes["list"]


@pytest.mark.slow
@needs_data
def test_only_requests_still_to_send_are_grouped(tmp_path: Path) -> None:
    """A re-run that needs one question per paper sends it unmarked: alone in its group,
    it would pay the cache write (1.25x) for nothing."""
    import duckdb

    model = "anthropic:claude-sonnet-4-5"
    with sim_subprocess() as url:
        cmd = [sys.executable, "-m", "asyncbench.cli", "run", "bamboo:paperqa", "--length", "4k", "--model", model,
               "--base-url", url, "--data-dir", str(DATA), "--cache", str(tmp_path / "c.duckdb"), "--json",
               "--no-progress"]
        env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
        first = subprocess.run([*cmd, "--out", str(tmp_path / "a")], capture_output=True, text=True, env=env)
        assert first.returncode == 0, first.stderr[-2000:]
        with Store(tmp_path / "c.duckdb") as store:
            rows = sorted(store.runs.prompts().items())
        one_per_paper: dict[str, str] = {}
        for key, prompt in rows:
            assert prompt is not None
            one_per_paper.setdefault(json.loads(prompt)[0]["content"][:3000], key)
        con = duckdb.connect(str(tmp_path / "c.duckdb"))  # the answers forgotten: damage, by hand
        con.execute("DELETE FROM responses WHERE key IN (SELECT unnest($1))", [list(one_per_paper.values())])
        con.close()
        HTTP.post(url + "/stats/reset").raise_for_status()
        second = subprocess.run([*cmd, "--out", str(tmp_path / "b")], capture_output=True, text=True, env=env)
        assert second.returncode == 0, second.stderr[-2000:]
        stats = HTTP.get(url + "/stats").json()
    assert stats["ok"] == len(one_per_paper) >= 20
    assert stats["cache_write_tokens"] == 0 and stats["cached_tokens"] == 0
