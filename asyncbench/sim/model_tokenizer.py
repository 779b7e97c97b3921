"""The simulated model's own tokenizer (`--tokenizer-file`, a tokenizer.json such as
Llama-2's), exposed and counted as the real servers do. Without one the simulator keeps
its 4-character pieces (server.py).

What each rule copies:
- TGI `POST /tokenize` (router/src/server.rs `encoding_to_tokens`, v3.x): one
  `{id, text, start, stop}` per token, special tokens included (the BOS gets the empty span
  (0, 0) and text ""), start/stop UTF-8 *byte* offsets (the Rust `Encoding`'s), text the
  lossy UTF-8 of those bytes. `/generate` counts `inputs` with special tokens
  (router/src/validation.rs: `add_special_tokens` defaults to true).
- vLLM `POST /tokenize` (entrypoints/openai/serving_tokenization.py): `{count,
  max_model_len, tokens}`, `add_special_tokens` true by default; `POST /detokenize`:
  `tokenizer.decode(tokens)`, special tokens kept (`<s>` comes back as text).
- Chat routes render the model's chat template first and count that text without
  adding special tokens (its `<s>` is in the text): TGI router/src/lib.rs and vLLM's
  ChatCompletionRequest (`add_special_tokens` false). The Llama-2 template is
  meta-llama/Llama-2-7b-chat-hf's tokenizer_config.json `chat_template`:
  `<s>[INST] {user.strip()} [/INST]`, a system message folded into the first user turn
  as `<<SYS>>\\n{system}\\n<</SYS>>\\n\\n`, each assistant turn ` {content.strip()} </s>`.
"""

from __future__ import annotations


class ModelTokenizer:
    """A tokenizer.json, and the model's chat template when it is a Llama-2 one."""

    def __init__(self, path: str) -> None:
        from tokenizers import Tokenizer

        self._tok = Tokenizer.from_file(path)
        self.path = path

    def ids(self, text: str, special: bool = True) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=special).ids)

    def count(self, text: str, special: bool = True) -> int:
        return len(self.ids(text, special))

    def tgi_tokens(self, text: str, special: bool = True) -> list[dict[str, object]]:
        """TGI's /tokenize answer: byte offsets, as its Rust router sees them (the Python
        binding gives character offsets, converted here)."""
        enc = self._tok.encode(text, add_special_tokens=special)
        raw = text.encode("utf-8", "surrogatepass")
        at = [0] * (len(text) + 1)  # byte position of each character offset
        for i, ch in enumerate(text):
            at[i + 1] = at[i] + len(ch.encode("utf-8", "surrogatepass"))
        out = []
        for token_id, (start, stop) in zip(enc.ids, enc.offsets):
            b0, b1 = at[start], at[stop]
            out.append({"id": token_id, "text": raw[b0:b1].decode("utf-8", "replace"), "start": b0, "stop": b1})
        return out

    def detokenize(self, ids: list[int]) -> str:
        """vLLM's /detokenize: special tokens kept."""
        return str(self._tok.decode(ids, skip_special_tokens=False))

    def chat_prompt(self, messages: list[dict[str, object]]) -> str:
        """The Llama-2 chat template's text for these messages."""
        system = ""
        turns = list(messages)
        if turns and turns[0].get("role") == "system":
            system = f"<<SYS>>\n{_text(turns[0].get('content'))}\n<</SYS>>\n\n"
            turns = turns[1:]
        out = []
        for i, message in enumerate(turns):
            content = _text(message.get("content"))
            if i == 0 and system:
                content = system + content
            if message.get("role") == "user":
                out.append(f"<s>[INST] {content.strip()} [/INST]")
            elif message.get("role") == "assistant":
                out.append(f" {content.strip()} </s>")
        return "".join(out)


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return ""
