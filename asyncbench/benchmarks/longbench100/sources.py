"""Where 100-LongBench's articles come from: LongBench-format records, read from a directory.

The official generator draws real and noise articles from LongBench, L-Eval, CNN/DailyMail
and rag-mini-bioasq, all as (context, input, answers) records. We read the same shape:

- `<dir>/longbench100/*.jsonl` and `<dir>/longbench/data/*.jsonl`: LongBench-format jsonl
  (one {"context", "input", "answers"} per line), named by dataset (qasper.jsonl,
  legal_contract_qa.jsonl, cnn_dailymail.jsonl, ...);
- `<dir>/minilongbench/samples/MiniLongBench_<dataset>.json`: filled LongBench prompts,
  split back into context and question with `<dir>/longbench/dataset2prompt.json`;
- `<dir>/bamboo/*_4k.jsonl`: BAMBOO documents, used only as general-domain noise (the
  role CNN/DailyMail plays in the paper), as are the Wikipedia paragraphs inside
  LongBench's passage_retrieval_en and passage_count contexts.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import UserError

GENERAL = "general"  # pseudo-dataset of noise-only documents
_BAMBOO_DOCS = ("paperqa_4k", "meetingqa_4k", "senhallu_4k", "reportsumsort_4k")
_PARAGRAPH_SOURCES = ("passage_retrieval_en", "passage_count")
NEEDED_EXTRA = frozenset(_PARAGRAPH_SOURCES)  # read to harvest GENERAL paragraphs


@dataclass
class Record:
    """One LongBench-format record: an article (or passages), a question, references."""

    dataset: str
    context: str
    input: str = ""
    answers: list[str] = field(default_factory=list)


def split_passages(context: str) -> list[str]:
    """The passages of a multi-document context ("Passage 1:\\n...Passage 2:\\n...")."""
    return [p.strip() for p in re.split(r"Passage \d+:\n", context) if p.strip()]


def _read_jsonl(path: Path, dataset: str) -> list[Record]:
    records = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line, strict=False)
                answers = row.get("answers") or []
                records.append(Record(dataset, str(row["context"]), str(row.get("input") or ""), [str(a) for a in answers]))
            except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
                raise UserError(f"{path}:{lineno}: not a LongBench-format record ({exc}); each line needs a JSON object with 'context', 'input' and 'answers'") from None
    return records


def _template_regex(template: str) -> re.Pattern[str]:
    parts = re.split(r"(\{context\}|\{input\})", template)
    pattern = "".join("(?P<context>.*)" if p == "{context}" else "(?P<input>.*?)" if p == "{input}" else re.escape(p) for p in parts)
    return re.compile(r"\s*" + pattern + r"\s*", re.DOTALL)


def _read_minilongbench(path: Path, dataset: str, templates: dict[str, str]) -> list[Record]:
    """Records from a MiniLongBench samples file, un-filling the LongBench prompt.

    The release filled some datasets with another dataset's template (qasper with the
    multi-doc QA one), so every template is tried, the dataset's own first.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    order = [templates[dataset]] if dataset in templates else []
    order += [t for name, t in templates.items() if name != dataset and "{context}" in t]
    # The release also fixed LongBench's "asconcisely" typo in the narrativeqa template.
    patterns = [_template_regex(v) for t in order for v in dict.fromkeys([t, t.replace("asconcisely", "as concisely")])]
    records = []
    for key, entry in data.items():
        prompt = entry.get("origin_prompt", "")
        for pat in patterns:
            m = pat.fullmatch(prompt)
            if m:
                gold = entry.get("gold")
                answers = gold.get("answers", []) if isinstance(gold, dict) else list(gold or [])
                records.append(Record(dataset, m.group("context"), m.groupdict().get("input") or "", [str(a) for a in answers]))
                break
        else:
            raise UserError(f"{path}: entry {key!r} does not match any template in longbench/dataset2prompt.json")
    return records


def _paragraphs(records: list[Record]) -> list[Record]:
    out = []
    for r in records:
        out += [Record(GENERAL, p.strip()) for p in re.split(r"Paragraph \d+: ", r.context) if len(p.strip()) > 200]
    return out


def load_sources(data_dir: Path, wanted: set[str]) -> dict[str, list[Record]]:
    """The records of the `wanted` datasets under `data_dir`, by dataset name, plus the
    noise-only documents under GENERAL."""
    found: dict[str, list[Record]] = {}
    for folder in (data_dir / "longbench100", data_dir / "longbench" / "data"):
        for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
            if path.stem in wanted:
                found.setdefault(path.stem, []).extend(_read_jsonl(path, path.stem))
    samples = data_dir / "minilongbench" / "samples"
    if samples.is_dir():
        tpl_path = data_dir / "longbench" / "dataset2prompt.json"
        if not tpl_path.is_file():
            raise UserError(f"{tpl_path} is missing; MiniLongBench samples need LongBench's dataset2prompt.json to be split into context and question")
        templates = json.loads(tpl_path.read_text(encoding="utf-8"))
        for path in sorted(samples.glob("MiniLongBench_*.json")):
            name = path.stem.removeprefix("MiniLongBench_")
            if name in wanted and name not in found:
                found[name] = _read_minilongbench(path, name, templates)
    general = _paragraphs([r for name in _PARAGRAPH_SOURCES for r in found.pop(name, [])])
    for name in _BAMBOO_DOCS:
        path = data_dir / "bamboo" / f"{name}.jsonl"
        if path.is_file():
            general += [Record(GENERAL, row.context) for row in _read_bamboo(path)]
    if general:
        found.setdefault(GENERAL, []).extend(general)
    return found


def _read_bamboo(path: Path) -> list[Record]:
    out = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                out.append(Record(GENERAL, str(json.loads(line, strict=False)["content"]).strip()))
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise UserError(f"{path}:{lineno}: not a BAMBOO record with 'content' ({exc})") from None
    return out
