"""Unit tests of run/prompting.py: a sample's request as the benchmark's prompt rules and the
server decide it — the budget cut, chat vs raw, the official open model's template and
newline rule, the fit loop, release requests, a benchmark's own stops and
post-processing — and what the execution's Tally records of it. Real clients and a real
tokenizer (tiktoken's cl100k_base); nothing is sent."""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import pytest

from asyncbench.client import ModelClient, make_client
from asyncbench.pricing import PriceTable
from asyncbench.prompt_rules import PostProcess, PromptRules, ReleaseArgs, ReleaseRequests
from asyncbench.prompt_rules.budget import CHAT_TEMPLATE_TOKENS, PromptBudget
from asyncbench.prompt_rules.official_models import NewlineStop, OfficialModel, build_chat, newline_stop
from asyncbench.providers import parse_model_spec
from asyncbench.run.prompting import Prompting, Tally
from asyncbench.tokenizers import Tokenizer, get_tokenizer
from asyncbench.types import Sample

LLAMA2 = OfficialModel("llama2-7b-chat-4k", "meta-llama/Llama-2-7b-chat-hf", 3500, "test")
VLLM_NEWLINE = NewlineStop({"min_tokens": 1, "stop_token_ids": [13]}, False, "vLLM")
CLIENT_CUT = NewlineStop({}, True, "cut at the client")
# a long prompt whose two ends say what the middle cut must keep
LONG = "Answer the question at the end.\n\n" + " ".join(f"word{i}" for i in range(3000)) + "\n\nQuestion: why?"


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return get_tokenizer("cl100k_base")


