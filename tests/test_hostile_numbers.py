"""Hostile peers, round three (issue 35 items 2 and 4): a server's numbers are claims,
checked before they are booked; a 200 that is not an answer is not cached; nothing a
server or a model wrote reaches the terminal raw; a key echoed in any form reaches no
file or output. Real CLI runs against the hostile server (asyncbench/sim/hostile.py) on
127.0.0.1, in each wire format."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from asyncbench.claims import COMPLETION_SLACK, checked, completion_bound, prompt_bound
from asyncbench.errors import ProviderError
from asyncbench.sim.hostile import ESCAPES, echoes_of
from asyncbench.store import Store
from asyncbench.types import Request, Response, Usage

REPO = Path(__file__).resolve().parents[1]
KEY = "selfhosted-secret-987654321"
N = 6
# model, the path after the behaviour
WIRES = {"openai-compat": ("openai-compat:m", "/v1"), "anthropic": ("anthropic:claude-haiku-4-5", ""),
         "tgi": ("tgi:m", "")}


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    port_file = tmp_path_factory.mktemp("hostile") / "port"
    proc = subprocess.Popen([sys.executable, "-m", "asyncbench.sim.hostile", "--port-file", str(port_file)],
                            env=dict(os.environ, PYTHONPATH=str(REPO)), stdout=subprocess.DEVNULL)
    try:
        for _ in range(600):
            if port_file.exists():
                break
            time.sleep(0.05)
        yield int(port_file.read_text())
    finally:
        proc.kill()
        proc.wait()


def data(tmp: Path) -> Path:
    path = tmp / "d.jsonl"
    path.write_text("".join(json.dumps({"id": f"s{i}", "prompt": f"question {i}" + (" fail" if i % 2 else ""),
                                        "answers": ["a"]}) + "\n" for i in range(N)))
    return path


def cli(argv: list[str], tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    env.update(PYTHONPATH=str(REPO), ASYNCBENCH_API_KEY=KEY, ANTHROPIC_API_KEY=KEY)
    return subprocess.run([sys.executable, "-m", "asyncbench.cli", *argv, "--cache", str(tmp / "c.duckdb")],
                          env=env, capture_output=True, text=True, timeout=300, cwd=tmp)


def run(port: int, behaviour: str, wire: str, tmp: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    model, suffix = WIRES[wire]
    return cli(["run", f"jsonl:{data(tmp)}", "--model", model, "--base-url",
                f"http://127.0.0.1:{port}/{behaviour}{suffix}", "--out", str(tmp / "out"), "--no-progress",
                "--max-attempts", "2", "--timeout", "20", *extra], tmp)


def run_json(tmp: Path) -> dict:  # type: ignore[type-arg]
    return dict(json.loads((tmp / "out" / "run.json").read_text()))


# -- row 1 and 2: usage claims --------------------------------------------------------------
@pytest.mark.parametrize("wire", list(WIRES))
@pytest.mark.parametrize("behaviour", ["usage-1e300", "usage-huge", "usage-other-model"])
def test_usage_out_of_bounds_is_booked_at_the_bound_and_flagged_everywhere(behaviour: str, wire: str, port: int,
                                                                           tmp_path: Path) -> None:
    if wire == "anthropic":
        pytest.importorskip("anthropic")
    first = run(port, behaviour, wire, tmp_path, "--max-cost", "5")
    assert first.returncode == 0, first.stderr
    summary = run_json(tmp_path)
    assert summary["usage_flags"]["answers"] == N
    assert all("usage out of bounds" in f["flag"] for f in summary["usage_flags"]["listed"])
    tokens = summary["tokens"]["total"]
    # completion booked at max_tokens (128 for jsonl) + slack, prompt at its byte bound: never the claim
    assert tokens["completion_tokens"] <= N * (128 + COMPLETION_SLACK)
    assert tokens["prompt_tokens"] < N * 1000
    assert "usage out of bounds: 6 answers booked at our bound" in first.stdout.replace("\n", " ")
    # a re-run of the same run works, from the cache, and still shows the flag
    again = run(port, behaviour, wire, tmp_path, "--max-cost", "5")
    assert again.returncode == 0, again.stderr
    assert run_json(tmp_path)["usage_flags"]["answers"] == N
    report = cli(["report", summary["run_id"], "--format", "json"], tmp_path)
    assert report.returncode == 0, report.stderr
    block = json.loads(report.stdout)["runs"][0]
    assert block["usage_flags"]["answers"] == N and block["tokens"] == summary["tokens"]
    md = cli(["report", summary["run_id"], "--format", "md"], tmp_path)
    assert "usage out of bounds: 6 answers" in md.stdout
    samples = cli(["samples", summary["run_id"], "--format", "jsonl"], tmp_path)
    rows = [json.loads(line) for line in samples.stdout.splitlines()]
    assert len(rows) == N and all(r["usage_flag"] and "booked at the bound" in r["usage_flag"] for r in rows)
    assert sum(r["completion_tokens"] for r in rows) == tokens["completion_tokens"]  # adds up with run.json
    table = cli(["samples", summary["run_id"]], tmp_path)
    assert table.stdout.count("usage out of bounds") == N


def test_a_cache_with_null_token_counts_from_an_earlier_version_reruns(port: int, tmp_path: Path) -> None:
    """The row the 1e300 bug left (counts NULL): read as 0 and flagged, never a TypeError."""
    assert run(port, "usage-other-model", "openai-compat", tmp_path).returncode == 0
    con = duckdb.connect(str(tmp_path / "c.duckdb"))
    con.execute("UPDATE responses SET completion_tokens = NULL, usage_flag = NULL")
    con.execute("UPDATE ledger_requests SET completion_tokens = NULL, usage_flag = NULL")
    con.execute("DELETE FROM reusable")
    con.close()
    again = run(port, "usage-other-model", "openai-compat", tmp_path)
    assert again.returncode == 0, again.stderr
    flags = run_json(tmp_path)["usage_flags"]
    assert flags["answers"] == N and "no token counts" in flags["listed"][0]["flag"]
    report = cli(["report", run_json(tmp_path)["run_id"], "--format", "json"], tmp_path)
    assert report.returncode == 0, report.stderr


@pytest.mark.parametrize("claim", [1e300, 10 ** 15, 900_000, "12", True, -3, math.nan, math.inf, 1.5, [1]])
def test_a_claim_that_is_not_a_count_within_bounds_is_booked_at_the_bound(claim: object) -> None:
    request = Request("openai", "m", "", messages=[{"role": "user", "content": "question 0"}], max_tokens=8)
    got = checked(Response("a", Usage(prompt_tokens=claim, completion_tokens=claim), 1.0),  # type: ignore[arg-type]
                  request)
    assert got.usage.prompt_tokens == prompt_bound(request) and got.usage.completion_tokens == completion_bound(request)
    assert got.usage_flag is not None and got.usage_flag.startswith("usage out of bounds")
    fine = checked(Response("a", Usage(5, 3, 2), 1.0), request)
    assert (fine.usage.prompt_tokens, fine.usage.completion_tokens, fine.usage_flag) == (5, 3, None)
    assert checked(Response("a", Usage(5.0, 3), 1.0), request).usage_flag is None  # type: ignore[arg-type]


def test_the_prompt_bound_holds_for_cjk_text_and_the_budget_counts_the_bound() -> None:
    """A CJK prompt of 1,000 characters is ~1,000-2,000 tokens: within its byte bound
    (3,000 + slack), so no honest server is flagged; the budget settles the bounded cost."""
    request = Request("openai", "m", "", prompt="文" * 1000, max_tokens=8)
    assert checked(Response("a", Usage(2000, 8), 1.0), request).usage_flag is None
    from asyncbench.pricing import Price

    price = Price(input=1.0, output=1.0, cached_input=1.0)
    booked = checked(Response("a", Usage(10 ** 15, 10 ** 15), 1.0), request)
    assert price.cost(booked.usage) < 0.01


# -- row 4: a 200 that is not an answer ------------------------------------------------------
@pytest.mark.parametrize("wire", list(WIRES))
@pytest.mark.parametrize("behaviour", ["error-and-choices", "content-null"])
def test_a_200_with_an_error_or_no_content_is_a_failed_attempt_never_cached(behaviour: str, wire: str, port: int,
                                                                             tmp_path: Path) -> None:
    if wire == "anthropic":
        pytest.importorskip("anthropic")
    done = run(port, behaviour, wire, tmp_path)
    assert done.returncode == 3, done.stderr
    summary = run_json(tmp_path)
    assert summary["samples"]["failed"] == N
    assert summary["this_invocation"]["retries"] >= N  # retried like other bad answers
    assert (tmp_path / "c.duckdb").is_file()
    with Store(tmp_path / "c.duckdb") as store:
        assert store.cache.stats()["responses"] == 0
    assert all(("error" in f["error"]) or ("no text" in f["error"]) for f in summary["failures"])


def test_the_parsers_refuse_an_error_beside_the_answer_and_null_content() -> None:
    from asyncbench.providers.anthropic import parse_message
    from asyncbench.providers.openai_wire import parse_body
    from asyncbench.providers.tgi import parse_generate

    chat = {"choices": [{"message": {"content": "a"}}], "usage": {}}
    with pytest.raises(ProviderError, match="200 with an error"):
        parse_body({**chat, "error": {"message": "boom"}})
    with pytest.raises(ProviderError, match="no text"):
        parse_body({"choices": [{"message": {"content": None}}]})
    with pytest.raises(ProviderError, match="no text"):
        parse_message({"content": None}, [])
    with pytest.raises(ProviderError, match="200 with an error"):
        parse_message({"content": [{"type": "text", "text": "a"}], "error": {"message": "x"}}, [])
    with pytest.raises(ProviderError, match="no text"):
        parse_generate({"generated_text": None}, {}, "p")
    with pytest.raises(ProviderError, match="200 with an error"):
        parse_generate({"generated_text": "a", "error": "overloaded"}, {}, "p")


# -- row 3: escape sequences ----------------------------------------------------------------
@pytest.mark.parametrize("wire", ["openai-compat", "tgi"])
def test_escape_sequences_reach_the_terminal_escaped_and_files_exact(wire: str, port: int, tmp_path: Path) -> None:
    done = run(port, "escape-sequences", wire, tmp_path)
    assert done.returncode == 3  # the "fail" prompts got a 400 with the escapes in its message
    for text in (done.stdout, done.stderr):
        assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text and "\x9b" not in text
    said = " ".join(done.stdout.split())  # as one line (rich wraps at the console's width)
    assert "\\x1b]52;c;" in said  # shown, escaped, in the failure line
    assert "[bold red]markup" in said  # rich markup shown as text, not applied
    run_id = run_json(tmp_path)["run_id"]
    table = cli(["samples", run_id], tmp_path)
    assert "\x1b" not in table.stdout and "\\x1b[2J" in table.stdout
    exported = cli(["samples", run_id, "--format", "jsonl", "--out", str(tmp_path / "s.jsonl")], tmp_path)
    assert exported.returncode == 0
    answers = [json.loads(line)["prediction"] for line in (tmp_path / "s.jsonl").read_text().splitlines()]
    assert ESCAPES in answers  # data files keep the exact text
    report = cli(["report", run_id], tmp_path)
    assert "\x1b]" not in report.stdout


def test_shown_escapes_controls_c1_del_and_bidi() -> None:
    from asyncbench.terminal import shown, shown_markup

    assert shown("a\x1b[2Jb\x07\x9b\x7f\u202e\u2066\r") == "a\\x1b[2Jb\\x07\\x9b\\x7f\\u202e\\u2066\\x0d"
    assert shown("line\nnext\ttab", newlines=True) == "line\nnext\ttab"
    assert shown("line\nnext") == "line\\x0anext"
    assert shown_markup("[bold]x[/bold]") == "\\[bold]x\\[/bold]"


# -- row 5: the key echoed in other forms ------------------------------------------------------
def test_a_key_echoed_hex_escaped_spaced_or_reversed_reaches_no_file_and_no_output(port: int, tmp_path: Path) -> None:
    done = run(port, "echo-key", "openai-compat", tmp_path, "--json")
    assert done.returncode == 0, done.stderr
    with Store(tmp_path / "c.duckdb") as store:
        stored = json.dumps([r["text"] for r in store.cache.rows()])
    assert stored.count("[REDACTED]") >= N * 5  # the echoes arrived, and were masked
    files = [p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file() and p.suffix != ".duckdb"]
    for text in [done.stdout, done.stderr, stored, (tmp_path / "c.duckdb").read_bytes().decode("latin-1"), *files]:
        for variant in echoes_of(KEY):
            assert variant not in text, variant


@pytest.mark.parametrize("variant", echoes_of(KEY) + ["S_E_L_F.H.O.S.T.E.D SECRET-9-8-7-6-5-4-3-2-1"])
def test_the_redactor_masks_each_form_of_a_key(variant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from asyncbench.secrets import MASK, redact

    monkeypatch.setenv("ASYNCBENCH_API_KEY", KEY)
    assert redact(f"echo: <{variant}> end") == f"echo: <{MASK}> end"
    assert redact("self hosted secrets are 98 and 76") == "self hosted secrets are 98 and 76"
