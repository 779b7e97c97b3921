"""The eight 100-LongBench tasks: their sources, prompts, output budgets and metrics.

Sources follow the paper's Table 2 and its official generator (LongBench names; L-Eval,
CNN/DailyMail and rag-mini-bioasq are read when supplied in LongBench format). Prompts
follow the paper's appendix A.3 slot for slot ({context}, {instruction}, {input}) and keep
its answer cues ("The answer is Passage", "The final answer is:"), in our own words.
Output budgets are the official dataset2maxlen values.
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
    template: str
    max_tokens: int
    metric: str
    real: tuple[str, ...]
    noise: tuple[str, ...]


_QA = (
    "Answer the question using the passages below. Give only the answer, with no other words.\n\n"
    "The passages come from many different fields.\n\n{context}\n\n"
    "Answer the question from the passages, following this instruction:\n{instruction}\n\n"
    "Question: {input}\nGive only the answer, with no other words. Answer:\n"
)

TASKS: dict[str, TaskSpec] = {
    t.name: t
    for t in (
        TaskSpec(
            "kv_retrieval",
            "Below are passages drawn from many different fields.\n\n{context}\n\n"
            "Some key-value pairs are hidden in these passages; find the value that belongs to the key. "
            "Read the question about these pairs and answer it correctly. {input} ",
            64, "uuid", (), SINGLE_QA + NEWS + (GENERAL,),
        ),
        TaskSpec(
            "counting_stars",
            "Below are passages drawn from many different fields.\n\n{context}\n\n"
            "Output only the result, with no explanation. Read the question below and answer it correctly: {input}\n"
            "The final answer is: ",
            32, "number", (), SINGLE_QA + NEWS + (GENERAL,),
        ),
        TaskSpec(
            "passage_retrieval",
            "Below are passages from many different fields, followed by a summary of one of them. "
            "Work out which passage the summary was written from.\n\n{context}\n\n"
            "Here is the summary.\n\n{input}\n\n"
            'Give the number of the passage the summary comes from, in the form "Passage 1", "Passage 2", and so on.\n\n'
            "The answer is Passage ",
            32, "number", SUMMARY + NEWS, SUMMARY + NEWS + (GENERAL,),
        ),
        TaskSpec(
            "passage_count",
            "Below are paragraphs drawn from many different fields, and some of them may appear more than once. "
            "Read them carefully and work out how many different paragraphs there are once duplicates are removed; "
            "that is, how many distinct paragraphs are there in total?\n\n{context}\n\n"
            "Give the number of distinct paragraphs after removing duplicates. Output only the number, such as 1, 2, 3 and so on.\n\n"
            "The final answer is: ",
            32, "number", (), SINGLE_QA + NEWS + (GENERAL,),
        ),
        TaskSpec("single_doc_qa", _QA, 256, "qa", SINGLE_QA, SINGLE_QA),
        TaskSpec("multi_doc_qa", _QA, 256, "qa", MULTI_QA, SINGLE_QA),
        TaskSpec(
            "single_doc_sum",
            "Several passages follow, but only some of them are to be summarised.\n\n{context}\n\n"
            "Follow these instructions:\n1.{input}\n2.Leave out every passage not named above.\n"
            "3.For the named passage, cover its main arguments or conclusions, the key evidence or data behind them, "
            "and anything new or distinctive it says.\n"
            "4.Keep the summary short and limited to the most important information. "
            "Now write the summary of the named passage, following these instructions closely.\nSummary:\n",
            512, "summary", SUMMARY, SUMMARY,
        ),
        TaskSpec(
            "multi_doc_sum",
            "Several passages follow, but only some of them are to be summarised.\n\n{context}\n\n"
            "Follow these instructions:\n1.{input}\n2.Leave out every passage not named above.\n"
            "3.Summarise all the named passages together in a few short sentences rather than one by one, covering their "
            "main arguments or conclusions, the key evidence or data behind them, and anything new or distinctive they say.\n"
            "4.Keep the summary short and limited to the most important information. "
            "Now merge the main ideas of the named passages into one coherent summary, following these instructions closely.\n\n"
            "Summary:\n",
            512, "summary", MULTI_SUMMARY, SUMMARY,
        ),
    )
}

# Asked of the evaluated model without any passages, to detect prior knowledge (QA only).
NO_CONTEXT_QA = (
    "Answer the question as briefly as you can, in a single phrase or sentence if possible. "
    'If it cannot be answered, write "unanswerable". Do not explain. Question: {input}\n'
    "Give only the answer, with no other words. Answer:\n "
)
