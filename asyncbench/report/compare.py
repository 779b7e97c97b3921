"""Two stored runs of one benchmark, compared on the samples both scored.

Per task, category and overall (whatever the benchmark's scores tree holds): A, B, the
difference B - A, its 95% paired bootstrap interval (the same resampled samples for both
runs, through the benchmark's own averaging: `Benchmark.resampling_plan`), and a
two-sided paired permutation p-value (each sample's, or shared-context cluster's, two
results swapped with probability 1/2; for a mean this is the sign-flip test). One rule
marks a difference, stated in every output (RULE): it is "distinguishable" when its
interval excludes 0, whatever p says. The two are different procedures and can disagree
near the edge (WHY_DISAGREE): a row where the interval excludes 0 but p >= 0.05, or
covers 0 but p < 0.05, is flagged (`Line.tests_agree`), so an interval that excludes 0
at p = 0.12 is never shown without a word. See estimators.intervals.

Samples are matched by (task, sample id); failed, skipped and excluded samples are not
scored, so a sample one run did not score is left out of both sides. The result is plain
data (`Comparison.to_dict`), for the CLI, the report and any Python caller.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from ..benchmarks import parse_benchmark
from ..errors import UserError
from ..ledger import SETTLED
from ..store import Store
from ..types import SampleResult, SampleStatus
from .baselines import benchmark_family
from .data import RunReport

NOT_DISTINGUISHABLE = "not distinguishable"
ALPHA = 0.05  # the test's level matching the 95% interval
RULE = ("distinguishable: the 95% paired bootstrap interval of B - A excludes 0 (the one rule for the mark); "
        f"p, the paired permutation test's, is shown beside it and agrees when p < {ALPHA} exactly where the "
        "interval excludes 0")
WHY_DISAGREE = ("the two tests may disagree near the edge: the interval resamples the observed differences around "
                "their mean (with few samples, or few that differ, a resample that wipes the difference out is rare "
                "and the percentile interval is narrow), while the permutation test asks how often swapping each "
                "sample's two results gives a difference as large (with few samples that differ, often); rows "
                "marked 'tests disagree' are near the edge: read them as not settled, and score more samples")
TESTS_DISAGREE = "tests disagree"


@dataclass
class Line:
    """One compared number: where it sits in the scores tree ("overall", "by_task/qasper")."""

    key: str
    a: float
    b: float
    diff: float
    ci: list[float]
    p: float
    distinguishable: bool  # RULE: the interval excludes 0

    @property
    def tests_agree(self) -> bool:
        """Whether the permutation test at ALPHA says what the interval says."""
        return (self.p < ALPHA) == self.distinguishable

    @property
    def disagreement(self) -> str:
        """"" when the tests agree, else what each says (the row's flag)."""
        if self.tests_agree:
            return ""
        said = "excludes 0" if self.distinguishable else "covers 0"
        return f"{TESTS_DISAGREE}: interval {said}, p {self.p:.4f} {'>=' if self.p >= ALPHA else '<'} {ALPHA}"


@dataclass
class Comparison:
    benchmark: str
    run_a: str
    run_b: str
    label_a: str
    label_b: str
    n_matched: int
    n_only_a: int  # scored by A only: left out
    n_only_b: int
    method: str
    lines: list[Line]
    rule: str = RULE
    why_disagree: str = WHY_DISAGREE

    def to_dict(self) -> dict[str, object]:
        out = asdict(self)
        for line, raw in zip(self.lines, out["lines"]):
            raw["tests_agree"], raw["disagreement"] = line.tests_agree, line.disagreement
        return out


# A scored sample as compare reads it: (score, prediction, meta JSON).
Scored = tuple[float, "str | None", "str | None"]


def _scored(run: RunReport) -> dict[tuple[str, str], Scored]:
    """The run's scored samples by (task, sample id), as its aggregate saw them: from its
    loaded sample rows, or, loaded without them, from its cache file."""
    if run.samples or run.cache is None:
        return {(r.task, r.sample_id): (float(r.score), r.prediction, r.meta_json) for r in run.samples
                if r.status in SETTLED and r.score is not None}
    return {(task, sid): (score, pred, meta) for task, sid, score, pred, meta in Store(run.cache).runs.scored(run.run_id)}


def _results(scored: dict[tuple[str, str], Scored], keys: list[tuple[str, str]]) -> list[SampleResult]:
    """SampleResults of `keys`, for the benchmark's resampling plan; samples with the same
    meta share one parsed copy (the plan only reads it)."""
    metas: dict[str | None, dict[str, object]] = {}
    out = []
    for task, sid in keys:
        score, prediction, meta = scored[(task, sid)]
        parsed = metas.get(meta)
        if parsed is None:
            parsed = metas[meta] = json.loads(meta or "{}")
        out.append(SampleResult(sample_id=sid, task=task, status=SampleStatus.ANSWERED, prediction=prediction, score=score,
                                meta=parsed))
    return out


def _flatten(tree: dict[str, object], prefix: str = "") -> list[Line]:
    lines = []
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and "diff" in value:
            lines.append(Line(path, value["a"], value["b"], value["diff"], value["ci"], value["p"],
                              value["distinguishable"]))
        elif isinstance(value, dict):
            lines += _flatten(value, path + "/")
    return lines


def compare_runs(a: RunReport, b: RunReport, seed: int | None = None) -> Comparison:
    """B - A on the samples both runs scored; a UserError when they are runs of different
    benchmarks or share no scored sample."""
    from ..estimators import intervals

    family = benchmark_family(a.benchmark)
    if family != benchmark_family(b.benchmark):
        raise UserError(f"run {a.run_id[:12]} is {a.benchmark} and run {b.run_id[:12]} is {b.benchmark}: "
                        "compare needs two runs of the same benchmark")
    scored_a, scored_b = _scored(a), _scored(b)
    matched = sorted(scored_a.keys() & scored_b.keys())
    if not matched:
        raise UserError(f"runs {a.run_id[:12]} and {b.run_id[:12]} have no scored sample in common "
                        "(matched by task and sample id)")
    benchmark, _ = parse_benchmark(a.benchmark)
    plan_a = benchmark.resampling_plan(_results(scored_a, matched))  # one run's results alive at a time
    plan_b = benchmark.resampling_plan(_results(scored_b, matched))
    try:
        tree = intervals.compare(plan_a, plan_b, seed=intervals.SEED if seed is None else seed)
    except ValueError:
        raise UserError(f"runs {a.run_id[:12]} and {b.run_id[:12]} group their common samples differently "
                        "(different data?); compare runs made on the same data") from None
    kind = benchmark.SCORES  # e.g. MiniLongBench's overall is its estimate: these are the anchors' category-mean averages
    tree = {kind.compared_key(k): v for k, v in tree.items()}
    method = (f"paired bootstrap ({intervals.N_RESAMPLES} resamples, 95% percentile interval) and paired "
              f"permutation test ({intervals.N_RESAMPLES} swaps), on {len(matched)} samples scored by both")
    return Comparison(family, a.run_id, b.run_id, a.label, b.label, len(matched), len(scored_a) - len(matched),
                      len(scored_b) - len(matched), method, _flatten(tree))


def render_text(c: Comparison) -> list[str]:
    """One line per compared number, aligned; "not distinguishable" where the interval
    covers 0, and the rule under them; where the permutation test says otherwise, the row
    is flagged and why the two may disagree follows."""
    head = [f"{c.benchmark}: B - A, A = {c.label_a}, B = {c.label_b}",
            f"{c.method}" + (f"; left out: {c.n_only_a} scored by A only, {c.n_only_b} by B only"
                             if c.n_only_a or c.n_only_b else "")]
    width = max(len(line.key) for line in c.lines)
    body = [f"{line.key:<{width}}  A {line.a:7.2f}  B {line.b:7.2f}  B-A {line.diff:+7.2f}  "
            f"95% CI [{line.ci[0]:+.2f}, {line.ci[1]:+.2f}]  p {line.p:.4f}"
            + ("" if line.distinguishable else f"  {NOT_DISTINGUISHABLE}")
            + (f"  ({line.disagreement})" if line.disagreement else "") for line in c.lines]
    flagged = sum(not line.tests_agree for line in c.lines)
    tail = [c.rule + "."] + ([f"{flagged} row(s) marked '{TESTS_DISAGREE}': {c.why_disagree}."] if flagged else [])
    return head + body + tail
