"""`asyncbench deploy compose`: the compose document's structure, the shipped files, the CLI.

No docker here: the checks are on the document itself, read back with PyYAML the way
docker compose would read it.
"""

from __future__ import annotations

import argparse
import io
import re
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest
import yaml

from asyncbench import deploy
from asyncbench.commands import deploy_compose
from asyncbench.errors import UserError

REPO = Path(__file__).resolve().parents[1]


def generate(argv: list[str]) -> str:
    """The command's stdout, in process."""
    parser = argparse.ArgumentParser()
    deploy_compose.add_arguments(parser)
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert deploy_compose.main(parser.parse_args(argv)) == 0
    return buf.getvalue()


def tgi_services(doc: dict) -> dict:
    return {k: v for k, v in doc["services"].items() if k.startswith("tgi-")}


def base_urls(command: list[str]) -> list[str]:
    return [command[i + 1] for i, arg in enumerate(command) if arg == "--base-url"]


def walk(node, path=()):
    """Every (path, value) pair of a nested document."""
    yield path, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from walk(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from walk(v, path + (i,))


@pytest.mark.parametrize("replicas", [1, 2, 4])
@pytest.mark.parametrize("gpus", [1, 2])
def test_structure(replicas: int, gpus: int) -> None:
    text = generate(["--replicas", str(replicas), "--gpus-per-replica", str(gpus), "--ray-workers", "3"])
    doc = yaml.safe_load(text)
    assert doc == deploy.compose_spec(replicas=replicas, gpus_per_replica=gpus, ray_workers=3)
    assert "version" not in doc
    services = doc["services"]

    tgi = tgi_services(doc)
    names = [f"tgi-{i}" for i in range(replicas)]
    assert list(tgi) == names
    seen: list[str] = []
    for i, name in enumerate(names):
        svc = tgi[name]
        (device,) = svc["deploy"]["resources"]["reservations"]["devices"]
        assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"]
        assert device["device_ids"] == [str(i * gpus + g) for g in range(gpus)]
        seen += device["device_ids"]
        assert svc["healthcheck"]["test"][-1] == "http://localhost:80/health"
        assert svc["shm_size"] == "1gb"
        assert {"type": "volume", "source": "hf-cache", "target": "/data"} in svc["volumes"]
        cmd = svc["command"]
        assert all(isinstance(a, str) for a in cmd)
        assert cmd[cmd.index("--model-id") + 1] == deploy.DEFAULT_MODEL_ID
        assert cmd[cmd.index("--port") + 1] == "80"
        assert ("--num-shard" in cmd) == (gpus > 1)
    assert sorted(seen, key=int) == [str(g) for g in range(replicas * gpus)]  # disjoint and complete

    evaluator = services["evaluator"]
    assert evaluator["depends_on"] == {**{n: {"condition": "service_healthy"} for n in names},
                                       "ray-head": {"condition": "service_started"}}
    cmd = evaluator["command"]
    assert cmd[:3] == ["asyncbench", "run", "longbench"]
    assert base_urls(cmd) == [f"http://{n}:80" for n in names]
    assert cmd[cmd.index("--backend") + 1] == "ray"
    assert cmd[cmd.index("--ray-address") + 1] == "ray://ray-head:10001"
    assert cmd[cmd.index("--cache") + 1].startswith("/results/")
    assert {"type": "volume", "source": "results", "target": "/results"} in evaluator["volumes"]

    assert services["ray-worker"]["deploy"]["replicas"] == 3
    assert services["ray-worker"]["command"][:3] == ["ray", "start", "--address=ray-head:6379"]
    assert "ray-head" in services["ray-worker"]["depends_on"]
    assert "--head" in services["ray-head"]["command"]

    # Every named volume a service uses is declared; nothing is published on the host.
    used = {v["source"] for svc in services.values() for v in svc.get("volumes", []) if v["type"] == "volume"}
    assert used == set(doc["volumes"]) == {"hf-cache", "results"}
    assert not [p for p, _ in walk(doc) if p and p[-1] == "ports"]
    # Tokens only ever come from the host environment.
    for path, value in walk(doc):
        if path and isinstance(path[-1], str) and re.search(r"TOKEN|KEY|SECRET", path[-1]) and \
                path[-1] != "RAY_AUTH_MODE":
            assert value == "${%s:-}" % path[-1] or value.startswith("${%s:?" % path[-1]), path
    assert not re.search(r"hf_[A-Za-z0-9]{8,}|sk-[A-Za-z0-9]{8,}", text)


def test_data_dir_is_a_read_only_bind() -> None:
    doc = yaml.safe_load(generate(["--data-dir", "/srv/shared/data"]))
    evaluator = doc["services"]["evaluator"]
    assert evaluator["environment"]["ASYNCBENCH_DATA_DIR"] == "/benchdata"
    assert {"type": "bind", "source": "/srv/shared/data", "target": "/benchdata", "read_only": True} \
        in evaluator["volumes"]


@pytest.mark.parametrize("kwargs, flag", [
    ({"replicas": 0}, "--replicas"),
    ({"gpus_per_replica": 0}, "--gpus-per-replica"),
    ({"ray_workers": -1}, "--ray-workers"),
    ({"max_input_tokens": 0}, "--max-input-tokens"),
    ({"max_input_tokens": 4096, "max_total_tokens": 4096}, "--max-total-tokens"),
    ({"model_id": "two words"}, "--model-id"),
    ({"benchmark": ""}, "--benchmark"),
])
def test_invalid_values(kwargs: dict, flag: str) -> None:
    with pytest.raises(UserError, match=re.escape(flag)):
        deploy.compose_spec(**kwargs)


def test_shipped_compose_file_is_the_generator_output() -> None:
    shipped = (REPO / "docker" / "compose.yaml").read_text(encoding="utf-8")
    assert shipped.startswith("# Generated by asyncbench")
    assert "asyncbench deploy compose" in shipped.splitlines()[0]
    assert yaml.safe_load(shipped) == yaml.safe_load(generate([]))
    doc = yaml.safe_load(shipped)
    assert len(tgi_services(doc)) == 2 and doc["services"]["ray-worker"]["deploy"]["replicas"] == 1


def test_dockerfile_installs_the_ray_extra() -> None:
    text = (REPO / "docker" / "Dockerfile").read_text(encoding="utf-8")
    assert re.search(r"^FROM python:3\.11-slim", text, re.M)
    assert re.search(r"pip install --no-cache-dir \"?\.\[([\w,]*,)?ray(,[\w,]*)?\]", text)
    assert re.search(r"^USER (?!root)\w+", text, re.M)


@pytest.mark.parametrize("value", [
    "yes", "No", "on", "null", "~", "", "1", "1:20", "0x10", "1e3", ".5", "-", "- x", "a: b", "#c", "x:",
    "${HF_TOKEN:-}", 'q"uote', "back\\slash", "new\nline", "é", "[x]", "{y}", "*a", "&b", "!t", "|", ">", "@x", "%x",
    "--flag", "http://h:80", "/results/run", "tgi:org/model", "2025-01-01",
])
def test_yaml_writer_round_trips(value: str) -> None:
    doc = {"k": value, "list": [value, {"inner": value, "n": 3}], "empty": {}, value or "blank": [value]}
    assert yaml.safe_load(deploy.to_yaml(doc)) == doc


def test_cli_rejects_zero_replicas_in_one_line() -> None:
    proc = subprocess.run([sys.executable, "-m", "asyncbench.cli", "deploy", "compose", "--replicas", "0"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--replicas" in lines[0], proc.stderr


def test_cli_out_writes_a_file_that_parses(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "compose.yaml"
    proc = subprocess.run([sys.executable, "-m", "asyncbench.cli", "deploy", "compose", "--replicas", "3",
                           "--out", str(out)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    doc = yaml.safe_load(out.read_text(encoding="utf-8"))
    assert list(tgi_services(doc)) == ["tgi-0", "tgi-1", "tgi-2"]
    assert "--replicas 3" in out.read_text(encoding="utf-8").splitlines()[0]


def test_evaluator_command_parses_as_asyncbench_run() -> None:
    """The evaluator's flags exist in `asyncbench run` (parsed, not run)."""
    from asyncbench import cli

    command = deploy.compose_spec(replicas=3)["services"]["evaluator"]["command"]
    assert command[0] == "asyncbench"
    args = cli.build_parser().parse_args(command[1:])
    assert args.base_urls == ["http://tgi-0:80", "http://tgi-1:80", "http://tgi-2:80"]
    assert args.backend == "ray" and args.ray_address == "ray://ray-head:10001"
