"""An eval set's list of runs (`set.json`, written by the eval-set runner): a JSON list of
{"model", "benchmark", "run_id", "status"}, one per (model, benchmark). The leaderboard
takes its run ids; a member with no run yet is named in a note, not dropped silently.
"""

from __future__ import annotations

from pathlib import Path

from ...errors import UserError
from ...jsonl_io import read_json_file

SET_FILE = "set.json"
SHAPE = '[{"model": SPEC, "benchmark": BENCH, "run_id": ID or null, "status": ...}, ...]'


def read_set(path: Path) -> tuple[list[str], tuple[str, ...]]:
    """The run ids of the set at `path` (its set.json, or the folder holding one), in
    order, and a note per member that has no run yet. A UserError when the file is
    missing or not a list of such objects, or no member has a run."""
    if path.is_dir():
        path = path / SET_FILE
    if not path.is_file():
        raise UserError(f"no eval set file at {path}; pass --set DIR/{SET_FILE} as the eval-set run wrote it")
    data = read_json_file(path, hint=f"expected {SHAPE}", what="eval set file")
    if not isinstance(data, list) or not all(isinstance(m, dict) for m in data):
        raise UserError(f"eval set file {path}: expected {SHAPE}")
    run_ids: list[str] = []
    notes: list[str] = []
    for i, member in enumerate(data):
        run_id = member.get("run_id")
        if run_id is not None and not (isinstance(run_id, str) and run_id):
            raise UserError(f"eval set file {path}: entry {i} has run_id {run_id!r}; expected a run id or null")
        if run_id:
            run_ids.append(run_id)
        else:
            notes.append(f"{member.get('model', '?')} on {member.get('benchmark', '?')}: no run yet "
                         f"(status {member.get('status', 'unknown')}); re-run the set to make it")
    if not run_ids:
        raise UserError(f"eval set file {path} names no run yet; run the set first")
    return run_ids, tuple(notes)
