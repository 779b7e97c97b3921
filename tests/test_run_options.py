"""Run options are declared once (config.py: a field of one of RunConfig's parts, with
`option(...)`): the CLI's flags, `asyncbench.evaluate`'s keywords, a set file's keys and
`--resume`'s overrides are made from those declarations.

The acceptance test: a toy run option declared here, in this file alone, is a flag of
`asyncbench run`, a keyword of `evaluate`, a key of a set file (shared and per model) and
an override of `--resume`, and each way reaches the RunConfig, checked by its declared
range with one clear line."""

from __future__ import annotations

import argparse
import json
import typing
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from asyncbench import config
from asyncbench.api import Options, _config
from asyncbench.cli import build_parser
from asyncbench.cli import main as cli_main
from asyncbench.commands.run import run_config
from asyncbench.config import Kind, Limits, RunConfig, option, run_options, whole
from asyncbench.errors import UserError
from asyncbench.run.eval_set import load_set_file, model_keys
from asyncbench.store import Store


@dataclass(frozen=True)
class ToyLimits(Limits):
    """Limits with one option more: the whole declaration of a new run option."""

    max_widgets: int | None = option(None, "at most N widgets per sample (a toy option)", metavar="N",
                                     check=whole(1, 99), resume=True, per_model=True)


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setitem(config.PARTS, "limits", ToyLimits)
    yield


def _args(argv: list[str]) -> argparse.Namespace:
    args = build_parser("run").parse_args(["run", *argv])
    args.model = (args.model or ["auto"])[0]
    return args


def _run_help() -> str:
    run = build_parser("run")._subparsers._group_actions[0].choices["run"]  # type: ignore[union-attr]
    return " ".join(run.format_help().split())


def _widgets(cfg: RunConfig) -> object:
    assert isinstance(cfg.limits, ToyLimits)
    return cfg.limits.max_widgets


