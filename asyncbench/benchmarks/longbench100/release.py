"""The 100-LongBench release's tables, read as benchmark data: task prompts
(`dataset2prompt.json`, including the no-context `qa_old` prompt of the prior-knowledge
filter), output budgets (`dataset2maxlen.json`) and the three judge prompts of its
`utils/metrics.py` (`judge_prompts.json`: `judge_prompt`, `fluency_prompt`,
`precision_prompt`, Python format strings).

Read from `<data_dir>/longbench100/`, else from the cache, else fetched once from the
release repository (uservan/100-LongBench): its two config files as they are, and the
judge prompts taken out of `utils/metrics.py` as the string constants they are (parsed
with `ast`, never executed).
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from ...errors import UserError
from ...jsonl_io import read_json_object
from ...metrics.judge import PROMPT_NAMES as JUDGE_NAMES
from ..longbench.prompts import MAXLEN_FILE, PROMPT_FILE, LongBenchConfig

RELEASE_URL = "https://raw.githubusercontent.com/uservan/100-LongBench/main/{path}"
FILES = {PROMPT_FILE: f"config/{PROMPT_FILE}", MAXLEN_FILE: f"config/{MAXLEN_FILE}"}  # LongBench's formats
JUDGE_FILE = "judge_prompts.json"
PRIOR_PROMPT = "qa_old"  # the release's no-context QA prompt


@dataclass(frozen=True)
class Release(LongBenchConfig):
    """The release's two tables, in LongBench's formats (`template`, `max_new_tokens`),
    and its three judge prompts by name."""

    judge: dict[str, str] = field(default_factory=dict)


def _download(path: str) -> bytes:
    import httpx

    url = RELEASE_URL.format(path=path)
    try:
        resp = httpx.get(url, follow_redirects=True, timeout=60)
        resp.raise_for_status()
    except httpx.HTTPError as exc:
        raise UserError(f"could not download {url} ({exc}); pass --data-dir DIR with the release's tables in "
                        "DIR/longbench100/") from None
    return resp.content


def judge_prompts_from_source(source: str) -> dict[str, str]:
    """The three judge prompt strings assigned at the top of the release's metrics.py."""
    found: dict[str, str] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id in JUDGE_NAMES:
                    found[target.id] = node.value.value
    missing = [n for n in JUDGE_NAMES if n not in found]
    if missing:
        raise UserError(f"the release's utils/metrics.py has no {', '.join(missing)}")
    return found


def release_dir(data_dir: Path | None) -> Path:
    """Where the tables are: the data directory's copy, else the cache (fetched once)."""
    names = (*FILES, JUDGE_FILE)
    if data_dir is not None:
        local = Path(data_dir) / "longbench100"
        if all((local / n).is_file() for n in names):
            return local
    from ...datadir import cache_root

    cached = cache_root() / "longbench100" / "release"
    cached.mkdir(parents=True, exist_ok=True)
    for name, path in FILES.items():
        if not (cached / name).is_file():
            (cached / name).write_bytes(_download(path))
    if not (cached / JUDGE_FILE).is_file():
        prompts = judge_prompts_from_source(_download("utils/metrics.py").decode("utf-8"))
        (cached / JUDGE_FILE).write_text(json.dumps(prompts, ensure_ascii=False, indent=1), encoding="utf-8")
    return cached


@lru_cache(maxsize=4)
def _load(directory: Path) -> Release:
    hint = "replace it with the 100-LongBench release's file"
    prompts = read_json_object(directory / PROMPT_FILE, hint=hint)
    maxlen = read_json_object(directory / MAXLEN_FILE, hint=hint)
    judge = read_json_object(directory / JUDGE_FILE, hint=hint)
    missing = [n for n in JUDGE_NAMES if not isinstance(judge.get(n), str)]
    if missing:
        raise UserError(f"{directory / JUDGE_FILE} lacks {', '.join(missing)}; {hint}")
    return Release({k: str(v) for k, v in prompts.items()}, {k: int(v) for k, v in maxlen.items()}, str(directory),
                   {n: str(judge[n]) for n in JUDGE_NAMES})


def load_release(data_dir: Path | None) -> Release:
    return _load(release_dir(data_dir).resolve())
