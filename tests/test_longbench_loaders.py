"""LongBench / LongBench-E / MiniLongBench loaders against real data.

LongBench's full data is not available offline, so we rebuild LongBench-format jsonl
files from the MiniLongBench release: each `origin_prompt` is the official template filled
with a LongBench row, so splitting it back at the template's literal parts gives a row
whose refilled prompt must reproduce the release's prompt byte for byte.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import anyio
import pytest

from asyncbench.benchmarks.base import LoadOptions
from asyncbench.benchmarks.longbench import prompts
from asyncbench.benchmarks.longbench.benchmark import (
    LONGBENCH_DATASETS,
    LONGBENCH_E_DATASETS,
    MINILONGBENCH_DATASETS,
    NO_CHAT_TEMPLATE,
    LongBench,
    LongBenchE,
    MiniLongBench,
)
from asyncbench.errors import UserError
from asyncbench.types import UNSET, Sample, SampleResult, SampleStatus

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
pytestmark = pytest.mark.skipif(not (DATA / "minilongbench" / "samples").is_dir(), reason="../shared/data not available")


def _mini(dataset: str) -> list[dict]:
    entries = json.loads((DATA / "minilongbench" / "samples" / f"MiniLongBench_{dataset}.json").read_text(encoding="utf-8"))
    return [entries[k] for k in sorted(entries, key=int)]


def _split(template: str, prompt: str) -> dict[str, str] | None:
    """context and input such that template.format(...) == prompt, or None if the
    release's prompt does not follow this template."""
    pre, rest = template.split("{context}")
    mid, suf = rest.split("{input}") if "{input}" in rest else (rest, "")
    if not (prompt.startswith(pre) and prompt.endswith(suf)):
        return None
    body = prompt[len(pre) : len(prompt) - len(suf)]
    if "{input}" not in rest:
        return {"context": body[: len(body) - len(mid)], "input": ""} if body.endswith(mid) else None
    cut = body.rfind(mid)
    return None if cut < 0 else {"context": body[:cut], "input": body[cut + len(mid) :]}


def _row(dataset: str, i: int, entry: dict, template: str) -> tuple[dict, bool]:
    gold = entry["gold"]
    answers, classes = (gold["answers"], gold["all_classes"]) if isinstance(gold, dict) else (gold, None)
    parts = _split(template, entry["origin_prompt"])
    exact = parts is not None
    parts = parts or {"context": entry["origin_prompt"], "input": "What is this?"}
    row = {**parts, "answers": answers, "length": 1000 * (i + 1), "dataset": dataset, "language": "x",
           "all_classes": classes, "_id": f"{dataset}-{i}"}  # fmt: skip
    return row, exact


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[bool]]]:
    """A data dir with LongBench- and LongBench-E-format files built from MiniLongBench,
    the official tables, and a link to the MiniLongBench release. Returns the dir and, per
    dataset, which rows reproduce the release's prompt exactly."""
    root = tmp_path_factory.mktemp("data")
    (root / "longbench" / "data").mkdir(parents=True)
    for name in (prompts.PROMPT_FILE, prompts.MAXLEN_FILE):
        shutil.copy(DATA / "longbench" / name, root / "longbench" / name)
    (root / "minilongbench").symlink_to(DATA / "minilongbench")
    table = json.loads((DATA / "longbench" / prompts.PROMPT_FILE).read_text(encoding="utf-8"))
    exact: dict[str, list[bool]] = {}
    for dataset in LONGBENCH_DATASETS:
        rows = [_row(dataset, i, e, table[dataset]) for i, e in enumerate(_mini(dataset))]
        exact[dataset] = [ok for _, ok in rows]
        lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r, _ in rows)
        (root / "longbench" / "data" / f"{dataset}.jsonl").write_text(lines, encoding="utf-8")
        if dataset in LONGBENCH_E_DATASETS:
            (root / "longbench" / "data" / f"{dataset}_e.jsonl").write_text(lines, encoding="utf-8")
    return root, exact


