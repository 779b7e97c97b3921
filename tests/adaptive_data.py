"""A small LongBench-format data directory for adaptive-testing tests and the example.

`<root>/longbench/data/<dataset>.jsonl` with a few rows per dataset in the hub's format
(input, context, answers, length, dataset, language, all_classes, _id; short contexts),
the official prompt tables beside it, and `<root>/minilongbench/` linking the release's IRT
parameters and per-sample scores from the shared data directory.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from asyncbench.benchmarks.longbench.benchmark import LONGBENCH_DATASETS, language_of

TREC = ["Abbreviation", "Entity", "Description", "Human", "Location", "Numeric value"]
LSHT = ["体育", "财经", "科技", "娱乐"]


def _row(dataset: str, i: int, rng: random.Random) -> dict[str, object]:
    lang = language_of(dataset)
    city = rng.choice(["Paris", "Lyon", "Oslo", "Rome", "Bern"])
    if lang == "zh":
        context = "".join(f"段落{k + 1}：这是第{k + 1}段，讲述了城市{k}的故事。\n" for k in range(4 + i % 3))
        question, answer = "这个故事讲的是哪个城市？", f"城市{i % 4}"
    elif lang == "code":
        context = "".join(f"def f{k}(x):\n    return x + {k}\n\n" for k in range(5 + i % 4))
        question, answer = "", f"def f{5 + i % 4}(x):"
    else:
        context = " ".join(f"Paragraph {k + 1}: The museum of {city} opened in {1900 + 7 * k + i}." for k in range(5 + i % 3))
        question, answer = f"When did the museum of {city} open?", str(1900 + i)
    if dataset == "passage_retrieval_en":
        answer = f"Paragraph {1 + i % 5}"
    elif dataset == "passage_retrieval_zh":
        answer = f"段落{1 + i % 4}"
    elif dataset == "passage_count":
        answer = str(3 + i % 3)
    classes = TREC if dataset == "trec" else LSHT if dataset == "lsht" else None
    if classes:
        answer = classes[i % len(classes)]
    return {"input": question, "context": context, "answers": [answer], "length": len(context.split()),
            "dataset": dataset, "language": lang, "all_classes": classes, "_id": f"{dataset}-{i}"}


def make_longbench_dir(root: Path, shared: Path, per_dataset: int = 3, seed: int = 0) -> Path:
    rng = random.Random(seed)
    data = root / "longbench" / "data"
    data.mkdir(parents=True, exist_ok=True)
    for name in ("dataset2prompt.json", "dataset2maxlen.json", "model2maxlen.json"):
        (root / "longbench" / name).write_text((shared / "longbench" / name).read_text())
    for dataset in LONGBENCH_DATASETS:
        rows = [_row(dataset, i, rng) for i in range(per_dataset)]
        (data / f"{dataset}.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    mini = root / "minilongbench"
    mini.mkdir(exist_ok=True)
    for name in ("irt_parameters.json", "anchors.json", "longbench_scores.npz", "longbench_scores.json"):
        target = mini / name
        if not target.exists():
            target.symlink_to((shared / "minilongbench" / name).resolve())
    return root


if __name__ == "__main__":
    import sys

    make_longbench_dir(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 3)
