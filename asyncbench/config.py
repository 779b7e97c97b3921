"""RunConfig: everything a user chose for one evaluation, as one typed value.

It is built once (by `asyncbench run` or the Python API) and read by every later stage;
nothing downstream adds to it. It holds no credentials, so it can be stored as is.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RunConfig:
    benchmark: str
    model: str
    base_urls: list[str] = field(default_factory=list)
    endpoint_id: str | None = None
    api: str = "chat"
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
    max_input_tokens: int | None = None
    tokenizer: str | None = None
    temperature: float = 0.0
    repeat: int = 0
    judge: str | None = None
    judge_base_urls: list[str] = field(default_factory=list)
    prices: str | None = None
    progress: bool | None = None
    backend: str = "local"  # "local" | "ray"
    ray_address: str | None = None
    ray_workers: int = 2
    extra: dict[str, Any] = field(default_factory=dict)

    def run_id(self, endpoint_id: str) -> str:
        """Stable over what changes results; blind to limits, concurrency, paths, keys."""
        ident = {k: getattr(self, k) for k in ("benchmark", "model", "api", "limit", "max_input_tokens",
                                                "tokenizer", "temperature", "repeat", "judge", "extra")}
        ident["endpoint"] = endpoint_id
        blob = json.dumps(ident, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]