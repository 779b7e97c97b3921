"""Make a small BAMBOO predictions file from the reference data and score it.

    python examples/bamboo_score.py [DATA_DIR]     # default: ../shared/data

For the first three rows of every dataset file it writes one well-formed correct answer,
one well-formed wrong answer and one malformed answer (private_eval: the row's canonical
solution, an empty completion, and one that uses an original library name), to
examples/bamboo_predictions.jsonl, then runs `asyncbench score bamboo` on it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from asyncbench.benchmarks.bamboo.benchmark import RELEASE_FILES, read_jsonl
from asyncbench.cli import main as cli

HERE = Path(__file__).resolve().parent


def predictions(name: str, row: dict, k: int) -> dict:
    """k = 0: correct, 1: wrong, 2: malformed."""
    dataset = name.rsplit("_", 1)[0]
    out = {"dataset": name}
    if dataset == "private_eval":
        pred = [row["canonical_solution"][0], "", " np.array([1])"][k]
        return out | {"pred": pred, "task_id": row["task_id"]}
    answer = row["answer"]
    if dataset in ("showssort", "reportsumsort"):
        shift = 1 if dataset == "reportsumsort" else 0  # events are numbered from 1 in the prompt
        order = [answer, answer[::-1], answer[:3]][k]
        pred = " > ".join(f"[{i + shift}]" for i in order)
    elif dataset in ("senhallu", "abshallu"):
        pred = ["Yes." if answer else "No.", "No." if answer else "Yes.", "The hypothesis is"][k]
    elif dataset in ("paperqa", "meetingqa"):
        pred = [f"{answer}.", "D" if answer != "D" else "A", "I cannot tell"][k]
    else:
        pred = [f"{answer}.", "Nobody", "\n" + str(answer)][k] if dataset != "altqa" else [str(answer), "1", "about then"][k]
    return out | {"pred": pred, "answer": answer}


def main() -> int:
    data = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE.parents[1] / "shared" / "data"
    target = HERE / "bamboo_predictions.jsonl"
    with open(target, "w", encoding="utf-8") as fh:
        for name in RELEASE_FILES:
            rows, _ = read_jsonl(data / "bamboo" / f"{name}.jsonl")
            for k, (_, row) in enumerate(rows[:3]):
                fh.write(json.dumps(predictions(name, row, k), ensure_ascii=False) + "\n")
    print(f"wrote {target}")
    return cli(["score", "bamboo", "--predictions", str(target), "--data-dir", str(data)])


if __name__ == "__main__":
    sys.exit(main())
