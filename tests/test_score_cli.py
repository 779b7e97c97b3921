"""`asyncbench score longbench`: input validation, per-sample output, aggregation, wiring."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from asyncbench import cli
from asyncbench.benchmarks.longbench.aggregate import aggregate_longbench
from asyncbench.benchmarks.longbench.score import score_one
from asyncbench.commands import score_longbench as longbench_cli
from asyncbench.errors import UserError

SAMPLES = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "minilongbench" / "samples"


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    longbench_cli.add_arguments(parser)
    return longbench_cli.main(parser.parse_args(argv))


def write_lines(path: Path, records: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n"
                            for r in records), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def release_records() -> list[dict]:
    """All 237 MiniLongBench predictions as LongBench pred lines (with a made-up length)."""
    if not SAMPLES.is_dir():
        pytest.skip(f"reference data not found at {SAMPLES}")
    records = []
    for f in sorted(SAMPLES.glob("MiniLongBench_*.json")):
        dataset = f.stem.removeprefix("MiniLongBench_")
        entries = json.loads(f.read_text(encoding="utf-8"))
        for i in range(len(entries)):
            gold = entries[str(i)]["gold"]
            answers, classes = (gold["answers"], gold["all_classes"]) if isinstance(gold, dict) else (gold, None)
            records.append({"dataset": dataset, "pred": entries[str(i)]["prediction"], "answers": answers,
                            "all_classes": classes, "length": 1500 * i, "_id": f"{dataset}-{i}"})
    return records


def test_json_output_and_per_sample_file(tmp_path, capsys, release_records):
    preds = write_lines(tmp_path / "preds.jsonl", release_records)
    out = tmp_path / "scored.jsonl"
    assert run(["--predictions", str(preds), "--per-sample", str(out), "--json", "--jobs", "2"]) == 0
    report = json.loads(capsys.readouterr().out)

    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == len(release_records)
    expected = [score_one(r["dataset"], r["pred"], r["answers"], r["all_classes"]) for r in release_records]
    for line, record, score in zip(lines, release_records, expected):
        assert line == {**record, "score": score}  # input kept verbatim, in order
        assert 0.0 <= line["score"] <= 1.0
    agg = aggregate_longbench((r["dataset"], s, r["length"]) for r, s in zip(release_records, expected))
    assert report == agg
    assert len(report["by_task"]) == 21 and set(report["by_length"]) == {"0-4k", "4-8k", "8k+"}
    assert report["by_task"]["trec"] == round(
        100 * sum(s for r, s in zip(release_records, expected) if r["dataset"] == "trec")
        / sum(r["dataset"] == "trec" for r in release_records), 2)


def test_text_report(tmp_path, capsys):
    preds = write_lines(tmp_path / "p.jsonl", [
        {"dataset": "qasper_e", "pred": "Yes", "answers": ["yes"], "length": 3000},
        {"dataset": "qasper_e", "pred": "No", "answers": ["yes"], "length": 9000},
        {"dataset": "lcc_e", "pred": "x = 1", "answers": ["x = 1"], "length": 3000},
        "",  # blank lines are ignored
    ])
    assert run(["--predictions", str(preds), "--jobs", "1"]) == 0
    text = capsys.readouterr().out
    assert "qasper_e" in text and "50.00" in text and "100.00" in text
    assert "Overall  EN 75.00  ZH -  All 75.00" in text
    assert "Length 0-4k" in text and "Length 8k+" in text and "Length 4-8k" not in text


@pytest.mark.parametrize(
    "lines,message",
    [
        (['{"dataset": "qasper", "pred": "a", "answers": ["a"]}', "{not json"], r"p\.jsonl:2: not valid JSON"),
        (['["qasper", "a"]'], r"p\.jsonl:1: expected a JSON object"),
        (['{"dataset": "qasper", "answers": ["a"]}'], r"p\.jsonl:1: missing field\(s\) pred"),
        (['{"dataset": "qasper", "pred": null, "answers": ["a"]}'], r"p\.jsonl:1: 'dataset' and 'pred' must be strings"),
        (['{"dataset": "qasper", "pred": "a", "answers": "a"}'], r"p\.jsonl:1: 'answers' must be a list"),
        (['{"dataset": "qasper", "pred": "a", "answers": 3}'], r"p\.jsonl:1: 'answers' must be a list"),
        (['{"dataset": "qasper", "pred": "a", "answers": []}'], r"p\.jsonl:1: 'answers' is empty"),
        (['{"dataset": "trec", "pred": "a", "answers": ["Date"]}'], r"p\.jsonl:1: trec needs 'all_classes'"),
        (['{"dataset": "passage_retrieval_zh", "pred": "1", "answers": ["1"]}'], r"p\.jsonl:1: answer '1' does not name"),
        (['{"dataset": "qasper", "pred": "a", "answers": ["a"], "length": "long"}'], r"p\.jsonl:1: 'length' must be a number"),
        (['{"dataset": "hotpot_qa", "pred": "a", "answers": ["a"]}'], r"p\.jsonl:1: unknown LongBench dataset 'hotpot_qa'"),
        (["", "  "], r"p\.jsonl: no predictions found"),
    ],
)
def test_user_errors_name_file_and_line(tmp_path, lines, message):
    preds = write_lines(tmp_path / "p.jsonl", lines)
    with pytest.raises(UserError, match=message):
        run(["--predictions", str(preds)])


def test_missing_file_and_bad_jobs(tmp_path):
    with pytest.raises(UserError, match="cannot read predictions file"):
        run(["--predictions", str(tmp_path / "absent.jsonl")])
    preds = write_lines(tmp_path / "p.jsonl", [{"dataset": "qasper", "pred": "a", "answers": ["a"]}])
    with pytest.raises(UserError, match="--jobs must be at least 1"):
        run(["--predictions", str(preds), "--jobs", "0"])


def test_wired_into_asyncbench_cli(tmp_path, capsys):
    good = write_lines(tmp_path / "good.jsonl", [{"dataset": "triviaqa", "pred": "\nParis\nQuestion: x?",
                                                  "answers": ["Paris", "paris, france"]}])
    assert cli.main(["score", "longbench", "--predictions", str(good), "--json", "--jobs", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["by_task"] == {"triviaqa": 100.0}
    bad = write_lines(tmp_path / "bad.jsonl", ['{"dataset": "x"'])
    assert cli.main(["score", "longbench", "--predictions", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.jsonl:1" in err