@pytest.fixture
def clients(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, ModelClient]]:
    """An open-model server (openai-compat: raw completions for untemplated samples) and a
    chat-only API (openai); made for real, never sent to, closed after."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-sent")
    made = {"open": make_client(parse_model_spec("openai-compat:m", ["http://127.0.0.1:9/v1"]), PriceTable(None),
                                concurrency=32),
            "chat_only": make_client(parse_model_spec("openai:gpt-4o-mini", []), PriceTable(None), concurrency=32)}
    yield made
    for c in made.values():
        anyio.run(c.aclose)


def prompting(client: ModelClient, *, rules: PromptRules = PromptRules(), budget: PromptBudget | None = None,
              tokenizer: Tokenizer | None = None, open_model: OfficialModel | None = None,
              newline: NewlineStop | None = None) -> Prompting:
    return Prompting(client, 0.0, 0, rules, budget or PromptBudget(None, None, "none"), tokenizer, open_model,
                     newline, {"budget": "test"})


def sample(prompt: str = LONG, *, chat: bool = True, task: str = "qa", max_tokens: int = 32) -> Sample:
    return Sample(id=f"{task}/0", task=task, prompt=prompt, chat=chat, max_tokens=max_tokens)


def test_a_prompt_over_its_budget_loses_its_middle_and_the_tally_counts_it(clients: dict[str, ModelClient],
                                                                           tok: Tokenizer) -> None:
    p = prompting(clients["open"], budget=PromptBudget(200, None, "test"), tokenizer=tok)
    tally = Tally()
    raw = p.build(sample(chat=False), tally)  # raw text: cut to the budget itself
    assert raw.prompt is not None and raw.messages is None
    assert raw.prompt.startswith("Answer the question") and raw.prompt.endswith("Question: why?")
    assert tok.count(raw.prompt) <= 200 + 4  # pred.py's cut: the seam may re-encode to a few more
    assert tally.truncated["qa/0"] == tok.count(LONG) - 200
    short = p.build(sample("Answer briefly.\n\nQuestion: why?", chat=False, task="short"), tally)
    assert short.prompt == "Answer briefly.\n\nQuestion: why?" and "short/0" not in tally.truncated


def test_a_templated_prompt_leaves_room_for_the_server_s_template(clients: dict[str, ModelClient],
                                                                  tok: Tokenizer) -> None:
    budget = PromptBudget(None, 500, "test")
    p = prompting(clients["open"], budget=budget, tokenizer=tok)
    tally = Tally()
    chat = p.build(sample(max_tokens=100), tally)
    assert chat.prompt is None and chat.messages is not None and len(chat.messages) == 1
    assert tally.truncated["qa/0"] == tok.count(LONG) - (500 - 100 - CHAT_TEMPLATE_TOKENS)
    raw = p.build(sample(chat=False, task="fewshot", max_tokens=100), tally)
    assert raw.prompt is not None and tally.truncated["fewshot/0"] == tok.count(LONG) - (500 - 100)


def test_an_untemplated_task_goes_raw_where_it_can_and_as_chat_where_it_cannot(
        clients: dict[str, ModelClient]) -> None:
    tally = Tally()
    raw = prompting(clients["open"]).build(sample("p", chat=False, task="lcc"), tally)
    assert raw.prompt == "p" and raw.messages is None and tally.as_chat == set()
    as_chat = prompting(clients["chat_only"]).build(sample("p", chat=False, task="lcc"), tally)
    assert as_chat.messages == [{"role": "user", "content": "p"}] and tally.as_chat == {"lcc"}
    limits = prompting(clients["chat_only"]).limits_found(tally)
    assert limits["no_template_sent_as_chat"] == ["lcc"] and limits["budget"] == "test"


def test_an_official_open_model_gets_its_chat_format_as_raw_text(clients: dict[str, ModelClient],
                                                                 tok: Tokenizer) -> None:
    p = prompting(clients["open"], budget=PromptBudget(3500, None, "model2maxlen.json"), tokenizer=tok,
                  open_model=LLAMA2)
    tally = Tally()
    chat = p.build(sample("Summarise.\n\nText"), tally)
    assert chat.prompt == build_chat("Summarise.\n\nText", LLAMA2.name) == "[INST]Summarise.\n\nText[/INST]"
    assert chat.messages is None and chat.params == {}
    few_shot = p.build(sample("Type: a\nType:", chat=False, task="trec"), tally)
    assert few_shot.prompt == "Type: a\nType:"  # pred.py's few-shot and code tasks: no build_chat
    assert tally.post == {}  # llama2 has no post-processing of its own


def test_the_newline_rule_is_sent_where_the_server_takes_it(clients: dict[str, ModelClient]) -> None:
    rules = PromptRules(newline_stop=frozenset({"samsum"}))
    tally = Tally()
    p = prompting(clients["open"], rules=rules, open_model=LLAMA2, newline=VLLM_NEWLINE)
    sent = p.build(sample("Dialogue: hi", chat=False, task="samsum"), tally)
    assert sent.params == {"min_tokens": 1, "stop_token_ids": [13]}  # pred.py's rule, no "stop" beside it
    assert tally.newline_stop and "samsum/0" not in tally.post
    assert p.limits_found(tally)["newline_stop"]["client_cut"] is False
    other = p.build(sample("Question", chat=False, task="trec"), tally)
    assert other.params == {}


def test_the_newline_rule_is_cut_at_the_client_where_it_cannot_be_sent(clients: dict[str, ModelClient]) -> None:
    rules = PromptRules(newline_stop=frozenset({"samsum"}))
    tally = Tally()
    p = prompting(clients["open"], rules=rules, open_model=LLAMA2, newline=CLIENT_CUT)
    sent = p.build(sample("Dialogue: hi", chat=False, task="samsum"), tally)
    assert sent.params == {}
    assert tally.post["samsum/0"] == PostProcess(newline_cut=True, model=LLAMA2.name)
    assert tally.answer("samsum/0", "\nA summary.\nDialogue: more") == "\nA summary.\n"
    assert tally.answer("other/0", "\nkept\nwhole") == "\nkept\nwhole"
    # the sample's meta is input only: nothing was written into it
    s = sample("Dialogue: hi", chat=False, task="samsum")
    p.build(s, Tally())
    assert s.meta == {}


def test_without_an_open_model_the_newline_rule_is_a_stop_sequence(clients: dict[str, ModelClient]) -> None:
    rules = PromptRules(newline_stop=frozenset({"samsum"}))
    sent = prompting(clients["open"], rules=rules).build(sample("Dialogue: hi", chat=False, task="samsum"), Tally())
    assert sent.params == {"stop": ["\n"]}


def test_a_model_with_its_own_post_processing_gets_it(clients: dict[str, ModelClient]) -> None:
    xgen = OfficialModel("xgen-7b-8k", "Salesforce/xgen-7b-8k-inst", 7500, "test")
    tally = Tally()
    prompting(clients["open"], open_model=xgen).build(sample("q"), tally)
    assert tally.post["qa/0"] == PostProcess(model="xgen-7b-8k")
    assert tally.answer("qa/0", " Assistant: yes ") == " yes"


def test_the_fit_loop_cuts_further_until_the_wrapped_prompt_fits_the_server(clients: dict[str, ModelClient],
                                                                             tok: Tokenizer) -> None:
    # the server's context leaves exactly pred.py's cut: its chat format pushes it over
    budget = PromptBudget(None, 300 + 32, "server")
    p = prompting(clients["open"], budget=budget, tokenizer=tok, open_model=LLAMA2)
    tally = Tally()
    sent = p.build(sample(), tally)
    assert sent.prompt is not None and sent.prompt.startswith("[INST]")
    assert tok.count(sent.prompt) <= 300  # what the server takes
    assert tally.fitted["qa/0"] > 0 and tally.unfit == []
    assert p.limits_found(tally)["fitted"]["n"] == 1
    # with room to spare (FIT_SLACK), pred.py's own cut is sent as it is
    roomy = prompting(clients["open"], budget=PromptBudget(200, 2000, "server"), tokenizer=tok, open_model=LLAMA2)
    tally = Tally()
    roomy.build(sample(), tally)
    assert tally.fitted == {} and tally.truncated["qa/0"] == tok.count(LONG) - 200


def test_a_prompt_that_cannot_fit_is_sent_and_said_once(clients: dict[str, ModelClient], tok: Tokenizer,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    p = prompting(clients["open"], budget=PromptBudget(None, 34, "server"), tokenizer=tok, open_model=LLAMA2)
    tally = Tally()
    p.build(sample(), tally)
    p.build(sample(task="qa2"), tally)
    assert tally.unfit == ["qa/0", "qa2/0"]
    assert capsys.readouterr().err.count("the server will refuse it") == 1


def _release(prompt: str, provider: str, open_model: bool) -> ReleaseArgs:
    if open_model:
        return ReleaseArgs(prompt=prompt, messages=None, temperature=0.0, params={}, chat=False)
    return ReleaseArgs(prompt=None, messages=[{"role": "system", "content": "S"}, {"role": "user", "content": prompt}],
                       temperature=0.9, params={"top_p": 0.9}, chat=True)


RELEASE = PromptRules(release=ReleaseRequests(_release, lambda provider, open_model: {"open": open_model}))


def test_release_requests_are_sent_as_the_release_sends_them_uncut(clients: dict[str, ModelClient],
                                                                    tok: Tokenizer) -> None:
    api = prompting(clients["chat_only"], rules=RELEASE, tokenizer=tok)
    tally = Tally()
    sent = api.build(sample(), tally)
    assert sent.messages == [{"role": "system", "content": "S"}, {"role": "user", "content": LONG}]
    assert sent.temperature == 0.9 and sent.params == {"top_p": 0.9} and tally.truncated == {}
    server = prompting(clients["open"], rules=RELEASE, tokenizer=tok).build(sample(chat=True), tally)
    assert server.prompt == LONG and server.messages is None and server.temperature == 0.0
    # a benchmark's own extra calls (the prior-knowledge questions) take the same shape
    prior = api.release_request("q?", 16, 2, task="qa")
    assert prior.messages is not None and prior.messages[1]["content"] == "q?"
    assert (prior.max_tokens, prior.repeat, prior.task) == (16, 2, "qa")


def test_a_benchmark_s_own_stops_and_post_processing(clients: dict[str, ModelClient]) -> None:
    rules = PromptRules(stops={"notes": ("###",)}, answer=str.upper)
    tally = Tally()
    p = prompting(clients["open"], rules=rules)
    sent = p.build(sample("p", task="notes"), tally)
    assert sent.params == {"stop": ["###"]}
    messages = p.build(Sample(id="m/0", task="m", messages=[{"role": "user", "content": "hi"}]), tally)
    assert messages.params == {}
    assert tally.answer("notes/0", "paris") == "PARIS" and tally.answer("m/0", "x") == "X"


def test_rules_that_contradict_themselves_are_refused() -> None:
    with pytest.raises(ValueError, match="budget_table"):
        PromptRules(open_models=True)
    with pytest.raises(ValueError, match="samsum"):
        PromptRules(newline_stop=frozenset({"samsum"}), stops={"samsum": ("\n",)})


class _Server:
    def __init__(self, takes: bool) -> None:
        self.takes = takes

    async def takes_min_tokens(self, base_urls: list[str]) -> bool:
        return self.takes


class _NewlineTokenizer:
    def token_id(self, text: str) -> int:
        return 13 if text == "\n" else -1


def test_the_newline_rule_as_each_server_takes_it() -> None:
    with_id = anyio.run(newline_stop, _Server(True), [], _NewlineTokenizer())
    assert with_id.params == {"min_tokens": 1, "stop_token_ids": [13]} and not with_id.client_cut
    without_id = anyio.run(newline_stop, _Server(True), [], None)
    assert without_id.params == {"min_tokens": 1, "stop": ["\n"]}
    elsewhere = anyio.run(newline_stop, _Server(False), [], _NewlineTokenizer())
    assert elsewhere.params == {} and elsewhere.client_cut
