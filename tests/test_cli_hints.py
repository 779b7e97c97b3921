"""One line that says what is wrong: "did you mean" for typos, and a server that is down
named before anything about context lengths."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from asyncbench.cli import main as cli_main


def error_of(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as exit_info:
        cli_main(list(argv))
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    return err


def test_mistyped_command_and_options_get_a_suggestion(capsys: pytest.CaptureFixture[str]) -> None:
    assert "(did you mean 'run'?)" in error_of(capsys, "rn", "minilongbench")
    assert "(did you mean 'minilongbench'?)" in error_of(capsys, "estimate", "minilongbnch")
    assert "(did you mean '--max-cost'?)" in error_of(capsys, "run", "minilongbench", "--max-cots", "1")
    assert "(did you mean '--format'?)" in error_of(capsys, "samples", "abc", "--formt", "csv")
    assert "did you mean" not in error_of(capsys, "run", "minilongbench", "--zzzzzz")  # nothing close: no guess


def test_mistyped_benchmark_and_dataset_get_a_suggestion(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                          shared_data: Path) -> None:
    common = ["--model", "sim", "--cache", str(tmp_path / "c.duckdb"), "--data-dir", str(shared_data)]
    assert cli_main(["run", "minilongbnch", *common]) == 2
    assert "unknown benchmark 'minilongbnch' (did you mean 'minilongbench'?)" in capsys.readouterr().err
    assert cli_main(["run", "minilongbench:qaspr", *common]) == 2
    assert "unknown minilongbench dataset 'qaspr' (did you mean 'qasper'?)" in capsys.readouterr().err


@pytest.mark.parametrize(("model", "suffix"), [("openai-compat:my-model", "/v1"), ("tgi:my-model", "")])
def test_a_down_server_is_named_before_any_context_length(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                          shared_data: Path, model: str, suffix: str) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert cli_main(["run", "minilongbench", "--model", model, "--base-url",
                     f"http://127.0.0.1:{port}{suffix}", "--cache", str(tmp_path / "c.duckdb"), "--data-dir",
                     str(shared_data), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"cannot reach 127.0.0.1:{port} (connection refused)" in err and "context length" not in err
    assert f"--base-url http://127.0.0.1:{port}{suffix}" in err and len(err.strip().splitlines()) == 1
