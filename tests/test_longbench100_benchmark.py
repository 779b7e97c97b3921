"""100-LongBench load -> prepare (prior filter) -> score -> aggregate, with a scripted ctx."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from asyncbench.benchmarks.base import LoadOptions, RunContext
from asyncbench.benchmarks.longbench100 import LongBench100
from asyncbench.types import Request, Response, SampleResult, SampleStatus, Usage

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
pytestmark = pytest.mark.skipif(not (DATA / "minilongbench").is_dir(), reason="../shared/data not available")


def make_request(spec=None, prompt=None, messages=None, max_tokens=128, task=None, temperature=0.0, params=None,
                 repeat=0) -> Request:
    """RunContext.make_request's shape, for a fake model."""
    return Request(provider="fake", model=spec or "model", endpoint_id="x", prompt=prompt, messages=messages,
                   max_tokens=max_tokens, task=task, temperature=temperature, params=params or {}, repeat=repeat)


def make_ctx(judge_reply: str, prior_reply) -> tuple[RunContext, list[str]]:
    purposes: list[str] = []

    async def generate(reqs, purpose):
        purposes.extend([purpose] * len(reqs))
        texts = [judge_reply if purpose == "judge" else prior_reply(r.prompt) for r in reqs]
        return [Response(text=t, usage=Usage(1, 1), latency_ms=1.0) for t in texts]

    return RunContext("fake:model", generate, make_request, {"judge": "fake:judge"}), purposes


@pytest.fixture(scope="module")
def loaded() -> tuple[LongBench100, list]:
    extra = {"lengths": ["2k", "4k", "8k"], "base_lengths": ["2k", "4k"], "rows": 3, "seed": 1}
    bench = LongBench100(extra, data_dir=DATA)
    opts = LoadOptions(data_dir=DATA, tasks=["kv_retrieval", "single_doc_qa", "single_doc_sum"], extra=extra)
    return bench, bench.load(opts)


def test_load_reports_unbuildable_cells(loaded) -> None:
    _, samples = loaded
    assert {s.id.rsplit("/", 1)[0] for s in samples} >= {"kv_retrieval/2k", "single_doc_qa/8k", "single_doc_sum/8k"}
    assert "2k" in samples.notes["unbuildable"]["single_doc_sum"]  # no summary source fits in 2k here
    assert all(s.prompt and "{context}" not in s.prompt for s in samples)


def test_prior_filter_excludes_known_questions_and_reports(loaded) -> None:
    bench, samples = loaded
    qa = [s for s in samples if s.metric == "qa"]
    known = qa[0].meta["question"]

    def prior(prompt: str) -> str:
        return "some answer" if known in prompt else "unanswerable"

    ctx, purposes = make_ctx('{"fluency": 2, "correctness": 3}', prior)
    kept, report = asyncio.run(bench.prepare(samples, ctx))
    n_known = sum(s.meta["question"] == known for s in qa)
    assert report["prior_knowledge"]["excluded"] == n_known == len(samples) - len(kept)
    assert report["prior_knowledge"]["checked"] == len(qa)
    assert "prior" in purposes and "judge" in purposes
    assert all(s.meta.get("question") != known for s in kept if s.metric == "qa")


