"""The neutral prompt rules: how any benchmark's samples become prompts and its answers
predictions, owned by the run path and declared per benchmark as one typed value.

    rules            PromptRules (a benchmark's `RULES`), BudgetTable, ReleaseRequests,
                     PostProcess
    budget           the prompt budget (model2maxlen.json, context - 500, room for the answer)
    context_table    the shipped model-context table the budget falls back on
    cut              the middle cut (pred.py's decode(ids[:half]) + decode(ids[-half:]))
    official_models  the official open models: identified from the server, their chat
                     formats (build_chat), the newline stop rule, their post-processing

Benchmarks import its types (it sits below `asyncbench.benchmarks` in the layers);
planning and prompting (asyncbench/run/) read a benchmark's rules and never its name.
"""

from .rules import BudgetTable, PostProcess, PromptRules, ReleaseArgs, ReleaseRequests

__all__ = ["BudgetTable", "PostProcess", "PromptRules", "ReleaseArgs", "ReleaseRequests"]