def test_longbench_prompts_reproduce_release(data_dir):
    root, exact = data_dir
    samples = LongBench().load(LoadOptions(data_dir=root))
    maxlen = json.loads((DATA / "longbench" / prompts.MAXLEN_FILE).read_text())
    assert len(samples) == 237
    assert [s.task for s in samples] == [d for d in LONGBENCH_DATASETS for _ in _mini(d)]
    n_exact = 0
    for dataset in LONGBENCH_DATASETS:
        mine = [s for s in samples if s.task == dataset]
        for i, (s, entry) in enumerate(zip(mine, _mini(dataset))):
            assert s.id == f"{dataset}/{i}"
            assert s.max_tokens == maxlen[dataset]
            assert s.chat == (dataset not in NO_CHAT_TEMPLATE)
            assert s.meta["_id"] == f"{dataset}-{i}" and s.meta["length"] == 1000 * (i + 1)
            if exact[dataset][i]:
                assert s.prompt == entry["origin_prompt"]
                n_exact += 1
    # The release's narrativeqa, qasper and multi_news prompts deviate slightly from the
    # official table (spacing, hotpotqa's template, a trailing newline); all others match.
    assert n_exact == 237 - sum(len(_mini(d)) for d in ("narrativeqa", "qasper", "multi_news"))
    trec = next(s for s in samples if s.task == "trec")
    assert trec.meta["all_classes"] and trec.answers == _mini("trec")[0]["gold"]["answers"]
    assert {s.chat for s in samples if s.task in ("lcc", "samsum")} == {False}


def test_task_selection_and_limit(data_dir):
    root, _ = data_dir
    samples = LongBench().load(LoadOptions(data_dir=root, tasks=["qasper", "hotpotqa"], limit=3))
    # canonical order, not the order asked for; limit applies per dataset
    assert [s.id for s in samples] == ["qasper/0", "qasper/1", "qasper/2", "hotpotqa/0", "hotpotqa/1", "hotpotqa/2"]
    with pytest.raises(UserError, match="unknown longbench dataset 'hotpotqa_x'"):
        LongBench().load(LoadOptions(data_dir=root, tasks=["hotpotqa_x"]))


def test_longbench_e(data_dir):
    root, _ = data_dir
    samples = LongBenchE().load(LoadOptions(data_dir=root))
    assert {s.task for s in samples} == set(LONGBENCH_E_DATASETS)
    picked = LongBenchE().load(LoadOptions(data_dir=root, tasks=["hotpotqa_e", "trec"]))
    assert {s.task for s in picked} == {"hotpotqa", "trec"}
    assert picked[0].id == "hotpotqa_e/0" and picked[0].meta["dataset"] == "hotpotqa"
    with pytest.raises(UserError, match="longbench-e dataset 'lsht'"):
        LongBenchE().load(LoadOptions(data_dir=root, tasks=["lsht"]))


def test_bad_files_are_user_errors(tmp_path, data_dir):
    root, _ = data_dir
    (tmp_path / "longbench" / "data").mkdir(parents=True)
    for name in (prompts.PROMPT_FILE, prompts.MAXLEN_FILE):
        shutil.copy(root / "longbench" / name, tmp_path / "longbench" / name)
    path = tmp_path / "longbench" / "data" / "hotpotqa.jsonl"
    good = json.dumps({"input": "q", "context": "c", "answers": ["a"], "length": 3})
    path.write_text(good + "\n{not json\n")
    with pytest.raises(UserError, match=r"hotpotqa\.jsonl:2: not valid JSON"):
        LongBench().load(LoadOptions(data_dir=tmp_path, tasks=["hotpotqa"]))
    path.write_text(good + "\n" + json.dumps({"context": "c", "answers": ["a"]}) + "\n")
    with pytest.raises(UserError, match=r"hotpotqa\.jsonl:2: field 'input'"):
        LongBench().load(LoadOptions(data_dir=tmp_path, tasks=["hotpotqa"]))
    path.write_text(json.dumps({"input": "q", "context": "c", "answers": [1]}) + "\n")
    with pytest.raises(UserError, match="'answers' must be a list of strings"):
        LongBench().load(LoadOptions(data_dir=tmp_path, tasks=["hotpotqa"]))
    with pytest.raises(UserError, match=r"qasper\.jsonl not found"):
        LongBench().load(LoadOptions(data_dir=tmp_path, tasks=["qasper"]))


