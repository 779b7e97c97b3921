"""Write a docker compose file: a TGI fleet, a Ray head and workers, and the evaluator.

`asyncbench deploy compose [--replicas N] [--gpus-per-replica K] [--ray-workers W] ...`
prints a Compose Specification document (or writes it with --out). Replica i serves the
model on GPUs i*K .. i*K+K-1; the evaluator waits until every replica answers /health,
then runs `asyncbench run` with one --base-url per replica on the Ray backend and keeps
the DuckDB cache and run.json in the `results` volume. docker/compose.yaml is this
command's output for the defaults; see docker/README.md.
"""

from __future__ import annotations

import json
import re

from .errors import UserError

DEFAULT_TGI_IMAGE = "ghcr.io/huggingface/text-generation-inference:3.3.4"
DEFAULT_MODEL_ID = "meta-llama/Llama-3.1-8B-Instruct"
DEFAULT_BENCHMARK = "longbench"
# 32k context with room for LongBench's longest answers (512 tokens) after a full prompt.
DEFAULT_MAX_INPUT_TOKENS = 32000
DEFAULT_MAX_TOTAL_TOKENS = 32768
# Relative to the compose file's directory: docker/compose.yaml builds the repo root.
DEFAULT_BUILD_CONTEXT = ".."

EVALUATOR_IMAGE = "asyncbench:local"
RAY_CLIENT_PORT = 10001
RESULTS = "/results"
DATA_MOUNT = "/benchdata"
# Compose interpolates this from the host environment when it starts the services, so
# the file itself never holds a token (and an unset token is an empty string, not an error).
HF_TOKEN_FROM_HOST = "${HF_TOKEN:-}"
# Ray's control plane (jobs, actors, the client port) authenticates every call with one
# shared token from the host environment; compose refuses to start without it.
RAY_AUTH = {"RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN": "${RAY_AUTH_TOKEN:?set RAY_AUTH_TOKEN to a shared secret, e.g. the output of openssl rand -hex 32}"}


def compose_spec(
    *,
    replicas: int = 2,
    model_id: str = DEFAULT_MODEL_ID,
    gpus_per_replica: int = 1,
    ray_workers: int = 1,
    benchmark: str = DEFAULT_BENCHMARK,
    tgi_image: str = DEFAULT_TGI_IMAGE,
    max_input_tokens: int = DEFAULT_MAX_INPUT_TOKENS,
    max_total_tokens: int = DEFAULT_MAX_TOTAL_TOKENS,
    data_dir: str | None = None,
    build_context: str = DEFAULT_BUILD_CONTEXT,
) -> dict[str, object]:
    """The compose document as plain dicts and lists (no `version:`: the Compose Specification)."""
    _check(replicas >= 1, f"--replicas must be at least 1, got {replicas}")
    _check(gpus_per_replica >= 1, f"--gpus-per-replica must be at least 1, got {gpus_per_replica}")
    _check(ray_workers >= 0, f"--ray-workers must be 0 or more, got {ray_workers}")
    _check(max_input_tokens >= 1, f"--max-input-tokens must be at least 1, got {max_input_tokens}")
    _check(max_total_tokens > max_input_tokens,
           f"--max-total-tokens ({max_total_tokens}) must exceed --max-input-tokens ({max_input_tokens}), "
           "leaving room for the answer")
    for flag, value in (("--model-id", model_id), ("--benchmark", benchmark), ("--tgi-image", tgi_image),
                        ("--build-context", build_context), ("--data-dir", data_dir)):
        _check(value is None or _is_word(value), f"{flag} must be one word with no spaces, got {value!r}")

    tgi = [f"tgi-{i}" for i in range(replicas)]
    services: dict[str, object] = {}
    for i, name in enumerate(tgi):
        gpus = [str(g) for g in range(i * gpus_per_replica, (i + 1) * gpus_per_replica)]
        services[name] = _tgi_service(tgi_image, model_id, gpus, max_input_tokens, max_total_tokens)

    build = {"context": build_context, "dockerfile": "docker/Dockerfile"}
    services["ray-head"] = {
        "build": build,
        "image": EVALUATOR_IMAGE,
        "command": ["ray", "start", "--head", "--block", "--port=6379",
                    f"--ray-client-server-port={RAY_CLIENT_PORT}", "--include-dashboard=false",
                    "--disable-usage-stats", "--num-cpus=2"],
        "environment": dict(RAY_AUTH),
        # Ray's object store lives in /dev/shm; docker's 64 MB default makes it fall back to disk.
        "shm_size": "2gb",
    }
    services["ray-worker"] = {
        "build": build,
        "image": EVALUATOR_IMAGE,
        "command": ["ray", "start", "--address=ray-head:6379", "--block", "--disable-usage-stats"],
        "environment": dict(RAY_AUTH),
        "shm_size": "2gb",
        "depends_on": {"ray-head": {"condition": "service_started"}},
        "deploy": {"replicas": ray_workers},
    }

    command = ["asyncbench", "run", benchmark, "--model", f"tgi:{model_id}"]
    for name in tgi:
        command += ["--base-url", f"http://{name}:80"]
    command += ["--backend", "ray", "--ray-address", f"ray://ray-head:{RAY_CLIENT_PORT}",
                "--cache", f"{RESULTS}/cache.duckdb", "--out", f"{RESULTS}/run"]
    environment = {
        "HF_TOKEN": HF_TOKEN_FROM_HOST,  # gated tokenizers and hub datasets
        # Hub downloads (benchmark data) persist in the results volume across `run --rm`.
        "XDG_CACHE_HOME": f"{RESULTS}/.cache",
        **RAY_AUTH,
    }
    volumes: list[dict[str, object]] = [{"type": "volume", "source": "results", "target": RESULTS}]
    if data_dir:
        environment["ASYNCBENCH_DATA_DIR"] = DATA_MOUNT
        volumes.append({"type": "bind", "source": data_dir, "target": DATA_MOUNT, "read_only": True})
    depends_on: dict[str, object] = {name: {"condition": "service_healthy"} for name in tgi}
    depends_on["ray-head"] = {"condition": "service_started"}
    services["evaluator"] = {
        "build": build,
        "image": EVALUATOR_IMAGE,
        "command": command,
        "environment": environment,
        "volumes": volumes,
        "depends_on": depends_on,
    }
    return {"name": "asyncbench", "services": services, "volumes": {"hf-cache": {}, "results": {}}}