@pytest.mark.parametrize("temperature", [0.9, 0.0])
def test_prior_questions_go_one_per_sample_as_the_release_asks_them(loaded, temperature: float) -> None:
    """The release asks each sample's question without context beside that sample (its
    pred.py get_pred: one null_pred per sample) and filters per sample (eval_trec.py). An
    API model samples (0.9): each sample's draw is its own request (repeat k for the k-th
    sample of a question), so one draw that knows the answer excludes only its sample;
    a greedy model's draws are one request, asked once."""
    bench, samples = loaded
    qa = [s for s in samples if s.metric == "qa"]
    question = qa[0].meta["question"]
    same = [s for s in qa if s.meta["question"] == question]
    assert len(same) > 1  # one question at several lengths: the case that tells the two ways apart
    asked: list[Request] = []

    def sampled(spec=None, prompt=None, messages=None, max_tokens=128, task=None, temperature_=0.0, params=None,
                repeat=0, **_: object) -> Request:
        return make_request(spec, prompt, messages, max_tokens, task, temperature if not spec else 0.1, params, repeat)

    async def generate(reqs, purpose):
        if purpose == "prior":
            asked.extend(reqs)
        # the first draw of the question knows its answer; the others (repeat > 0) do not
        texts = ['{"fluency": 2, "correctness": 3}' if purpose == "judge" else
                 ("an answer" if question in (r.prompt or "") and r.repeat == 0 else "unanswerable") for r in reqs]
        return [Response(text=t, usage=Usage(1, 1), latency_ms=1.0) for t in texts]

    ctx = RunContext("fake:model", generate, sampled, {"judge": "fake:judge"})
    kept, report = asyncio.run(bench.prepare(samples, ctx))
    assert len(asked) == len(qa)  # one per sample
    of_question = [r for r in asked if question in (r.prompt or "")]
    if temperature > 0:
        assert sorted(r.repeat for r in of_question) == list(range(len(same)))
        assert len({r.key() for r in asked}) == len(qa) == report["prior_knowledge"]["asked"]
        assert report["prior_knowledge"]["excluded"] == 1  # only the sample whose draw knew it
        assert same[0] not in kept and all(s in kept for s in same[1:])
    else:  # greedy: the same request, shared: one answer for all of them
        assert {r.repeat for r in of_question} == {0}
        assert report["prior_knowledge"]["asked"] == len({s.meta["question"] for s in qa})
        assert report["prior_knowledge"]["excluded"] == len(same)


def test_needs_judge_names_the_judged_tasks_and_the_others() -> None:
    """The capability planning asks before anything is built: the QA and summary tasks
    need a judge, the synthetic ones do not (the refusal itself: test_longbench100_stream)."""
    bench = LongBench100({}, data_dir=DATA)
    why = bench.needs_judge(["kv_retrieval", "single_doc_qa"])
    assert why is not None and "--judge" in why and "single_doc_qa" in why and "kv_retrieval," in why
    assert bench.needs_judge(None) is not None
    assert bench.needs_judge(["kv_retrieval", "passage_count"]) is None


def test_score_and_aggregate(loaded) -> None:
    bench, samples = loaded
    preds = []
    for s in samples:
        if s.metric == "uuid":  # right on 2k and 8k, wrong on 4k
            preds.append(f"the value is {s.answers[0]}" if "/4k/" not in s.id else "no idea")
        else:
            preds.append("\nAn answer.\nignored second line")
    ctx, _ = make_ctx('{"fluency": 2, "correctness": 3}', lambda p: "")
    scores = asyncio.run(bench.score(samples, preds, ctx))
    assert all(sc.parsed == "An answer." for s, sc in zip(samples, scores) if s.metric != "uuid")  # the first line
    assert all(sc.judge for s, sc in zip(samples, scores) if s.metric == "qa")  # judged: its calls kept
    assert not any(sc.judge for s, sc in zip(samples, scores) if s.metric == "uuid")  # a rule metric: none
    for s, sc in zip(samples, (sc.value for sc in scores)):
        if s.metric == "uuid":
            assert sc == (0.0 if "/4k/" in s.id else 1.0)
        elif s.metric == "qa":
            assert sc == 1.0
        else:
            assert sc == 0.0  # a QA-shaped verdict has no precision: a failed judgement scores 0, as the release
    results = [SampleResult(s.id, s.task, SampleStatus.ANSWERED, score=sc.value, meta=dict(s.meta))
               for s, sc in zip(samples, scores)]
    rep = bench.aggregate(results).to_json()
    assert rep["by_task_length"]["kv_retrieval"] == {"2k": 100.0, "4k": 0.0, "8k": 100.0}
    assert not rep["unscored"]
    assert rep["overall_tasks"] == ["kv_retrieval", "single_doc_qa"]
    assert rep["by_length"]["4k"] == 50.0
    ls = rep["longscore"]
    assert ls["base_ability"] == 75.0 and ls["lc"] == {"8k": pytest.approx(100 / 3)}
    assert rep["longscore_by_task"]["kv_retrieval"]["lc"] == {"8k": 100.0}


