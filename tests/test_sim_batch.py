"""The simulator's batch APIs, driven by the official SDKs: OpenAI Batch (files, batches,
validation errors, expiry) and Anthropic Message Batches (custom ids, limits, results)."""

from __future__ import annotations

import json
import time
from typing import Any

import anthropic
import openai
import pytest

from asyncbench.sim.server import SimConfig, run_sim_in_thread


def _line(cid: str, text: str, url: str = "/v1/chat/completions", model: str = "m") -> dict[str, Any]:
    return {"custom_id": cid, "method": "POST", "url": url,
            "body": {"model": model, "messages": [{"role": "user", "content": text}], "max_tokens": 16}}


def _jsonl(lines: list[Any]) -> bytes:
    return "".join((ln if isinstance(ln, str) else json.dumps(ln)) + "\n" for ln in lines).encode()


def _wait_openai(client: openai.OpenAI, batch_id: str, seen: list[str] | None = None) -> Any:
    for _ in range(200):
        b = client.batches.retrieve(batch_id)
        if seen is not None and (not seen or seen[-1] != b.status):
            seen.append(b.status)
        if b.status in ("completed", "failed", "expired", "cancelled"):
            return b
        time.sleep(0.02)
    raise AssertionError("batch did not end")


def test_openai_batch_round_trip_matches_the_live_answers() -> None:
    with run_sim_in_thread(SimConfig(batch_turnaround_s=0.2)) as sim:
        client = openai.OpenAI(api_key="k", base_url=sim.base_url + "/v1", max_retries=0)
        prompts = {f"r{i}": f"Question: what colour is item {i}? Context: item {i} is red." for i in range(3)}
        f = client.files.create(file=("in.jsonl", _jsonl([_line(c, t) for c, t in prompts.items()])),
                                purpose="batch")
        b = client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h")
        seen: list[str] = []
        b = _wait_openai(client, b.id, seen)
        assert b.status == "completed" and seen[-1] == "completed" and "in_progress" in seen
        assert b.request_counts is not None and b.request_counts.completed == 3 and b.error_file_id is None
        out = [json.loads(x) for x in client.files.content(b.output_file_id).content.splitlines()]
        assert sorted(o["custom_id"] for o in out) == sorted(prompts)
        for o in out:
            live = client.chat.completions.create(model="m", max_tokens=16,
                                                  messages=[{"role": "user", "content": prompts[o["custom_id"]]}])
            assert o["response"]["status_code"] == 200
            assert o["response"]["body"]["choices"][0]["message"]["content"] == live.choices[0].message.content
        stats = sim.stats()
        assert stats["batches_submitted"] == 1 and stats["batch_requests"] == 3


@pytest.mark.parametrize("lines, code, line_no", [
    (["{not json", _line("a", "x")], "invalid_json_line", 1),
    ([_line("a", "x"), _line("a", "y")], "duplicate_custom_id", 2),
    ([_line("a", "x"), _line("b", "y", url="/v1/completions")], "mismatched_endpoint", 2),
    ([_line("a", "x"), _line("b", "y", model="other")], "mismatched_model", 2),
])
def test_openai_batch_validation_fails_the_batch_with_the_line_and_code(lines: list[Any], code: str,
                                                                       line_no: int) -> None:
    with run_sim_in_thread(SimConfig(batch_turnaround_s=0.05)) as sim:
        client = openai.OpenAI(api_key="k", base_url=sim.base_url + "/v1", max_retries=0)
        f = client.files.create(file=("in.jsonl", _jsonl(lines)), purpose="batch")
        b = _wait_openai(client, client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions",
                                                       completion_window="24h").id)
        assert b.status == "failed"
        assert b.errors is not None and b.errors.data is not None
        assert (b.errors.data[0].code, b.errors.data[0].line) == (code, line_no)


def test_openai_batch_limits_and_bad_arguments() -> None:
    with run_sim_in_thread(SimConfig(batch_turnaround_s=0.05, openai_batch_max_requests=2)) as sim:
        client = openai.OpenAI(api_key="k", base_url=sim.base_url + "/v1", max_retries=0)
        f = client.files.create(file=("in.jsonl", _jsonl([_line(f"r{i}", "x") for i in range(3)])), purpose="batch")
        with pytest.raises(openai.BadRequestError, match="completion_window"):
            client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions",
                                  completion_window="1h")  # type: ignore[arg-type]
        with pytest.raises(openai.NotFoundError):
            client.batches.create(input_file_id="file-nope", endpoint="/v1/chat/completions", completion_window="24h")
        b = _wait_openai(client, client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions",
                                                       completion_window="24h").id)
        assert b.status == "failed" and b.errors is not None and b.errors.data is not None
        assert b.errors.data[0].code == "too_many_requests"


def test_an_expired_openai_batch_returns_half_and_lists_the_rest_as_batch_expired() -> None:
    with run_sim_in_thread(SimConfig(batch_turnaround_s=0.05, batch_expire=1)) as sim:
        client = openai.OpenAI(api_key="k", base_url=sim.base_url + "/v1", max_retries=0)
        f = client.files.create(file=("in.jsonl", _jsonl([_line(f"r{i}", f"t{i}") for i in range(4)])),
                                purpose="batch")
        b = _wait_openai(client, client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions",
                                                       completion_window="24h").id)
        assert b.status == "expired"
        out = client.files.content(b.output_file_id).content.splitlines()
        err = [json.loads(x) for x in client.files.content(b.error_file_id).content.splitlines()]
        assert len(out) == 2 and [e["error"]["code"] for e in err] == ["batch_expired"] * 2


def _params(text: str) -> dict[str, Any]:
    return {"model": "claude-x", "max_tokens": 16, "messages": [{"role": "user", "content": text}]}


