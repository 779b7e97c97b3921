"""`asyncbench run longbench --adaptive --target-se S`: LongBench asked adaptively.

The samples are those `longbench` loads (all 4,750, or what `--data-dir` holds); each is
an item of the MiniLongBench IRT model (`<data_dir>/minilongbench/irt_parameters.json`,
else the release's files) by its position in its dataset's file. The run asks a
stratified start set, then batch after batch the samples that most reduce the standard
error of the full-LongBench Overall per token (estimators/adaptive.py), through the
engine as any run (cache, ledger, --max-cost), scores them with the official metrics,
refits θ, and stops at the target standard error, at the end of the pool, or at the
budget. Samples never asked are booked "excluded" in the ledger.

The estimate (scores.estimate in run.json) is on the 0-1 scale, like MiniLongBench's.
The per-dataset misfit model needs the training models' per-sample scores
(`longbench_scores.npz` + `longbench_scores.json` beside the parameters, as in the
MiniLongBench release's data); without them the IRT curve is used alone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ...errors import UserError
from ...types import Sample, SampleResult, SampleStatus
from ..base import Ask, Round
from .benchmark import LongBench, aggregate_results
from .scores import LongBenchScores
from .table import FIRST_LINE_DATASETS

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from ...estimators.adaptive import AdaptiveTest

DEFAULT_BATCH = 16
DEFAULT_START = 1


def item_of(sample: Sample) -> int:
    """The sample's column in the 4,750-item table: its dataset's offset + its index."""
    from ...estimators.irt import dataset_slices

    dataset, _, index = sample.id.rpartition("/")
    where = dataset_slices().get(dataset)
    if where is None or not index.isdigit() or where.start + int(index) >= where.stop:
        raise UserError(f"sample {sample.id}: not a LongBench sample the IRT model knows (adaptive testing "
                        "needs the official LongBench files, in their order)")
    return int(where.start) + int(index)


def irt_score(result: SampleResult) -> float | None:
    """The score the IRT parameters were fitted on: the release's convention (no first-line
    cut for trec, triviaqa, samsum, lsht), as MiniLongBench's estimate uses."""
    if result.score is None or result.task not in FIRST_LINE_DATASETS:
        return result.score
    from .score import score_one

    return float(score_one(result.task, result.prediction or "", result.references, result.meta.get("all_classes"),
                           first_line_post=False))


def request_tokens(sample: Sample) -> float:
    """Tokens a request will cost, for the selection: the prompt (chars / 4, or 1.5 chars a
    token for Chinese) plus the answer budget. Only relative costs matter."""
    chars = len(sample.prompt or "") + sum(len(m.get("content", "")) for m in sample.messages or [])
    per_token = 1.5 if sample.meta.get("language") == "zh" else 4.0
    return chars / per_token + sample.max_tokens


