"""LongBench's datasets, one row each: every fact the loaders, the metrics and the
aggregation need, in one place (they all read this table).

Sources: the official repository's `eval.py` (`dataset2metric`, the first-line
post-processing list), `pred.py` (the datasets sent without a chat template) and the
paper's Table 1 (categories, languages). Prompt templates and output lengths stay data
(`dataset2prompt.json`, `dataset2maxlen.json`), read from the data directory.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LongBenchDataset:
    name: str
    # eval.py's dataset2metric, by our metric registry's name
    metric: str
    # "en", "zh", or "code" (code counts towards both Overall EN and Overall ZH)
    language: str
    category: str
    # eval.py keeps only the prediction's first line (few-shot: the model continues the pattern)
    first_line: bool = False
    # pred.py wraps the prompt in the model's chat template ("chat models are better off
    # without build prompts on these tasks" for the few-shot and code ones)
    chat: bool = True
    # one of the 13 English datasets of LongBench-E (published as `<name>_e`)
    in_e: bool = False


SINGLE, MULTI, SUMM, FEW, SYNTH, CODE = ("Single-Doc QA", "Multi-Doc QA", "Summarization", "Few-shot Learning",
                                         "Synthetic", "Code")

# In LongBench's order (the paper's tables).
DATASETS: tuple[LongBenchDataset, ...] = (
    LongBenchDataset("narrativeqa", "qa_f1", "en", SINGLE),
    LongBenchDataset("qasper", "qa_f1", "en", SINGLE, in_e=True),
    LongBenchDataset("multifieldqa_en", "qa_f1", "en", SINGLE, in_e=True),
    LongBenchDataset("multifieldqa_zh", "qa_f1_zh", "zh", SINGLE),
    LongBenchDataset("hotpotqa", "qa_f1", "en", MULTI, in_e=True),
    LongBenchDataset("2wikimqa", "qa_f1", "en", MULTI, in_e=True),
    LongBenchDataset("musique", "qa_f1", "en", MULTI),
    LongBenchDataset("dureader", "rouge_zh", "zh", MULTI),
    LongBenchDataset("gov_report", "rouge", "en", SUMM, in_e=True),
    LongBenchDataset("qmsum", "rouge", "en", SUMM),
    LongBenchDataset("multi_news", "rouge", "en", SUMM, in_e=True),
    LongBenchDataset("vcsum", "rouge_zh", "zh", SUMM),
    LongBenchDataset("trec", "classification", "en", FEW, first_line=True, chat=False, in_e=True),
    LongBenchDataset("triviaqa", "qa_f1", "en", FEW, first_line=True, chat=False, in_e=True),
    LongBenchDataset("samsum", "rouge", "en", FEW, first_line=True, chat=False, in_e=True),
    LongBenchDataset("lsht", "classification", "zh", FEW, first_line=True, chat=False),
    LongBenchDataset("passage_count", "count", "en", SYNTH, in_e=True),
    LongBenchDataset("passage_retrieval_en", "retrieval", "en", SYNTH, in_e=True),
    LongBenchDataset("passage_retrieval_zh", "retrieval_zh", "zh", SYNTH),
    LongBenchDataset("lcc", "code_sim", "code", CODE, chat=False, in_e=True),
    LongBenchDataset("repobench-p", "code_sim", "code", CODE, chat=False, in_e=True),
)

BY_NAME: dict[str, LongBenchDataset] = {d.name: d for d in DATASETS}
NAMES: tuple[str, ...] = tuple(BY_NAME)
CATEGORIES: dict[str, tuple[str, ...]] = {}
for _d in DATASETS:
    CATEGORIES.setdefault(_d.category, ())
    CATEGORIES[_d.category] += (_d.name,)
CATEGORY_OF: dict[str, str] = {d.name: d.category for d in DATASETS}
DATASET_METRIC: dict[str, str] = {d.name: d.metric for d in DATASETS}
ZH_DATASETS: frozenset[str] = frozenset(d.name for d in DATASETS if d.language == "zh")
CODE_DATASETS: frozenset[str] = frozenset(d.name for d in DATASETS if d.language == "code")
FIRST_LINE_DATASETS: frozenset[str] = frozenset(d.name for d in DATASETS if d.first_line)
NO_CHAT_TEMPLATE: frozenset[str] = frozenset(d.name for d in DATASETS if not d.chat)
# pred.py generates samsum with "\n" as an end token after at least one new token ("prevent
# illegal output on samsum (model endlessly repeat '\nDialogue')"): its prompt rules' newline
# stop (benchmark.py's RULES; LongBench-E's samples keep the base dataset as their task).
NEWLINE_STOP: frozenset[str] = frozenset({"samsum"})
LONGBENCH_E_DATASETS: tuple[str, ...] = tuple(d.name for d in DATASETS if d.in_e)


def first_line(prediction: str) -> str:
    """eval.py's few-shot post-processing: drop leading newlines, keep the first line."""
    return prediction.lstrip("\n").split("\n")[0]