def test_anthropic_message_batch_round_trip_with_the_sdk() -> None:
    with run_sim_in_thread(SimConfig(batch_turnaround_s=0.1)) as sim:
        client = anthropic.Anthropic(api_key="k", base_url=sim.base_url, max_retries=0)
        reqs = [{"custom_id": f"r{i}", "params": _params(f"Question: item {i}? Context: item {i} is blue.")}
                for i in range(3)]
        b = client.messages.batches.create(requests=reqs)  # type: ignore[arg-type]
        assert b.processing_status == "in_progress" and b.request_counts.processing == 3
        for _ in range(200):
            b = client.messages.batches.retrieve(b.id)
            if b.processing_status == "ended":
                break
            time.sleep(0.02)
        assert b.request_counts.succeeded == 3 and b.results_url
        results = list(client.messages.batches.results(b.id))
        assert sorted(r.custom_id for r in results) == ["r0", "r1", "r2"]
        live = client.messages.create(**_params(reqs[0]["params"]["messages"][0]["content"]))  # type: ignore[index]
        first = next(r for r in results if r.custom_id == "r0")
        assert first.result.type == "succeeded"
        assert first.result.message.content[0].text == live.content[0].text  # type: ignore[union-attr]


def test_anthropic_batch_validation_is_synchronous_and_in_the_real_shape() -> None:
    with run_sim_in_thread(SimConfig(anthropic_batch_max_requests=2, anthropic_batch_max_bytes=2000)) as sim:
        client = anthropic.Anthropic(api_key="k", base_url=sim.base_url, max_retries=0)
        with pytest.raises(anthropic.BadRequestError, match="Duplicate custom_id"):
            client.messages.batches.create(requests=[{"custom_id": "a", "params": _params("x")},  # type: ignore[list-item]
                                                     {"custom_id": "a", "params": _params("y")}])
        with pytest.raises(anthropic.BadRequestError, match="custom_id"):
            client.messages.batches.create(requests=[{"custom_id": "a b!", "params": _params("x")}])  # type: ignore[list-item]
        with pytest.raises(anthropic.BadRequestError, match="at most 2"):
            client.messages.batches.create(requests=[{"custom_id": f"r{i}", "params": _params("x")}  # type: ignore[misc]
                                                     for i in range(3)])
        with pytest.raises(anthropic.APIStatusError) as info:
            client.messages.batches.create(requests=[{"custom_id": "a", "params": _params("x" * 3000)}])  # type: ignore[list-item]
        assert info.value.status_code == 413
        assert sim.stats()["batches_submitted"] == 0


def test_an_expired_anthropic_batch_marks_unprocessed_requests_expired() -> None:
    with run_sim_in_thread(SimConfig(batch_turnaround_s=0.05, batch_expire=1)) as sim:
        client = anthropic.Anthropic(api_key="k", base_url=sim.base_url, max_retries=0)
        b = client.messages.batches.create(requests=[{"custom_id": f"r{i}", "params": _params(f"t{i}")}  # type: ignore[misc]
                                                     for i in range(4)])
        for _ in range(200):
            b = client.messages.batches.retrieve(b.id)
            if b.processing_status == "ended":
                break
            time.sleep(0.02)
        kinds = sorted(r.result.type for r in client.messages.batches.results(b.id))
        assert kinds == ["expired", "expired", "succeeded", "succeeded"]
        assert b.request_counts.expired == 2


def test_batches_are_listed_newest_first_in_pages_with_their_metadata() -> None:
    """As the real APIs list them: OpenAI GET /v1/batches (limit 1-100, `after`), each
    batch with its metadata (checked: at most 16 string pairs); Anthropic GET
    /v1/messages/batches (limit 1-1000, `after_id`/`before_id`). The SDKs' auto-paging
    walks every page."""
    with run_sim_in_thread(SimConfig(batch_turnaround_s=0.05)) as sim:
        client = openai.OpenAI(api_key="k", base_url=sim.base_url + "/v1", max_retries=0)
        f = client.files.create(file=("in.jsonl", _jsonl([_line("a", "x")])), purpose="batch")
        made = [client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h",
                                      metadata={"asyncbench_intent": f"intent-{i}"}).id for i in range(5)]
        page = client.batches.list(limit=2)
        assert [b.id for b in page.data] == made[::-1][:2] and page.has_more
        assert [b.id for b in client.batches.list(limit=2, after=made[3]).data] == [made[2], made[1]]
        walked = list(client.batches.list(limit=2))  # auto-paging through every page
        assert [b.id for b in walked] == made[::-1]
        assert [(b.metadata or {}).get("asyncbench_intent") for b in walked] == [f"intent-{i}" for i in range(5)][::-1]
        with pytest.raises(openai.BadRequestError, match="limit"):
            client.batches.list(limit=101)
        with pytest.raises(openai.BadRequestError, match="metadata"):
            client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h",
                                  metadata={"k": "v" * 513})
        ant = anthropic.Anthropic(api_key="k", base_url=sim.base_url, max_retries=0)
        params = {"model": "claude-haiku-4-5", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
        ids = [ant.messages.batches.create(requests=[{"custom_id": f"c{i}", "params": params}]).id  # type: ignore[list-item]
               for i in range(3)]
        first = ant.messages.batches.list(limit=2)
        assert [b.id for b in first.data] == ids[::-1][:2] and first.has_more
        assert [b.id for b in ant.messages.batches.list(limit=2, after_id=ids[1]).data] == [ids[0]]
        assert [b.id for b in ant.messages.batches.list(limit=5, before_id=ids[0]).data] == [ids[2], ids[1]]
        assert [b.id for b in ant.messages.batches.list(limit=1)] == ids[::-1]
