"""The names of MiniLongBench's estimation methods and the shipped default, without numpy:
the CLI's choices and the run options read them at parser build time (estimators/minilongbench.py
says what each method is)."""

from __future__ import annotations

# Every method; the first three need only IRT parameters (the release's files have them).
METHODS = ("irt", "direct", "blend", "category_irt", "ridge", "stack")
BASE_METHODS = METHODS[:3]
# The headline of `asyncbench minilongbench build` and so of the shipped parameters: the
# lowest error on models the build never saw (bench/minilongbench_unseen.md).
DEFAULT_METHOD = "stack"
# Folds of the build's cross-validation over its own models (stacking weights, intervals).
FOLDS = 5