@dataclass
class AdaptiveLongBench(LongBench):
    """LongBench with `administer`: the engine hands it the loaded samples and a way to
    ask a batch, and it decides which batches to ask."""

    data_dir: Path | None = None
    target_se: float = 0.01
    batch_size: int = DEFAULT_BATCH
    start_per_dataset: int = DEFAULT_START
    max_samples: int | None = None
    ADAPTIVE: ClassVar[bool] = True

    @classmethod
    def configured(cls, extra: Mapping[str, Any], data_dir: Path | None) -> AdaptiveLongBench:
        target = extra.get("target_se")
        if target is None:
            raise UserError("--adaptive needs --target-se S (the standard error of the 0-1 Overall to stop at, "
                            "e.g. 0.01)")
        return cls(data_dir=data_dir, target_se=float(target),
                   batch_size=int(extra.get("adaptive_batch") or DEFAULT_BATCH),
                   start_per_dataset=int(DEFAULT_START if extra.get("adaptive_start") is None
                                         else extra["adaptive_start"]),
                   max_samples=None if extra.get("adaptive_max_samples") is None
                   else int(extra["adaptive_max_samples"]))

    def new_test(self, samples: list[Sample]) -> AdaptiveTest:
        import numpy as np

        from ...estimators.adaptive import AdaptiveTest, Prior, Residuals
        from ...estimators.irt import N_ITEMS, default_params_dir, load_params

        params_dir = default_params_dir(self.data_dir)
        params = load_params(params_dir)
        prior = Prior.for_params(params)
        residuals = None
        train = training_scores(params_dir)
        if train is not None:
            residuals = Residuals.from_training(params, train, prior)
        cost = np.ones(N_ITEMS)
        items = [item_of(s) for s in samples]
        for s, j in zip(samples, items):
            cost[j] = request_tokens(s)
        return AdaptiveTest(params, np.asarray(items, dtype=int), cost, self.target_se, prior, residuals,
                            batch_size=self.batch_size, start_per_dataset=self.start_per_dataset,
                            max_items=self.max_samples)

    async def administer(self, samples: list[Sample], ask: Ask) -> tuple[list[Round], dict[str, object]]:
        """Ask batches until the test stops; returns the rounds and the test's report."""
        by_item = {item_of(s): s for s in samples}
        test = self.new_test(samples)
        rounds: list[Round] = []
        while batch := test.next_batch():
            chosen = [by_item[j] for j in batch]
            generated, results = await ask(chosen)
            rounds.append((chosen, generated, results))
            test.observe(batch, [irt_score(r) if r.status.has_answer else None for r in results])
            if any(r.status == SampleStatus.SKIPPED_BUDGET for r in results):  # not sent: --max-cost reached
                test.stop("budget")
        report = test.report()
        report.pop("by_dataset", None)
        return rounds, {"adaptive": {k: report[k] for k in ("stop_reason", "trajectory", "target_se", "pool_size")},
                        "excluded_reason": "not asked: the adaptive test stopped before it (--adaptive)"}

    def aggregate(self, results: list[SampleResult], report: dict[str, Any] | None = None) -> LongBenchScores:
        """LongBench's numbers over the samples asked (not full-LongBench scores: they are
        the samples the test chose), and the estimate of the full-LongBench Overall."""
        out = aggregate_results(results, by_length=False)
        out["estimate"] = self.estimate(results, (report or {}).get("adaptive") or {})
        return self.SCORES.of(out)

    def estimate(self, results: list[SampleResult], how: dict[str, Any]) -> dict[str, Any]:
        scored = [r for r in results if r.status.has_answer and r.score is not None]
        if not scored:
            return {"available": False, "method": "adaptive", "reason": "no sample was scored"}
        from ...types import Sample as _Sample

        samples = [_Sample(id=r.sample_id, task=r.task, prompt="", answers=[]) for r in results]
        test = self.new_test(samples)
        items = [item_of(s) for s in samples]
        test.observe(items, [irt_score(r) if r.status.has_answer else None for r in results])
        est = test.report()
        # tokens of the requests the test needed, each distinct request once (two samples
        # with the same prompt are sent once): what a first run pays, whatever the cache holds
        distinct = {r.key or r.sample_id: r for r in scored}.values()
        est.update({"stop_reason": how.get("stop_reason", est["stop_reason"]),
                    "trajectory": how.get("trajectory", []), "pool_size": how.get("pool_size"),
                    "prompt_tokens": sum(r.prompt_tokens for r in distinct),
                    "completion_tokens": sum(r.completion_tokens for r in distinct)})
        est["tokens"] = est["prompt_tokens"] + est["completion_tokens"]
        est.pop("by_dataset", None)
        return est


def training_scores(params_dir: Path) -> NDArray[np.float64] | None:
    """The training models' (m, 4750) score rows, when the parameters' directory has the
    release's per-sample scores (longbench_scores.npz with models, and the training
    model names in longbench_scores.json); else None."""
    import numpy as np

    npz, names = params_dir / "longbench_scores.npz", params_dir / "longbench_scores.json"
    if not npz.is_file() or not names.is_file():
        return None
    data = np.load(npz, allow_pickle=False)
    train = set(json.loads(names.read_text()).get("irt_train_models") or [])
    rows = [i for i, m in enumerate(data["models"]) if str(m) in train]
    if len(rows) <= 2:
        return None
    scores: NDArray[np.float64] = data["scores"][rows]
    return scores
