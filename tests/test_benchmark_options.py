"""Benchmark options are declared once (each benchmark's OPTIONS): the CLI's flags and
`asyncbench.evaluate`'s keyword options are those declarations, with the same defaults."""

from __future__ import annotations

import typing
from collections.abc import Sequence
from typing import Literal

import pytest

from asyncbench.api import Options, _config
from asyncbench.benchmarks import all_options, benchmark_classes, names, parse_benchmark
from asyncbench.benchmarks.base import Benchmark, CliOption
from asyncbench.cli import build_parser
from asyncbench.commands.run import _extra


def _api_type(opt: CliOption) -> object:
    if opt.kind == "flag":
        return bool
    if opt.kind == "list":
        return Sequence[str] | str
    if opt.choices:
        return Literal[opt.choices]  # type: ignore[valid-type]
    return {"int": int, "float": float, "str": str}[opt.kind]


def _run_args(argv: list[str]) -> typing.Any:
    return build_parser().parse_args(["run", *argv])


@pytest.mark.parametrize("key", sorted(all_options()))
def test_every_declared_option_is_a_cli_flag_and_an_api_option(key: str) -> None:
    opt = all_options()[key]
    flags = {o: a for a in build_parser()._subparsers._group_actions[0].choices["run"]._actions  # type: ignore[union-attr]
             for o in a.option_strings}
    assert opt.flag in flags and flags[opt.flag].dest == key
    assert typing.get_type_hints(Options)[key] == _api_type(opt)


@pytest.mark.parametrize("name", names())
def test_cli_and_api_give_a_benchmark_the_same_defaults(name: str) -> None:
    cli = _extra(_run_args([name, "--model", "sim"]))
    api = _config(name, "sim", {}).extra
    assert cli == api
    for opt in benchmark_classes()[name].OPTIONS:
        assert cli.get(opt.key) == opt.default


def test_an_option_given_both_ways_reaches_the_run_alike() -> None:
    cli = _extra(_run_args(["100-longbench", "--model", "sim", "--lengths", "2k,4k", "--rows", "3"]))
    api = _config("100-longbench", "sim", {"lengths": ["2k", "4k"], "rows": 3}).extra
    assert cli == api and cli["lengths"] == ["2k", "4k"] and cli["rows"] == 3


def test_every_registered_benchmark_is_a_benchmark_and_parses() -> None:
    for name, cls in benchmark_classes().items():
        assert issubclass(cls, Benchmark)
        spec = "jsonl:/nonexistent.jsonl" if name == "jsonl" else name
        bench, tasks = parse_benchmark(spec)
        assert isinstance(bench, cls) and tasks is None
