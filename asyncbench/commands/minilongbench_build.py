"""Rebuild MiniLongBench anchors and IRT parameters from many models' LongBench scores.

SCORES.npz holds `scores` (models × 4,750, in [0, 1], the release's column order). Item
representations start from `--embeddings` (an .npy of per-sample text embeddings, PCA'd
to --dims here) or from `--texts` (JSONL, one {"text": ...} per sample, embedded with
--embedder). Writes irt_parameters.json, anchors.json and estimator.json to --out, which
`asyncbench estimate minilongbench --params` reads.

`--anchors FILE` keeps those anchors (the release's 237, whose prompts a run has) and fits
only the item parameters; `--cost-aware` instead selects anchors for a length budget
(`--budget`, a share of the full benchmark), once, from a fit on all the given models.
Beyond the release's IRT the build fits every method of estimators/minilongbench.py (the
per-category IRT, the anchor regression) and runs a `--interval-folds`-fold
leave-models-out cross-validation of itself over the given models, whose held-out
estimates choose the stacking weights and calibrate each method's 90% intervals
(estimators/unseen.py `learn`, estimators/conformal.py). Writes category_irt.json too.
Same inputs, same bytes: the parameters shipped in asyncbench/data/minilongbench are
rebuilt by the command in its README.md.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from ..estimators.methods import DEFAULT_METHOD, FOLDS, METHODS

if TYPE_CHECKING:
    import numpy as np


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scores", required=True, metavar="SCORES.npz")
    parser.add_argument("--embeddings", metavar="FILE.npy", help="per-sample text embeddings (N × any dim)")
    parser.add_argument("--texts", metavar="FILE.jsonl", help="per-sample texts to embed instead")
    parser.add_argument("--embedder", default="openai:text-embedding-3-small", help="openai[:model] or st:MODEL")
    parser.add_argument("--out", required=True, metavar="DIR")
    parser.add_argument("--recipe", choices=("release", "improved"), default="improved")
    parser.add_argument("--dims", type=int, default=10)
    parser.add_argument("--ratio", type=float, default=0.95, help="fraction of samples removed (p)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--anchors", metavar="anchors.json", help="keep these anchors; fit only the item parameters")
    parser.add_argument("--cost-aware", action="store_true", help="choose anchors for the --budget of length")
    parser.add_argument("--budget", type=float, default=0.03, help="--cost-aware: share of the full benchmark's length")
    parser.add_argument("--method", choices=METHODS, default=DEFAULT_METHOD,
                        help=f"headline estimate (default {DEFAULT_METHOD}: the lowest error on models the build "
                             "never saw, bench/minilongbench_unseen.md)")
    parser.add_argument("--interval-folds", type=int, default=FOLDS,
                        help="CV folds over the models that choose the stacking weights and calibrate the intervals")


def _load_npy(path: str, what: str, member: str | None = None) -> np.ndarray:
    """The array in a .npy file, or `member` of a .npz archive."""
    import numpy as np

    from ..errors import UserError

    try:
        loaded = np.load(path)
        array = loaded[member] if member is not None and isinstance(loaded, np.lib.npyio.NpzFile) else loaded
    except (OSError, ValueError, KeyError) as exc:
        raise UserError(f"{path}: cannot read {what} ({exc})") from None
    if not isinstance(array, np.ndarray):
        raise UserError(f"{path}: expected one array of {what} (a .npy file), not an archive")
    return array


def _read_texts(path: Path) -> list[str]:
    from ..errors import UserError

    texts = []
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        raise UserError(f"{path}: no such file; pass --texts FILE.jsonl") from None
    for no, line in enumerate(lines, 1):
        try:
            texts.append(str(json.loads(line)["text"]))
        except (json.JSONDecodeError, KeyError, TypeError):
            raise UserError(f'{path}:{no}: expected a JSON object with a "text" field') from None
    return texts


def main(args: argparse.Namespace) -> int:
    from ..errors import UserError
    from ..estimators.build import Recipe, build, get_embedder, single_thread
    from ..estimators.irt import N_ITEMS, token_cost
    from ..estimators.unseen import learn

    scores = _load_npy(args.scores, "scores", member="scores")
    if scores.ndim != 2 or scores.shape[1] != N_ITEMS or scores.min() < 0 or scores.max() > 1:
        raise UserError(f"{args.scores}: expected `scores` of shape (models, {N_ITEMS}) in [0, 1], got {scores.shape}")
    if args.embeddings:
        emb = _load_npy(args.embeddings, "embeddings")
    elif args.texts:
        emb = get_embedder(args.embedder).embed(_read_texts(Path(args.texts)))
    else:
        raise UserError("pass --embeddings FILE.npy or --texts FILE.jsonl for the item initialisation")
    if emb.ndim != 2 or emb.shape[0] != N_ITEMS:
        raise UserError(f"embeddings must have one row per sample ({N_ITEMS}), got {emb.shape}")
    if args.anchors and args.cost_aware:
        raise UserError("--anchors keeps given anchors and --cost-aware selects new ones: pass one of them")
    if not 0 < args.budget < 1:
        raise UserError(f"--budget is a share of the full benchmark's length in (0, 1), got {args.budget}")
    if not 2 <= args.interval_folds <= len(scores):
        raise UserError(f"--interval-folds must be 2..{len(scores)} (the number of models), got {args.interval_folds}")
    base = Recipe() if args.recipe == "release" else Recipe.improved()
    base.dims, base.ratio, base.seed = args.dims, args.ratio, args.seed
    if args.cost_aware:
        base.selection, base.budget = "cost", args.budget
    anchors = _read_anchors(Path(args.anchors)) if args.anchors else build(scores, emb, base).params.anchors
    with single_thread():  # small products: one BLAS thread, the same bytes whatever the core count
        learnt = learn(scores, emb, anchors, base, args.interval_folds, args.seed)
    out = Path(args.out)
    learnt.estimator(args.method).save(out, {"recipe": args.recipe, "selection": "given" if args.anchors else base.selection,
                                "budget": base.budget, "models": int(len(scores)),
                                "interval_folds": args.interval_folds})
    cost = token_cost(anchors)
    print(f"wrote {len(anchors)} anchors ({100 * cost['fraction']:.2f}% of the full benchmark's length) "
          f"and estimator parameters (IRT d={args.dims}, headline {args.method}) to {out}")
    return 0


def _read_anchors(path: Path) -> np.ndarray:
    """Sorted anchor indices from an anchors.json (`sorted_anchors` or `anchors`)."""
    import numpy as np

    from ..errors import UserError
    from ..estimators.irt import N_ITEMS

    try:
        raw = json.loads(path.read_text())
        anchors = np.unique(np.asarray(raw.get("sorted_anchors") or raw["anchors"], dtype=int))
    except FileNotFoundError:
        raise UserError(f"{path}: no such file; pass --anchors anchors.json") from None
    except (json.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError):
        raise UserError(f'{path}: expected {{"anchors": [column indices]}}') from None
    if len(anchors) == 0 or anchors.min() < 0 or anchors.max() >= N_ITEMS:
        raise UserError(f"{path}: anchors must be column indices in [0, {N_ITEMS})")
    return anchors
