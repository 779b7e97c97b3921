"""LongBench's prompt tables and template filling.

The prompt templates (`dataset2prompt.json`), generation lengths (`dataset2maxlen.json`)
and per-model prompt budgets (`model2maxlen.json`) are benchmark data, not code: we read
them from `<data_dir>/longbench/`, else from our cache, else fetch them once from the
official THUDM/LongBench repository. How a filled prompt is cut to its budget (pred.py's
middle cut) is the run path's (asyncbench/prompt_rules/cut.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ...errors import UserError
from ...jsonl_io import read_json_object
from ...prompt_rules.budget import MODEL2MAXLEN

CONFIG_URL = "https://raw.githubusercontent.com/THUDM/LongBench/main/LongBench/config/{name}"
PROMPT_FILE = "dataset2prompt.json"
MAXLEN_FILE = "dataset2maxlen.json"


@dataclass(frozen=True)
class LongBenchConfig:
    """The official per-dataset prompt template and max new tokens."""

    prompts: dict[str, str]
    maxlen: dict[str, int]
    source: str

    def template(self, dataset: str) -> str:
        try:
            return self.prompts[dataset]
        except KeyError:
            raise UserError(f"no prompt for dataset {dataset!r} in {self.source}/{PROMPT_FILE}; use the official file") from None

    def max_new_tokens(self, dataset: str) -> int:
        try:
            return int(self.maxlen[dataset])
        except KeyError:
            raise UserError(f"no max length for dataset {dataset!r} in {self.source}/{MAXLEN_FILE}; use the official file") from None


def _read_json(path: Path) -> dict[str, object]:
    return read_json_object(path, hint="replace it with the official LongBench file")


def _download(url: str, target: Path) -> None:
    """Fetch one official config file into the cache (atomic rename, so a failed
    download never leaves a half-written table behind)."""
    import httpx

    try:
        resp = httpx.get(url, follow_redirects=True, timeout=60)
        resp.raise_for_status()
    except httpx.HTTPError as exc:
        raise UserError(
            f"could not download {url} ({exc}); pass --data-dir DIR containing longbench/{target.name}"
        ) from None
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".part")
    tmp.write_bytes(resp.content)
    tmp.replace(target)


def config_dir(data_dir: Path | None) -> Path:
    """The directory holding the two official tables: `<data_dir>/longbench` when the user
    named a data directory that has them, else the cache (downloaded on first use)."""
    if data_dir is not None:
        local = Path(data_dir) / "longbench"
        if (local / PROMPT_FILE).is_file() and (local / MAXLEN_FILE).is_file():
            return local
    from ...datadir import cache_root

    cached = cache_root() / "longbench" / "config"
    for name in (PROMPT_FILE, MAXLEN_FILE):
        if not (cached / name).is_file():
            _download(CONFIG_URL.format(name=name), cached / name)
    return cached


@lru_cache(maxsize=8)
def _load_config(directory: Path) -> LongBenchConfig:
    prompts = _read_json(directory / PROMPT_FILE)
    maxlen = _read_json(directory / MAXLEN_FILE)
    try:
        lengths = {k: int(v if isinstance(v, (int, float, str)) else str(v)) for k, v in maxlen.items()}
    except ValueError:
        raise UserError(f"{directory / MAXLEN_FILE}: every value must be a whole number of tokens; "
                        "replace it with the official LongBench file") from None
    return LongBenchConfig(prompts={k: str(v) for k, v in prompts.items()}, maxlen=lengths, source=str(directory))


def load_config(data_dir: Path | None) -> LongBenchConfig:
    """The official LongBench prompt and max-new-token tables."""
    return _load_config(config_dir(data_dir).resolve())


def fill_prompt(template: str, row: Mapping[str, object], *, where: str = "") -> str:
    """Fill a template from a data row with `str.format(**row)`, as the official script
    does, so braces in the templates mean exactly what they mean there."""
    try:
        return template.format(**row)
    except KeyError as exc:
        raise UserError(f"{where or 'sample'}: field {exc.args[0]!r} required by the prompt template is missing") from None


def official_model2maxlen(data_dir: Path | None) -> Path | None:
    """LongBench's `model2maxlen.json` where the data directory has none of its own
    (`BudgetTable.elsewhere`): the official repository's, fetched once into the cache with
    the other tables. None where the user's own tables (a data directory with
    dataset2prompt.json) have no model2maxlen.json, or it cannot be fetched: the context
    rule applies then."""
    tables = config_dir(data_dir)
    if data_dir is not None and tables == Path(data_dir) / "longbench":
        return None  # the user's own tables, without a model2maxlen.json
    path = tables / MODEL2MAXLEN
    if not path.is_file():
        try:
            _download(CONFIG_URL.format(name=MODEL2MAXLEN), path)
        except UserError:
            return None
    return path
