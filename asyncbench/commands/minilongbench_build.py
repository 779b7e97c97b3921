"""Rebuild MiniLongBench anchors and IRT parameters from many models' LongBench scores.

SCORES.npz holds `scores` (models × 4,750, in [0, 1], the release's column order). Item
representations start from `--embeddings` (an .npy of per-sample text embeddings, PCA'd
to --dims here) or from `--texts` (JSONL, one {"text": ...} per sample, embedded with
--embedder). Writes irt_parameters.json, anchors.json and estimator.json to --out, which
`asyncbench estimate minilongbench --params` reads.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


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


def _load_npy(path: str, what: str) -> Any:
    import numpy as np

    from ..errors import UserError

    try:
        return np.load(path)
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: cannot read {what} ({exc})") from None


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
    from ..estimators.build import Recipe, build, get_embedder
    from ..estimators.irt import N_ITEMS

    data = _load_npy(args.scores, "scores")
    scores = data["scores"] if hasattr(data, "files") else data
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
    base = Recipe() if args.recipe == "release" else Recipe.improved()
    base.dims, base.ratio, base.seed = args.dims, args.ratio, args.seed
    result = build(scores, emb, base)
    out = Path(args.out)
    result.params.save(out, {"recipe": args.recipe, "thresholds": result.thresholds, "train_loss": result.train_loss})
    print(f"wrote {len(result.params.anchors)} anchors and IRT parameters (d={args.dims}) to {out}")
    return 0