def test_a_run_option_declared_in_one_place_is_a_flag_a_keyword_a_set_key_and_a_resume_override(
        toy: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"id": "q", "prompt": "Q?", "answers": ["a"]}) + "\n")
    bench = f"jsonl:{data}"

    # the CLI: the flag, with its help, reaches the config; a default where not given
    assert "--max-widgets N at most N widgets per sample" in _run_help()
    assert _widgets(run_config(_args([bench, "--model", "sim", "--max-widgets", "7"]))) == 7
    assert _widgets(run_config(_args([bench, "--model", "sim"]))) is None
    # its range, as one line and exit 2, before anything starts
    assert cli_main(["run", bench, "--model", "sim", "--max-widgets", "500"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "asyncbench: error: --max-widgets must be a whole number from 1 to 99 (got 500)"

    # the Python API: a keyword (checked by the same declaration)
    assert _widgets(_config(bench, "sim", {"max_widgets": 5})) == 5  # type: ignore[typeddict-unknown-key]
    with pytest.raises(UserError, match="--max-widgets must be a whole number"):
        _config(bench, "sim", {"max_widgets": 0})  # type: ignore[typeddict-unknown-key]

    # a set file: under [options] for every model, in a [[models]] entry for one
    assert "max_widgets" in model_keys()
    set_file = tmp_path / "set.toml"
    set_file.write_text(f'benchmarks = ["{bench}"]\n[options]\nmax_widgets = 3\n'
                        '[[models]]\nmodel = "sim"\n[[models]]\nmodel = "openai:gpt-4o-mini"\nmax_widgets = 9\n')
    assert [_widgets(c) for c in load_set_file(set_file)] == [3, 9]

    # --resume: the stored value, replaced by the command line's (declared resume=True)
    cfg = RunConfig.build(bench, "sim", {"max_widgets": 4, "limit": 1})
    stored = cfg.flat()
    assert stored["max_widgets"] == 4
    cache = tmp_path / "c.duckdb"
    with Store(cache) as store:
        store.runs.start_run("abc123", bench, "sim", stored)
    resumed = run_config(_args(["--resume", "abc123", "--cache", str(cache), "--max-widgets", "8"]))
    assert _widgets(resumed) == 8 and resumed.limits.limit == 1 and resumed.benchmark == bench


def test_without_the_toy_option_it_is_nowhere(tmp_path: Path) -> None:
    """The toy option lives in the test's PARTS only: the shipped declarations lack it."""
    assert "max_widgets" not in run_options()
    with pytest.raises(SystemExit):
        build_parser("run").parse_args(["run", "minilongbench", "--max-widgets", "7"])
    with pytest.raises(UserError, match="unknown option 'max_widgets'"):
        _config("minilongbench", "sim", {"max_widgets": 7})  # type: ignore[typeddict-unknown-key]


def _api_type(name: str) -> object:
    """The type evaluate's keyword takes for a run option: its declared type, not None
    (leave it out instead), a list as any sequence, a path as text or a Path."""
    opt = run_options()[name]
    if opt.shape.kind is Kind.LIST:
        return Sequence[str]
    if opt.how.path:
        return str | Path
    args = [a for a in typing.get_args(opt.hint) if a is not type(None)]
    return args[0] if typing.get_origin(opt.hint) is not typing.Literal and args else opt.hint


@pytest.mark.parametrize("name", sorted(run_options()))
def test_the_python_apis_typed_keywords_are_the_declarations(name: str) -> None:
    """api.Options is written out for type checkers (PEP 692); it must say what the
    declarations say, key for key and type for type."""
    assert typing.get_type_hints(Options)[name] == _api_type(name)


def test_every_run_option_is_typed_for_the_python_api() -> None:
    from asyncbench.benchmarks import all_options

    assert set(typing.get_type_hints(Options)) == set(run_options()) | set(all_options())


def test_resume_takes_only_the_declared_overrides(tmp_path: Path) -> None:
    """A resumed run keeps what decides its results (model, limit, temperature...) and
    takes from the command line only the options declared resume=True."""
    cfg = RunConfig.build("minilongbench", "sim", {"limit": 2, "temperature": 0.5, "concurrency": 3,
                                                   "stream": "off"})
    resumed = RunConfig.from_stored(cfg.flat(), {"limit": 9, "temperature": 1.0, "concurrency": 50,
                                                 "stream": "on", "backend": "local"})
    assert (resumed.limits.limit, resumed.generation.temperature, resumed.limits.concurrency) == (2, 0.5, 3)
    assert resumed.generation.stream == "on"
    overridable = {n for n, o in run_options().items() if o.how.resume}
    assert {"cache", "progress", "backend", "batch", "stream", "max_response_bytes"} <= overridable
    assert not {"limit", "temperature", "max_input_tokens", "tokenizer", "judge", "api"} & overridable


def test_a_stored_run_keeps_its_id_and_its_flat_settings() -> None:
    """The stored form is flat, key for key what RunConfig held before its parts (old
    runs resume), and the run id is the hash it always was."""
    cfg = RunConfig.build("minilongbench", "sim", {"base_urls": "http://h:1", "limit": 3})
    flat = cfg.flat()
    assert flat["base_urls"] == ("http://h:1",) and flat["limit"] == 3 and flat["timeout_s"] == 120.0
    assert RunConfig.from_stored(json.loads(json.dumps(flat)), {}) == cfg
    # recorded before the options were declared in parts (same settings, same id)
    assert cfg.run_id("e", "d", "openai-compat:sim") == "126320f4ef96"


def test_a_bad_value_or_a_misspelt_key_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    set_file = tmp_path / "set.toml"
    set_file.write_text('benchmarks = ["minilongbench"]\n[options]\nmax_costs = 3\n[[models]]\nmodel = "sim"\n')
    assert cli_main(["run", "--set", str(set_file)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown option 'max_costs'" in err[0]
    assert cli_main(["run", "minilongbench", "--model", "sim", "--temperature", "3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["asyncbench: error: --temperature must be a finite number at least 0 and at most 2 (got 3.0)"]


def test_a_set_files_models_may_set_what_they_always_could() -> None:
    assert set(model_keys()) == {"base_urls", "endpoint_id", "api", "rpm", "tpm", "concurrency", "max_input_tokens",
                                 "tokenizer", "official_model", "timeout_s", "max_attempts", "judge",
                                 "judge_base_urls"}