def _tgi_service(image: str, model_id: str, gpus: list[str], max_input: int, max_total: int) -> dict[str, object]:
    """One replica: its own GPUs, the shared weight cache, ready once /health answers."""
    command = ["--model-id", model_id, "--max-input-tokens", str(max_input),
               "--max-total-tokens", str(max_total), "--port", "80"]
    if len(gpus) > 1:
        command += ["--num-shard", str(len(gpus))]
    return {
        "image": image,
        "command": command,
        "environment": {"HF_TOKEN": HF_TOKEN_FROM_HOST},
        # Every replica reads the same weights: the first download serves them all.
        "volumes": [{"type": "volume", "source": "hf-cache", "target": "/data"}],
        "shm_size": "1gb",  # NCCL between shards needs more than docker's 64 MB
        "deploy": {"resources": {"reservations": {"devices": [
            {"driver": "nvidia", "device_ids": gpus, "capabilities": ["gpu"]},
        ]}}},
        # Failures during start_period do not count: downloading and loading a model takes minutes.
        "healthcheck": {"test": ["CMD", "curl", "-fsS", "http://localhost:80/health"],
                        "interval": "10s", "timeout": "5s", "retries": 6, "start_period": "1h"},
    }


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise UserError(message)


def _is_word(value: str) -> bool:
    return bool(value) and not any(c.isspace() for c in value)


# --- a small YAML writer: block style for the dicts, lists, strings and ints above, so the
# command needs no YAML library. A string is written plain only when YAML 1.1 (PyYAML,
# docker compose) would read it back as that same string; otherwise double-quoted, and a
# JSON string literal is a valid YAML double-quoted scalar.

_PLAIN = re.compile(r"(--?)?[A-Za-z_/][A-Za-z0-9_./=:@+-]*\Z")
_RESERVED = {"y", "n", "yes", "no", "true", "false", "on", "off", "null"}


def to_yaml(doc: dict[str, object]) -> str:
    """`doc` as a YAML block document."""
    lines: list[str] = []
    _emit(doc, 0, lines)
    return "\n".join(lines) + "\n"


def _emit(node: dict[str, object] | list[object], depth: int, lines: list[str]) -> None:
    pad = "  " * depth
    items = node.items() if isinstance(node, dict) else ((None, v) for v in node)
    for key, value in items:
        prefix = f"{pad}{_scalar(key)}:" if isinstance(node, dict) else f"{pad}-"
        if isinstance(value, (dict, list)) and value:
            if isinstance(node, dict):
                lines.append(prefix)
                _emit(value, depth + 1, lines)
            else:  # "- first: ..." then the rest of the item indented under it
                start = len(lines)
                _emit(value, depth + 1, lines)
                lines[start] = f"{pad}- {lines[start][len(pad) + 2:]}"
        else:
            lines.append(f"{prefix} {_scalar(value)}")


def _scalar(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, (dict, list)):  # only empty ones reach here
        return "{}" if isinstance(value, dict) else "[]"
    text = str(value)
    if _PLAIN.match(text) and not text.endswith(":") and text.lower() not in _RESERVED:
        return text
    return json.dumps(text)
