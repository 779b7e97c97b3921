"""RunConfig: everything a user chose for one evaluation, as one typed value.

It is built once (by `asyncbench run` or the Python API) and read by every later stage;
nothing downstream adds to it. It holds no credentials, so it can be stored as is.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, get_args

from .errors import UserError
from .types import ApiKind, Backend, BatchFallback, PromptCacheMode, StreamMode

# The most requests in flight per endpoint: far above any provider's useful concurrency,
# low enough that a typo (1000000) cannot exhaust memory on queues and sockets.
MAX_CONCURRENCY = 4096


def _number(option: str, value: float | None, *, low: float, high: float = math.inf, low_open: bool = False,
            optional: bool = False) -> None:
    if value is None and optional:
        return
    ok = (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
          and (value > low if low_open else value >= low) and value <= high)
    if not ok:
        bound = f"greater than {low:g}" if low_open else f"at least {low:g}"
        upper = f" and at most {high:g}" if math.isfinite(high) else ""
        raise UserError(f"{option} must be a finite number {bound}{upper} (got {value!r})")


def _texts_and_flags(cfg: RunConfig) -> None:
    """The text, list and yes/no options are of their type: a set file or the Python API
    can hand in anything (`model = 5`, `base_urls = 5`, `tokenizer = 5`), which once
    reached code that called string methods on it. Numbers are checked by range below."""
    for f in fields(cfg):
        value, kind = getattr(cfg, f.name), str(f.type)
        option = "the model" if f.name == "model" else f"--{f.name.replace('_', '-')}"
        if kind == "list[str]":
            ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
            want = "a list of text values"
        elif kind in ("str", "str | None") or kind in ("ApiKind", "Backend", "BatchFallback", "PromptCacheMode", "StreamMode"):
            ok, want = isinstance(value, str) or (value is None and "None" in kind), "text"
        elif kind in ("bool", "bool | None"):
            ok, want = isinstance(value, bool) or (value is None and "None" in kind), "true or false"
        else:
            continue
        if not ok:
            shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
            raise UserError(f"{option} must be {want} (got {shown})")


def _whole(option: str, value: int, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise UserError(f"{option} must be a whole number from {low:,} to {high:,} (got {value!r})")


def _choice(option: str, value: object, kind: object) -> None:
    """`value` is one of the Literal `kind`'s values, or one UserError naming them."""
    accepted = get_args(kind)
    if value not in accepted:
        raise UserError(f"{option} must be one of {', '.join(accepted)} (got {value!r})")


# `--model sim`: the built-in simulator, started by the command that runs (never by the
# run path itself, which is handed its base URL).
SIM = "sim"


def auto_model(model: str) -> str:
    """`auto`: a real API when its key is set, else the simulator; any other name as is."""
    if model != "auto":
        return model
    if os.environ.get("OPENAI_API_KEY"):
        return "openai:gpt-4o-mini"
    if os.environ.get("ANTHROPIC_API_KEY"):
        return "anthropic:claude-haiku-4-5"
    return SIM


