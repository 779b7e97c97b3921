"""The eight 100-LongBench tasks: their sources and metrics.

Sources follow the paper's Table 2 and its official generator (LongBench names; L-Eval,
CNN/DailyMail and rag-mini-bioasq are read when supplied in LongBench format). The
prompts ({context}, {instruction}, {input}) and output budgets are the release's
`dataset2prompt.json` and `dataset2maxlen.json`, read as data (release.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from .sources import GENERAL

SINGLE_QA = ("qasper", "multifieldqa_en", "narrativeqa", "multidoc_qa", "legal_contract_qa", "financial_qa", "natural_question", "scientific_qa")
MULTI_QA = ("hotpotqa", "2wikimqa", "musique", "rag-mini-bioasq")
SUMMARY = ("gov_report", "qmsum", "patent_summ", "tv_show_summ", "review_summ", "meeting_summ")
MULTI_SUMMARY = ("multi_news_e", "multi_news")
NEWS = ("cnn_dailymail",)  # news with highlights: real and noise for passage retrieval


@dataclass(frozen=True)
class TaskSpec:
    """One task. `metric`: "uuid" (last UUID), "number" (first integer), "qa" or
    "summary" (LLM judge). `real`/`noise`: source datasets of the answer-bearing and the
    distractor articles (GENERAL: noise-only documents, see sources.py)."""

    name: str
    metric: str
    real: tuple[str, ...]
    noise: tuple[str, ...]


TASKS: dict[str, TaskSpec] = {
    t.name: t
    for t in (
        TaskSpec("kv_retrieval", "uuid", (), SINGLE_QA + NEWS + (GENERAL,)),
        TaskSpec("counting_stars", "number", (), SINGLE_QA + NEWS + (GENERAL,)),
        TaskSpec("passage_retrieval", "number", SUMMARY + NEWS, SUMMARY + NEWS + (GENERAL,)),
        TaskSpec("passage_count", "number", (), SINGLE_QA + NEWS + (GENERAL,)),
        TaskSpec("single_doc_qa", "qa", SINGLE_QA, SINGLE_QA),
        TaskSpec("multi_doc_qa", "qa", MULTI_QA, SINGLE_QA),
        TaskSpec("single_doc_sum", "summary", SUMMARY, SUMMARY),
        TaskSpec("multi_doc_sum", "summary", MULTI_SUMMARY, SUMMARY),
    )
}
