"""A tiny random-weight GGUF model that carries the real Llama-2 vocabulary.

llama-server needs a model file to answer anything; no model may be downloaded at test time,
and what the tests check is the server's *text handling* (tokenizer, chat template, context
limit, error bodies), which depends only on the vocabulary and the metadata, not on weights.
So the model is written here, with the `gguf` package, from the shared Llama-2 tokenizer
(../shared/data/tokenizers/llama-2/tokenizer.json):

- tokenizer.ggml.model "llama" (SentencePiece), the 32,000 pieces in id order, each scored
  minus the rank of the merge that makes it (so llama.cpp merges in the tokenizer's order),
  the 256 `<0xNN>` pieces typed BYTE,
  `<unk>` UNKNOWN, `<s>`/`</s>` CONTROL, BOS added (as LlamaTokenizerFast does);
- Llama-2-chat's own chat template (meta-llama/Llama-2-7b-chat-hf tokenizer_config.json);
- the `llama` architecture at 4,096 context with one layer of width 64: a 16 MB file, decoded
  at thousands of tokens per second on one core. Its answers are noise, which is fine.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

# The chat template of meta-llama/Llama-2-7b-chat-hf (tokenizer_config.json), verbatim.
LLAMA2_CHAT_TEMPLATE = (
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
    "{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}"
    "{% set system_message = false %}{% endif %}{% for message in loop_messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if loop.index0 == 0 and system_message != false %}"
    "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}"
    "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
    "{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"
)
CONTEXT = 4096
N_EMBD, N_HEAD, N_LAYER, N_FF = 64, 4, 1, 128


def vocabulary(tokenizer_json: Path) -> tuple[list[str], list[float], list[int]]:
    """(pieces, scores, token types) in id order, from a Llama-2 `tokenizer.json`."""
    from gguf import TokenType

    data = json.loads(tokenizer_json.read_text(encoding="utf-8"))
    vocab: dict[str, int] = data["model"]["vocab"]
    pieces = [""] * len(vocab)
    for piece, idx in vocab.items():
        pieces[idx] = piece
    special = {t["id"]: t["content"] for t in data.get("added_tokens", []) if t.get("special")}
    types = []
    for idx, piece in enumerate(pieces):
        if special.get(idx) == "<unk>":
            types.append(int(TokenType.UNKNOWN))
        elif idx in special:
            types.append(int(TokenType.CONTROL))
        elif len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
            types.append(int(TokenType.BYTE))
        else:
            types.append(int(TokenType.NORMAL))
    # A piece's score is minus the rank of the merge that makes it: llama.cpp's SentencePiece
    # tokenizer joins the adjacent pair whose joined piece scores highest, so it merges in
    # the order tokenizers' BPE does. (−id is not that order: the whitespace runs "▁▁▁▁"
    # have small ids but late merges.) Pieces no merge makes (characters, bytes, specials)
    # are never the result of a join; they score below every merge.
    scores = [-float(len(data["model"]["merges"]) + i) for i in range(len(pieces))]
    seen: set[int] = set()
    for rank, merge in enumerate(data["model"]["merges"]):
        left, right = merge.split(" ", 1) if isinstance(merge, str) else merge
        idx = vocab.get(left + right)
        if idx is not None and idx not in seen:
            seen.add(idx)
            scores[idx] = -float(rank)
    return pieces, scores, types


def write_model(tokenizer_json: Path, out: Path, seed: int = 0) -> Path:
    """Write the model to `out` (atomically) and return it."""
    import gguf

    pieces, scores, types = vocabulary(tokenizer_json)
    arch = "llama"
    tmp = out.with_suffix(".partial")
    w = gguf.GGUFWriter(str(tmp), arch)
    w.add_name("asyncbench tiny llama-2 vocab")
    w.add_context_length(CONTEXT)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD)
    w.add_rope_dimension_count(N_EMBD // N_HEAD)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(len(pieces))
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("llama")
    w.add_token_list(pieces)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_chat_template(LLAMA2_CHAT_TEMPLATE)

    rng = np.random.default_rng(seed)

    def weight(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    # numpy shapes are ggml's ne reversed: token_embd is ne [n_embd, n_vocab].
    w.add_tensor("token_embd.weight", weight(len(pieces), N_EMBD))
    w.add_tensor("output_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    w.add_tensor("output.weight", weight(len(pieces), N_EMBD))
    for i in range(N_LAYER):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            w.add_tensor(f"blk.{i}.{name}.weight", weight(N_EMBD, N_EMBD))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        w.add_tensor(f"blk.{i}.ffn_gate.weight", weight(N_FF, N_EMBD))
        w.add_tensor(f"blk.{i}.ffn_up.weight", weight(N_FF, N_EMBD))
        w.add_tensor(f"blk.{i}.ffn_down.weight", weight(N_EMBD, N_FF))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    tmp.replace(out)
    return out