@dataclass
class RunConfig:
    benchmark: str
    model: str
    base_urls: list[str] = field(default_factory=list)
    endpoint_id: str | None = None
    api: ApiKind = "chat"
    data_dir: str | None = None
    cache: str | None = None
    out: str | None = None
    limit: int | None = None
    concurrency: int = 32
    rpm: float | None = None
    tpm: float | None = None
    max_cost: float | None = None
    dry_run: bool = False
    timeout_s: float = 120.0
    max_attempts: int = 6
    max_response_bytes: int = 4 * 1024 * 1024  # providers/bounded.py: an answer's body, decoded
    max_input_tokens: int | None = None
    tokenizer: str | None = None
    official_model: str | None = None  # LongBench pred.py's name for the served model (official_models.py)
    temperature: float = 0.0
    repeat: int = 0
    judge: str | None = None
    judge_base_urls: list[str] = field(default_factory=list)
    prices: str | None = None
    progress: bool | None = None
    backend: Backend = "local"
    batch: bool = False  # through the provider's batch API (runners/batch.py)
    batch_fallback: BatchFallback = "batch"  # requests a batch did not answer: in the next one, or live
    no_wait: bool = False  # --batch: submit, collect what has ended, and exit
    prompt_cache: PromptCacheMode = "auto"  # "auto": mark shared prompt prefixes for the provider's cache
    stream: StreamMode = "on"  # "on": live answers streamed where the provider streams, and timed
    ray_address: str | None = None
    ray_workers: int = 2
    ray_shared_limiter: str | None = None  # drivers sharing one limiter by this name (runners/ray_shared.py)
    extra: dict[str, Any] = field(default_factory=dict)

    def validate(self) -> RunConfig:
        """Every option in its range, or one UserError naming the option and the range.
        Called once, where a config is made (the CLI, the Python API, execute)."""
        _texts_and_flags(self)
        _number("--rpm", self.rpm, low=0.0, low_open=True, optional=True)
        _number("--tpm", self.tpm, low=0.0, low_open=True, optional=True)
        _number("--timeout", self.timeout_s, low=0.0, low_open=True)
        _number("--max-cost", self.max_cost, low=0.0, optional=True)
        _number("--temperature", self.temperature, low=0.0, high=2.0)
        _whole("--concurrency", self.concurrency, 1, MAX_CONCURRENCY)
        _whole("--max-attempts", self.max_attempts, 1, 100)
        _whole("--max-response-bytes", self.max_response_bytes, 1024, 2**40)
        _whole("--ray-workers", self.ray_workers, 1, 1024)
        if self.ray_shared_limiter is not None and self.backend != "ray":
            raise UserError("--ray-shared-limiter goes with --backend ray (drivers on one Ray cluster share it)")
        _whole("--repeat", self.repeat, 0, 1_000_000)
        _choice("--api", self.api, ApiKind)
        _choice("--backend", self.backend, Backend)
        _choice("--batch-fallback", self.batch_fallback, BatchFallback)
        _choice("--prompt-cache", self.prompt_cache, PromptCacheMode)
        _choice("--stream", self.stream, StreamMode)
        if self.no_wait and not self.batch:
            raise UserError("--no-wait goes with --batch (submit the batches and exit)")
        if self.limit is not None:
            _whole("--limit", self.limit, 1, 10**9)
        if self.max_input_tokens is not None:
            _whole("--max-input-tokens", self.max_input_tokens, 1, 10**8)
        from .urls import validate_base_url

        for url in self.base_urls:
            validate_base_url(url)
        for url in self.judge_base_urls:
            validate_base_url(url, "--judge-base-url")
        return self

    def uses_sim(self) -> bool:
        """Whether the model or the judge is the built-in simulator (`sim`, or `auto`
        without an API key): the command that runs starts it (sim/testing.py)."""
        return SIM in (auto_model(self.model), auto_model(self.judge) if self.judge else None)

    def run_id(self, endpoint_id: str, data: str, model: str | None = None, judge: str | None = None) -> str:
        """Stable over what changes results — settings, endpoint identity and `data` (a hash
        of the samples' content, so an edited file is a new run); blind to limits,
        concurrency, paths and keys. `model` and `judge` are the resolved models
        (provider:model): `--model auto` and `--model sim` that resolve to the same server
        and model are one run."""
        ident = {k: getattr(self, k) for k in ("benchmark", "model", "api", "limit", "max_input_tokens",
                                                "tokenizer", "temperature", "repeat", "judge", "extra")}
        ident["model"] = model or self.model
        ident["judge"] = judge or self.judge
        if self.official_model:  # only when set: older runs keep their ids
            ident["official_model"] = self.official_model
        ident["endpoint"] = endpoint_id
        ident["data"] = data
        blob = json.dumps(ident, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]


def run_fields(given: Mapping[str, Any]) -> dict[str, Any]:
    """The RunConfig fields among keyword options (the Python API's, an eval set file's),
    as RunConfig takes them: paths as text, URLs as a list (one URL may be given alone)."""
    run: dict[str, Any] = {k: v for k, v in given.items() if k in RUN_FIELDS}
    for key in ("data_dir", "cache", "out", "prices"):
        if isinstance(run.get(key), os.PathLike):
            run[key] = os.fspath(run[key])
    for key in ("base_urls", "judge_base_urls"):
        if key in run:
            run[key] = [run[key]] if isinstance(run[key], str) else list(run[key]) if isinstance(
                run[key], (list, tuple)) else run[key]  # anything else: validate() names it
    return run


# what a caller may set of a run (the benchmark, model and its options are given apart)
RUN_FIELDS = {f.name for f in fields(RunConfig)} - {"benchmark", "model", "extra"}
