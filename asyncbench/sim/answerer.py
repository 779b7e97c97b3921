"""The simulator's model: a cheap, deterministic baseline answerer.

Its answers are real answers of a weak baseline, so scores computed on them are genuine
scores (close to the chance level for label tasks, and an extractive baseline for QA and
summaries), which lets tests and demos exercise metrics end to end. It is deterministic:
the random choices are seeded from the prompt, so a retried request gets the same answer.

Rules, first match wins (they read the prompt's instructions, which LongBench and BAMBOO
put at its start and end):

- a grading request in the form of the 100-LongBench release's judge prompts ("impartial
  judge", "output your score in the following json format: {...}"): a verdict with those
  keys — fluency 1; correctness 3 when the reference answer appears in the graded answer,
  else 0; precision a random share of the summary's sentences; other keys 0 or 1 — so the
  simulator can stand in for a judge end to end;
- passage retrieval ("Paragraph N" / "段落N" answer format): one of the offered labels;
- passage counting ("how many ... paragraphs"): a number between 1 and the paragraphs shown;
- reordering ("[] > []"): a random permutation of the identifiers;
- multiple choice (A, B, C or D): one letter;
- hypothesis checking ("Yes." or "No."): one of the two;
- few-shot classification ending in "Type:" / "类别：": one of the labels in the examples;
- speaker prediction ("said by"): a speaker of the dialogue;
- number-only answers: the first number in the best-matching sentence, else any number;
- code completion ("Next line of code:"): a line of the given code;
- yes/no questions ("Is ...?", "Does ...?"): yes or no;
- a question ("Question:", "Query:", "问题："): the context sentence sharing most
  keywords with it;
- otherwise (summaries): the leading sentences of the context (the Lead baseline).

Cost: every rule is a handful of C-level scans (`re`, `str.find`) over the prompt, with
bounded Python work on top, so a 100k-character prompt costs about a millisecond.
"""

from __future__ import annotations

import random
import re
import zlib

_TAIL = 2000  # the end of the prompt, where the question and answer format live
_HEAD = 1500  # the start, where the task instruction lives
_MAX_KEYWORDS = 8
_MAX_HITS = 8  # occurrences examined per keyword
_SENTENCE_SPAN = 400  # how far a sentence may extend around a keyword hit

_EN_LABEL = re.compile(r"^Paragraph (\d+):", re.M)
_ZH_LABEL = re.compile(r"^段落(\d+)：", re.M)
_TYPE_LABEL = re.compile(r"^Type: *(.+?) *$", re.M)
_ZH_TYPE_LABEL = re.compile(r"^类别： *(.+?) *$", re.M)
_SPEAKER = re.compile(r"said by ([^\n\"]{1,60})$", re.M)
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w])")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'-]{2,}")
_CJK_RUN = re.compile(r"[\u4e00-\u9fff]{2,}")
_QUESTION = re.compile(r"(?:Question|Query|问题)[:：]\s*")
_YES_NO_START = re.compile(
    r"^(is|are|was|were|do|does|did|can|could|has|have|had|will|would|should|may|must)\b", re.I
)
_STOPWORDS = frozenset(
    ["the", "and", "for", "are", "was", "were", "what", "which", "who", "whom", "whose", "when", "where", "why", "how", "that", "this", "these", "those", "with", "from", "into", "did", "does", "has", "have", "had", "not", "but", "you", "your", "his", "her", "its", "their", "they", "them", "than", "then", "there", "been", "being", "also", "can", "could", "would", "should", "will", "may", "might", "must", "about", "after", "before", "other", "some", "such", "only", "both", "each", "most", "more", "many", "much", "any", "all", "one", "two", "name"]
)


def answer(prompt: str, max_chars: int) -> str:
    """The baseline's answer to `prompt`, at most `max_chars` characters long."""
    head, tail = prompt[:_HEAD], prompt[-_TAIL:]
    rng = random.Random(zlib.crc32(f"{len(prompt)}|{head}|{tail}".encode("utf-8", "replace")))
    for rule in _RULES:
        out = rule(prompt, head, tail, rng)
        if out is not None:
            return out[: max(0, max_chars)]
    raise AssertionError("the lead rule always answers")  # pragma: no cover