def test_minilongbench_release(data_dir):
    root, _ = data_dir
    samples = MiniLongBench().load(LoadOptions(data_dir=root))
    anchors = json.loads((DATA / "minilongbench" / "anchors.json").read_text())["sorted_anchors"]
    assert len(samples) == 237
    assert [s.meta["position"] for s in samples] == list(range(237))
    assert [s.meta["anchor"] for s in samples] == anchors
    expected = [(d, e) for d in MINILONGBENCH_DATASETS for e in _mini(d)]
    for s, (dataset, entry) in zip(samples, expected):
        assert s.task == dataset and s.prompt == entry["origin_prompt"]
    lsht = [s for s in samples if s.task == "lsht"]
    assert all(s.meta["all_classes"] and not s.chat for s in lsht)
    picked = MiniLongBench().load(LoadOptions(data_dir=root, tasks=["trec"], limit=2))
    assert [s.id for s in picked] == ["trec/0", "trec/1"]
    assert picked[0].meta["position"] == [s.task for s in samples].index("trec")
    with pytest.raises(UserError, match="--data-dir"):
        MiniLongBench().load(LoadOptions())


def test_minilongbench_gold_as_python_repr(tmp_path):
    """Some copies of the release store `gold` as the str() of a list or dict."""
    (tmp_path / "longbench").symlink_to(DATA / "longbench")
    samples_dir = tmp_path / "minilongbench" / "samples"
    samples_dir.mkdir(parents=True)
    for dataset in MINILONGBENCH_DATASETS:
        entries = {str(i): {**e, "gold": repr(e["gold"])} for i, e in enumerate(_mini(dataset))}
        (samples_dir / f"MiniLongBench_{dataset}.json").write_text(json.dumps(entries, ensure_ascii=False), encoding="utf-8")
    samples = MiniLongBench().load(LoadOptions(data_dir=tmp_path, tasks=["trec", "musique"]))
    trec = _mini("trec")[0]["gold"]
    first = {s.task: s for s in reversed(samples)}
    assert first["trec"].answers == trec["answers"] and first["trec"].meta["all_classes"] == trec["all_classes"]
    assert first["musique"].answers == _mini("musique")[0]["gold"] and "anchor" not in first["musique"].meta
    bad = samples_dir / "MiniLongBench_trec.json"
    bad.write_text(json.dumps({"0": {"origin_prompt": "p", "gold": "[unclosed"}}))
    with pytest.raises(UserError, match=r"MiniLongBench_trec\.json: entry '0': 'gold'"):
        MiniLongBench().load(LoadOptions(data_dir=tmp_path, tasks=["trec"]))


def _copy_official(url: str, target: Path) -> None:
    """Stand-in for downloading an official table: copy it from ../shared/data."""
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(DATA / "longbench" / target.name, target)


