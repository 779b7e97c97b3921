"""How the 100-LongBench release asks a model, per kind of model (its `pred.py` and
`utils/model_utils.py`, uservan/100-LongBench commit 1254aae): the request every sample
and every prior-knowledge question is sent as.

- GPT models (`OpenAIModel`, built by `load_model` with its defaults): chat completions
  with a system message ("You are a helpful assistant", `generate`'s default) and the
  prompt as the user message, `temperature` 0.9 and `top_p` 0.9 (`do_sample` True), no
  stop, no truncation (`prepare_inputs` is never called by pred.py).
- Claude (`AnthropicModel.generate`): the prompt as the only message, the system
  "You are a helpful assistant. Make sure your output does not contain new lines.",
  `temperature` 0.9, `top_p` 0.9.
- Open models (`HFModel`): the raw prompt, no chat template (`use_chat_template=False`),
  greedy (`do_sample=False`), and no truncation (`generate(..., truncated=False)`): a
  self-hosted server is sent the text as it is (TGI `/generate`, `/v1/completions`); a
  prompt the model cannot take is refused by the server and is a failed sample (run.json
  hints at it), never cut.
"""

from __future__ import annotations

from ...prompt_rules import ReleaseArgs, ReleaseRequests

OPENAI_SYSTEM = "You are a helpful assistant"
ANTHROPIC_SYSTEM = "You are a helpful assistant. Make sure your output does not contain new lines."
API_TEMPERATURE = 0.9
API_TOP_P = 0.9


def release_request(prompt: str, provider: str, open_model: bool) -> ReleaseArgs:
    """The release's request for `prompt` (what `ModelClient.request` is given)."""
    if open_model and provider != "anthropic":
        return ReleaseArgs(prompt=prompt, messages=None, temperature=0.0, params={}, chat=False)
    system = ANTHROPIC_SYSTEM if provider == "anthropic" else OPENAI_SYSTEM
    return ReleaseArgs(prompt=None, messages=[{"role": "system", "content": system}, {"role": "user", "content": prompt}],
                       temperature=API_TEMPERATURE, params={"top_p": API_TOP_P}, chat=True)


def describe(provider: str, open_model: bool) -> dict[str, object]:
    """What run.json records of the requests a run sends."""
    if open_model:
        return {"kind": "open model (HFModel)", "template": "none (raw prompt)", "truncation": "none",
                "temperature": 0.0, "why": "100-LongBench pred.py sends open models the raw prompt, greedy, uncut"}
    system = ANTHROPIC_SYSTEM if provider == "anthropic" else OPENAI_SYSTEM
    return {"kind": "API model", "system": system, "temperature": API_TEMPERATURE, "top_p": API_TOP_P,
            "truncation": "none", "why": "100-LongBench utils/model_utils.py "
                                        + ("AnthropicModel" if provider == "anthropic" else "OpenAIModel")}


# The prompt rules of 100-LongBench (benchmark.py's RULES): every request as the release sends it.
RELEASE_REQUESTS = ReleaseRequests(release_request, describe)
