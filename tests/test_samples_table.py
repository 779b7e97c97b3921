"""`asyncbench samples --format table` and the order of sample ids, on records built in
memory (the table is plain fixed-width text)."""

from __future__ import annotations

import io

from asyncbench.commands.samples import _print_table
from asyncbench.report.samples import SampleRecord, natural_key


def record(sample_id: str, prediction: str = "an answer " * 40, score: float | None = 0.5) -> SampleRecord:
    return SampleRecord("run", sample_id, sample_id.split("/")[0], "answered", score, prediction, None,
                        ["the reference " * 20], "prompt", None, 10, 2, 0.00012, 0.0, 12.3, 1, 0, None, "k")


def test_ids_sort_by_number_not_as_text() -> None:
    ids = ["2wikimqa/10", "2wikimqa/2", "2wikimqa/1", "qasper/0", "counting_stars/16k/3", "counting_stars/2k/3"]
    assert sorted(ids, key=natural_key) == ["2wikimqa/1", "2wikimqa/2", "2wikimqa/10", "counting_stars/2k/3",
                                            "counting_stars/16k/3", "qasper/0"]


def test_the_table_keeps_its_width_and_every_row() -> None:
    records = [record(f"task/{i}") for i in range(300)] + [record("task/300", score=None, prediction="")]
    out = io.StringIO()
    _print_table(records, out)
    lines = out.getvalue().splitlines()
    assert lines[0] == "301 samples (the files hold every field)" and len(lines) == 3 + 301
    assert max(len(line) for line in lines) <= 200  # a file is 200 columns wide
    assert lines[3].startswith("task/0 ") and " 0.500 an answer an answer" in lines[3] and "…" in lines[3]
    assert lines[3].endswith(" 0.00012     12")
    assert lines[-1].split()[:2] == ["task/300", "answered"]