def test_config_cached_download(tmp_path, monkeypatch):
    """Without tables in the data dir, the official files are fetched once into the cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    fetched: list[str] = []

    def fake_download(url: str, target: Path) -> None:
        fetched.append(url)
        _copy_official(url, target)

    monkeypatch.setattr(prompts, "_download", fake_download)
    first = prompts.config_dir(tmp_path)
    second = prompts.config_dir(None)
    assert first == second == tmp_path / "cache" / "asyncbench" / "longbench" / "config"
    assert sorted(fetched) == sorted(prompts.CONFIG_URL.format(name=n) for n in (prompts.PROMPT_FILE, prompts.MAXLEN_FILE))
    assert prompts.load_config(None).max_new_tokens("gov_report") == 512


def _metrics_available() -> bool:
    try:
        import asyncbench.benchmarks.longbench.aggregate
        import asyncbench.benchmarks.longbench.metrics  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not _metrics_available(), reason="metrics/aggregate modules not written yet")
def test_score_and_aggregate(data_dir):
    root, _ = data_dir
    samples = MiniLongBench().load(LoadOptions(data_dir=root, tasks=["trec", "hotpotqa"], limit=2))
    trec = [s for s in samples if s.task == "trec"]
    # official scoring keeps only the first line for trec
    preds = [s.answers[0] + "\nQuestion: anything\nType: Food" if s.task == "trec" else "zzz unrelated" for s in samples]
    scored = anyio.run(MiniLongBench().score, samples, preds, None)
    # the first line is what the metric read (the per-sample view's parsed answer); hotpotqa reads it whole
    assert [sc.parsed for s, sc in zip(samples, scored) if s.task == "trec"] == [s.answers[0] for s in trec]
    assert all(sc.parsed is UNSET for s, sc in zip(samples, scored) if s.task == "hotpotqa")
    scores = [sc.value for sc in scored]
    assert [sc for s, sc in zip(samples, scores) if s.task == "trec"] == [1.0] * len(trec)
    assert all(sc == 0.0 for s, sc in zip(samples, scores) if s.task == "hotpotqa")
    results = [
        SampleResult(sample_id=s.id, task=s.task, status=SampleStatus.ANSWERED, score=sc, truncated_tokens=7 * i, meta=s.meta)
        for i, (s, sc) in enumerate(zip(samples, scores))
    ] + [SampleResult(sample_id="x", task="trec", status=SampleStatus.FAILED)]
    agg = MiniLongBench().aggregate(results).to_json()
    assert agg["truncated"] == {"n": len(samples) - 1, "tokens": 7 * sum(range(len(samples)))}
    assert agg["n_failed"] == 1 and agg["n_scored"] == len(samples)
    assert agg["by_task"]["trec"] == pytest.approx(100.0) and agg["by_task"]["hotpotqa"] == pytest.approx(0.0)
    assert "by_length" not in agg


@pytest.mark.skipif(not _metrics_available(), reason="metrics/aggregate modules not written yet")
def test_score_rejects_length_mismatch():
    sample = Sample(id="a", task="trec", prompt="p", answers=["x"])
    with pytest.raises(ValueError, match="1 samples but 0 predictions"):
        anyio.run(LongBench().score, [sample], [], None)


@pytest.mark.skipif(not _metrics_available(), reason="metrics/aggregate modules not written yet")
def test_longbench_e_aggregates_by_length(data_dir):
    root, _ = data_dir
    samples = LongBenchE().load(LoadOptions(data_dir=root, tasks=["hotpotqa"]))
    # the generated rows have length 1000 * (index + 1): 3 short, 4 medium, 6 long
    results = [
        SampleResult(sample_id=s.id, task=s.task, status=SampleStatus.ANSWERED, score=1.0 if s.meta["length"] < 4000 else 0.0, meta=s.meta)
        for s in samples
    ]
    agg = LongBenchE().aggregate(results).to_json()
    assert agg["by_task"]["hotpotqa"] == pytest.approx(round(100 * 3 / 13, 2))
    bins = agg["by_length"]
    assert bins["0-4k"]["by_task"]["hotpotqa"] == 100.0
    assert bins["4-8k"]["by_task"]["hotpotqa"] == 0.0 and bins["8k+"]["by_task"]["hotpotqa"] == 0.0
    assert agg["overall_zh"] is None and agg["truncated"] == {"n": 0, "tokens": 0}
    failed = LongBenchE().aggregate([SampleResult(sample_id="a", task="hotpotqa", status=SampleStatus.FAILED, truncated_tokens=5)]).data
    assert failed["overall"] is None and failed["n_failed"] == 1 and failed["truncated"] == {"n": 1, "tokens": 5}


def test_hub_zip_is_unpacked_once(tmp_path, monkeypatch, data_dir):
    """Without --data-dir, data.zip (here a local stand-in, no network) is unpacked into
    the cache and read from there on later loads."""
    import zipfile

    from asyncbench.benchmarks.longbench import benchmark as longbench

    root, _ = data_dir
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(prompts, "_download", _copy_official)
    archive = tmp_path / "data.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(root / "longbench" / "data" / "hotpotqa.jsonl", "data/hotpotqa.jsonl")
    calls: list[Path] = []
    monkeypatch.setattr(longbench, "_fetch_zip", lambda r: calls.append(r) or archive)
    first = LongBench().load(LoadOptions(tasks=["hotpotqa"]))
    again = LongBench().load(LoadOptions(tasks=["hotpotqa"]))
    assert len(calls) == 1 and len(first) == len(again) == len(_mini("hotpotqa"))
    assert first[0].prompt == _mini("hotpotqa")[0]["origin_prompt"]
    with pytest.raises(UserError, match=r"qasper\.jsonl is not in the hub's data\.zip"):
        LongBench().load(LoadOptions(tasks=["qasper"]))