def test_prompts_are_the_release_s_templates_filled(loaded) -> None:
    """Each prompt is the release's template with its slots filled: the template's own text
    around {context}, {instruction} and {input}, byte for byte, and its output budget."""
    import json
    import re

    bench, samples = loaded
    prompts = json.loads((DATA / "longbench100" / "dataset2prompt.json").read_text())
    maxlen = json.loads((DATA / "longbench100" / "dataset2maxlen.json").read_text())
    for s in samples:
        parts = re.split(r"\{(context|instruction|input)\}", prompts[s.task])
        pattern = "".join(re.escape(p) if i % 2 == 0 else f"(?P<{p}{i}>.*)" for i, p in enumerate(parts))
        match = re.fullmatch(pattern, s.prompt, re.DOTALL)
        assert match is not None, s.task
        if s.metric == "qa":
            assert [v for k, v in match.groupdict().items() if k.startswith("input")] == [s.meta["question"]]
        assert s.max_tokens == maxlen[s.task]
    # the prior-knowledge question goes out in the release's qa_old prompt
    qa = [s for s in samples if s.metric == "qa"]
    sent: list[str] = []

    def prior(prompt: str) -> str:
        sent.append(prompt)
        return "unanswerable"

    ctx, _ = make_ctx("", prior)
    asyncio.run(bench.prepare(samples, ctx))
    assert set(sent) == {prompts["qa_old"].format(input=q) for q in {s.meta["question"] for s in qa}}


def test_judge_requests_carry_the_release_s_judge_prompt(loaded) -> None:
    """Each QA judgement is the release's judge_prompt filled with one reference, sent
    with the release's system message and sampling."""
    import json

    bench, samples = loaded
    judge_prompt = json.loads((DATA / "longbench100" / "judge_prompts.json").read_text())["judge_prompt"]
    qa = [s for s in samples if s.metric == "qa"][:2]
    sent: list[Request] = []

    async def generate(reqs, purpose):
        sent.extend(reqs)
        return [Response(text='{"fluency": 2, "correctness": 3}', usage=Usage(1, 1), latency_ms=1.0) for _ in reqs]

    ctx = RunContext("fake:model", generate, make_request, {"judge": "fake:judge"})
    scores = asyncio.run(bench.score(qa, ["An answer."] * len(qa), ctx))
    assert [sc.value for sc in scores] == [1.0] * len(qa)
    expected = [judge_prompt.format(question=s.meta["question"], correct_answers=ref, parsed_output="An answer.")
                for s in qa for ref in s.answers]
    assert [r.messages[-1]["content"] for r in sent] == expected
    assert all(r.messages[0]["role"] == "system" and r.temperature == 0.1 and r.params == {"top_p": 0.9} for r in sent)


def test_heads_are_the_samples_without_their_prompts_and_select_builds_just_those_asked() -> None:
    """A run decides on heads (no context built) and builds only the samples `prepare`
    kept: each head carries what the built sample carries for `prepare` (QA questions and
    answers included), and a selection builds exactly the samples asked, identical to
    the full stream's (the base set's rows share one RNG: skipping one must not shift the
    next; multi_doc_sum shuffles with it)."""
    extra = {"lengths": ["2k", "8k"], "rows": 4, "seed": 3, "base_ability": "release"}
    bench = LongBench100(extra, data_dir=DATA)
    opts = LoadOptions(data_dir=DATA, tasks=["single_doc_qa", "multi_doc_qa", "multi_doc_sum", "kv_retrieval"],
                       extra=extra)
    generating = bench.generate(opts, lambda line: None)
    built = {s.id: s for s in generating.samples}
    heads = {s.id: s for s in generating.heads()}
    assert list(heads) == list(built) and len(built) == generating.total
    assert any(s.metric == "qa" for s in built.values()) and any(s.id.split("/")[1] == "base" for s in built.values())
    for sid, s in built.items():
        h = heads[sid]
        assert (h.task, h.metric, h.max_tokens, h.meta["length"], h.prompt) == (s.task, s.metric, s.max_tokens,
                                                                             s.meta["length"], "")
        if s.metric == "qa":
            assert (h.meta["question"], h.answers) == (s.meta["question"], s.answers)
    wanted = {sid for i, sid in enumerate(built) if i % 3 == 1}
    chosen = list(generating.select(wanted.__contains__))
    assert [s.id for s in chosen] == [sid for sid in built if sid in wanted]
    assert all((s.prompt, s.answers, s.meta) == (built[s.id].prompt, built[s.id].answers, built[s.id].meta)
               for s in chosen)