def _retrieval(prompt: str, head: str, tail: str, rng: random.Random) -> str | None:
    if '"Paragraph 1"' in tail:
        labels = sorted(set(_EN_LABEL.findall(prompt)), key=int) or ["1"]
        return f"Paragraph {rng.choice(labels)}"
    if '"段落1"' in tail:
        labels = sorted(set(_ZH_LABEL.findall(prompt)), key=int) or ["1"]
        return f"段落{rng.choice(labels)}"
    return None


def _count(prompt: str, head: str, tail: str, rng: random.Random) -> str | None:
    text = (head + tail).lower()
    if "how many" not in text or "paragraph" not in text or "duplicate" not in text:
        return None
    shown = len(_EN_LABEL.findall(prompt)) or len(_ZH_LABEL.findall(prompt)) or 1
    return str(rng.randint(1, shown))


def _reorder(prompt: str, head: str, tail: str, rng: random.Random) -> str | None:
    if "[] > []" not in tail:
        return None
    last = tail.rstrip().rsplit("\n", 1)[-1]
    ids = list(range(max(2, last.count("[]"))))
    rng.shuffle(ids)
    return " > ".join(f"[{i}]" for i in ids)


def _multiple_choice(prompt: str, head: str, tail: str, rng: random.Random) -> str | None:
    if "A, B, C, or D" in tail or "A, B, C or D" in tail:
        return rng.choice("ABCD")
    return None


def _hypothesis(prompt: str, head: str, tail: str, rng: random.Random) -> str | None:
    if '"Yes." or "No."' in tail:
        return rng.choice(("Yes.", "No."))
    return None


def _classification(prompt: str, head: str, tail: str, rng: random.Random) -> str | None:
    end = tail.rstrip()
    if end.endswith("Type:"):
        labels = _TYPE_LABEL.findall(prompt)
    elif end.endswith("类别：") or end.endswith("类别:"):
        labels = _ZH_TYPE_LABEL.findall(prompt)
    else:
        return None
    return rng.choice(sorted(set(labels))) if labels else ""


def _speaker(prompt: str, head: str, tail: str, rng: random.Random) -> str | None:
    if "speaker" not in tail.lower() or "said by" not in prompt:
        return None
    names = sorted(set(_SPEAKER.findall(prompt)))
    return rng.choice(names) if names else ""


def _number(prompt: str, head: str, tail: str, rng: random.Random) -> str | None:
    lowered = tail.lower()
    if "only give an number" not in lowered and "only contain the number" not in lowered:
        return None
    question = _question(tail)
    if question:
        best = _best_sentence(prompt, question)
        found = _NUMBER.search(best or "")
        if found:
            return found.group(0)
    numbers = _NUMBER.findall(prompt)
    return rng.choice(numbers) if numbers else "0"


def _code(prompt: str, head: str, tail: str, rng: random.Random) -> str | None:
    marker = tail.rfind("Next line of code:")
    if marker < 0 and "complete the code" not in head:
        return None
    code = tail[:marker] if marker >= 0 else tail
    lines = [line for line in code.splitlines()[-40:] if line.strip()]
    return rng.choice(lines) if lines else ""


def _yes_no(prompt: str, head: str, tail: str, rng: random.Random) -> str | None:
    question = _question(tail)
    if question and _YES_NO_START.match(question):
        return rng.choice(("yes", "no"))
    return None


def _extract(prompt: str, head: str, tail: str, rng: random.Random) -> str | None:
    question = _question(tail)
    if not question:
        return None
    return _best_sentence(prompt[: len(prompt) - len(tail) + tail.rfind(question)], question)


def _lead(prompt: str, head: str, tail: str, rng: random.Random) -> str | None:
    dialogue = tail.rfind("Dialogue:")
    if dialogue >= 0:  # few-shot dialogue summary: the last dialogue is the one asked about
        text = tail[dialogue + len("Dialogue:") :]
        cue = text.rfind("\nSummary:")
        return (text[:cue] if cue >= 0 else text).strip()
    # Skip the instruction (the first paragraph, else line) and a short "Report:" label.
    start = head.find("\n\n")
    start = start + 2 if start >= 0 else head.find("\n") + 1
    text = prompt[start:].lstrip()
    first, _, rest = text.partition("\n")
    if len(first) < 30 and first.rstrip().endswith((":", "：")):
        text = rest.lstrip()
    return text


# the release's judge prompts end "...output your score in the following json format: {...}."
_JUDGE_FORM = re.compile(r"in the following json format: (\{[^{}]{1,200}\})")
_JUDGE_KEY = re.compile(r'"(\w+)"\s*:')


def _line_after(prompt: str, label: str) -> str:
    at = prompt.rfind(label)
    if at < 0:
        return ""
    end = prompt.find("\n", at)
    return prompt[at + len(label): end if end >= 0 else None].strip().strip('"')


def _judge(prompt: str, head: str, tail: str, rng: random.Random) -> str | None:
    forms = _JUDGE_FORM.findall(prompt)
    if not forms or "impartial judge" not in head.lower():
        return None
    import json

    verdict: dict[str, int] = {}
    for key in _JUDGE_KEY.findall(forms[-1]):
        if key == "fluency":
            verdict[key] = 1
        elif key == "correctness":  # the release's QA judge: one reference per call
            graded = _line_after(prompt, "Answer:").lower()
            ref = _line_after(prompt, "Correct answers:").lower()
            verdict[key] = 3 if ref.strip() and ref in graded else 0
        elif key == "sentence_count":
            summary = _line_after(prompt, "Provided summary:")
            verdict[key] = max(1, len(re.findall(r"[.!?。](?:\s|$)", summary)))
        else:
            verdict[key] = rng.randint(0, 1)
    if "precision" in verdict and "sentence_count" in verdict:
        verdict["precision"] = rng.randint(0, verdict["sentence_count"])
    return "Verdict: " + json.dumps(verdict)


_RULES = (
    _judge,
    _retrieval,
    _count,
    _reorder,
    _multiple_choice,
    _hypothesis,
    _classification,
    _speaker,
    _number,
    _code,
    _yes_no,
    _extract,
    _lead,
)


def _question(tail: str) -> str:
    """The last question in the prompt's tail, without the trailing answer cue."""
    matches = list(_QUESTION.finditer(tail))
    if not matches:
        return ""
    text = tail[matches[-1].end() :]
    for cue in ("\nAnswer", "\n回答", "\n答案"):
        cut = text.find(cue)
        if cut >= 0:
            text = text[:cut]
    return text.strip()


def _keywords(question: str) -> list[str]:
    """Up to _MAX_KEYWORDS search keys: long content words, or CJK character bigrams."""
    runs = _CJK_RUN.findall(question)
    if runs:
        grams = list(dict.fromkeys(run[i : i + 2] for run in runs for i in range(len(run) - 1)))
        step = max(1, len(grams) // _MAX_KEYWORDS)
        return grams[::step][:_MAX_KEYWORDS]
    words = {w.lower() for w in _WORD.findall(question)} - _STOPWORDS
    return sorted(words, key=lambda w: (-len(w), w))[:_MAX_KEYWORDS]


def _best_sentence(context: str, question: str) -> str:
    """The sentence of `context` containing most of the question's keywords.

    Only sentences around the first few occurrences of each keyword are examined, so the
    work is bounded whatever the context length.
    """
    keys = _keywords(question)
    if not keys:
        return ""
    lowered = context.lower()
    best, best_score = "", 0
    for key in keys:
        pos = lowered.find(key)
        for _ in range(_MAX_HITS):
            if pos < 0:
                break
            start, end = _sentence_bounds(lowered, pos)
            sentence = lowered[start:end]
            score = sum(1 for k in keys if k in sentence)
            if score > best_score:
                best, best_score = context[start:end].strip(), score
            pos = lowered.find(key, end)
    return best


def _sentence_bounds(text: str, pos: int) -> tuple[int, int]:
    lo = max(0, pos - _SENTENCE_SPAN)
    hi = min(len(text), pos + _SENTENCE_SPAN)
    start = max(text.rfind(sep, lo, pos) for sep in (". ", "\n", "。", "？", "！", "? ", "! "))
    start = lo if start < 0 else start + 1
    ends = [e for e in (text.find(sep, pos, hi) for sep in (". ", "\n", "。", "？", "！")) if e >= 0]
    end = min(ends) + 1 if ends else hi
    return start, end
