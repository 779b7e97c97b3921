"""The file's tables and their versions: created on open, an older file migrated in place.

- `responses`: successful answers keyed by sha256 of the canonical request, which
  `request_json` holds as hashed (the prompt and messages by their sha256; rows written
  before 2026-11 hold a readable form with `prompt_chars` instead). Only successes are
  served from cache; failures go to `failures` and are never answers.
- `runs` / `results`: one row per run and per (run, sample) — the sample ledger, with
  the status of each sample (see ledger.py) — so a re-run continues and `report` can
  show a run later.
- `ledger_requests` / `invocations`: one row per request a run needed and per
  invocation of it, appended and never rewritten: every count, token and dollar a run
  reports is summed from them (ledger.account).
- `prompts` / `prompt_refs`: the prompt of each request as sent (after truncation), once
  per request key however many runs send it: what the per-sample view shows beside the
  answer. A paid prompt is in the cache's prompt files (`prompt_refs` says where:
  prompt_files.py); `prompts` holds the text of the others (failed requests, older files).
- `batches` / `batch_requests`: provider batches and the request keys in each.
- `usage_flag` (responses, ledger_requests, v5): a server's usage that was out of
  bounds, booked at our bound (claims.py); NULL where it was booked as reported.
- `sent_at`, `ttft_ms` (responses, ledger_requests, v6) and `itl_ms` (responses): when a
  live answer was sent (epoch s), its time to first token and its inter-token gaps
  (types.Timing) as measured when it was paid; NULL where nothing was measured (a batch
  result, an unstreamed answer's TTFT, a cache hit's ledger row, a row stored before v6).
- No index on the tables that grow with the cache (`responses`, `prompts`, `prompt_refs`,
  `results`, v7): DuckDB holds a table's primary-key index whole in memory from its first
  insert (114 MB per million response keys, never evicted), so a run's memory grew with
  everything else the shared cache held. Their writers keep keys unique instead, inside
  the one write transaction a file has at a time (`missing`: an anti-join on the batch's
  keys, a scan whose blocks DuckDB may evict).
- `meta`: the schema version, checked on open; an older file is migrated in place.
"""

from __future__ import annotations

import json

from ..errors import UserError
from .connection import Connection

SCHEMA_VERSION = 7

_SCHEMA = [
    "CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR)",
    """CREATE TABLE IF NOT EXISTS responses (
        key VARCHAR, provider VARCHAR, model VARCHAR, endpoint VARCHAR,
        request_json VARCHAR, text VARCHAR, finish_reason VARCHAR,
        prompt_tokens BIGINT, completion_tokens BIGINT, cached_prompt_tokens BIGINT,
        latency_ms DOUBLE, cost_usd DOUBLE, served_by VARCHAR, created_at DOUBLE, cache_write_tokens BIGINT DEFAULT 0,
        usage_flag VARCHAR, sent_at DOUBLE, ttft_ms DOUBLE, itl_ms DOUBLE[])""",
    """CREATE TABLE IF NOT EXISTS failures (
        key VARCHAR, run_id VARCHAR, sample_id VARCHAR, kind VARCHAR, status INTEGER,
        message VARCHAR, attempts INTEGER, created_at DOUBLE)""",
    """CREATE TABLE IF NOT EXISTS runs (
        run_id VARCHAR PRIMARY KEY, benchmark VARCHAR, model VARCHAR, config_json VARCHAR,
        started_at DOUBLE, finished_at DOUBLE, status VARCHAR, summary_json VARCHAR)""",
    """CREATE TABLE IF NOT EXISTS results (
        run_id VARCHAR, sample_id VARCHAR, task VARCHAR, purpose VARCHAR, key VARCHAR,
        status VARCHAR, score DOUBLE, prediction VARCHAR, cached BOOLEAN, error VARCHAR,
        prompt_tokens BIGINT, completion_tokens BIGINT, cached_prompt_tokens BIGINT,
        cost_usd DOUBLE, latency_ms DOUBLE, truncated_tokens BIGINT, meta_json VARCHAR,
        invocation INTEGER, references_json VARCHAR)""",
    """CREATE TABLE IF NOT EXISTS ledger_requests (
        run_id VARCHAR, invocation INTEGER, purpose VARCHAR, task VARCHAR, source VARCHAR, key VARCHAR,
        sample_id VARCHAR, prompt_tokens BIGINT, completion_tokens BIGINT, cached_prompt_tokens BIGINT,
        cost_usd DOUBLE, saved_usd DOUBLE, latency_ms DOUBLE, attempts INTEGER, cache_write_tokens BIGINT DEFAULT 0,
        usage_flag VARCHAR, sent_at DOUBLE, ttft_ms DOUBLE)""",
    """CREATE TABLE IF NOT EXISTS invocations (
        run_id VARCHAR, invocation INTEGER, started_at DOUBLE, wall_s DOUBLE, requests BIGINT, retries BIGINT,
        rate_limited BIGINT, transient_errors BIGINT, complete BOOLEAN, finished BOOLEAN, pid INTEGER,
        host VARCHAR, PRIMARY KEY (run_id, invocation))""",
    "CREATE TABLE IF NOT EXISTS prompts (key VARCHAR, prompt VARCHAR)",
    # where a paid prompt is in the cache's prompt files (prompt_files.py); `prompts` keeps
    # the few others (failed requests) and those of caches written before
    "CREATE TABLE IF NOT EXISTS prompt_refs (key VARCHAR, file VARCHAR, start BIGINT, length BIGINT)",
    # provider batches (runners/batch.py), recorded the moment they are created so that a
    # crashed or interrupted run re-attaches to them instead of submitting twice
    """CREATE TABLE IF NOT EXISTS batches (
        batch_id VARCHAR PRIMARY KEY, run_id VARCHAR, provider VARCHAR, model VARCHAR, endpoint VARCHAR,
        base_url VARCHAR, n_requests BIGINT, state VARCHAR, counts_json VARCHAR, submitted_at DOUBLE,
        updated_at DOUBLE, collected BOOLEAN)""",
    "CREATE TABLE IF NOT EXISTS batch_requests (batch_id VARCHAR, key VARCHAR, custom_id VARCHAR)",
    # a complete run's last invocation and the fingerprint of everything its scores came from
    # (reuse.py): a re-run with the same fingerprint is booked from the store. Not copied by
    # `recover`: a recovered file's first re-run scores again.
    "CREATE TABLE IF NOT EXISTS reusable (run_id VARCHAR PRIMARY KEY, invocation INTEGER, fingerprint VARCHAR)",
]
# every table `recover` copies
TABLES = ("responses", "failures", "results", "runs", "ledger_requests", "invocations", "prompts", "prompt_refs")


def migrate(db: Connection) -> None:
    """Create the tables a new file lacks; bring an older file to SCHEMA_VERSION. A
    DuckDB file of another application is refused before anything is written to it."""
    con = db.con
    _refuse_foreign(db)
    for stmt in _SCHEMA:
        con.execute(stmt)
    row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if row is None:
        con.execute("INSERT INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
    elif int(row[0]) > SCHEMA_VERSION:
        raise UserError(f"cache file {db.path} has schema v{row[0]}, newer than this asyncbench "
                        f"(v{SCHEMA_VERSION}); upgrade asyncbench or use another --cache")
    elif int(row[0]) < SCHEMA_VERSION:
        if int(row[0]) == 1:
            _from_v1(db)
        if int(row[0]) <= 2:
            _from_v2(db)
        if int(row[0]) <= 3:
            _from_v3(db)
        if int(row[0]) <= 4:
            _from_v4(db)
        if int(row[0]) <= 5:
            _from_v5(db)
        _from_v6(db)


def _refuse_foreign(db: Connection) -> None:
    """A file with tables but no asyncbench schema version is someone else's database:
    `--cache` pointed at it by mistake would add a dozen tables to it (and then fail on
    a table of the same name), so it is left exactly as it was."""
    tables = {name for (name,) in db.con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_catalog = current_database() "
        "AND table_schema = 'main'").fetchall()}
    if not tables:
        return
    import duckdb

    try:
        ours = "meta" in tables and db.con.execute(
            "SELECT count(*) FROM meta WHERE key = 'schema_version'").fetchone() == (1,)
    except duckdb.Error:  # a `meta` table of another shape
        ours = False
    if not ours and {"responses", "ledger_requests"} <= tables:  # ours, its meta row lost: damaged
        from .connection import corrupt

        raise corrupt(db.path, ValueError("its schema version is unreadable"))
    if not ours:
        shown = ", ".join(sorted(tables)[:3]) + (", ..." if len(tables) > 3 else "")
        raise UserError(f"{db.path} is a DuckDB file of another application (tables {shown}), not an asyncbench "
                        "cache; it was left untouched: pass --cache NEW.duckdb")


def _from_v2(db: Connection) -> None:
    """v3 adds each sample's references to `results` (`prompts` is created above)."""
    db.con.execute("ALTER TABLE results ADD COLUMN IF NOT EXISTS references_json VARCHAR")
    db.con.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")


def _from_v3(db: Connection) -> None:
    """v4 adds the tokens written to the provider's prompt cache (Anthropic bills them
    at 1.25x input) to `responses` and `ledger_requests`: 0 for older rows."""
    for table in ("responses", "ledger_requests"):
        db.con.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS cache_write_tokens BIGINT DEFAULT 0")
    db.con.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")


def _from_v4(db: Connection) -> None:
    """v5 adds `usage_flag` to `responses` and `ledger_requests`: what of a server's usage
    was out of bounds and booked at our bound (claims.py); NULL for older rows (a row
    whose token counts are NULL, stored before usage was checked, is flagged when read)."""
    for table in ("responses", "ledger_requests"):
        db.con.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS usage_flag VARCHAR")
    db.con.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")


def _from_v5(db: Connection) -> None:
    """v6 adds each live answer's timing (types.Timing): `sent_at` and `ttft_ms` to
    `responses` and `ledger_requests`, the inter-token gaps `itl_ms` to `responses`;
    NULL for older rows (never measured, never 0)."""
    for table in ("responses", "ledger_requests"):
        db.con.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS sent_at DOUBLE")
        db.con.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS ttft_ms DOUBLE")
    db.con.execute("ALTER TABLE responses ADD COLUMN IF NOT EXISTS itl_ms DOUBLE[]")
    db.con.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")


# the tables v7 keeps without a primary key, and the DDL of each (from _SCHEMA)
UNINDEXED = ("responses", "results", "prompts", "prompt_refs")


def _from_v6(db: Connection) -> None:
    """v7 drops the primary keys of the tables that grow with the cache (see above).
    DuckDB cannot drop a constraint, so each table is copied into one created without
    it, by column name (an older file's columns were appended in the DDL's order), in
    one transaction: a crash midway leaves the v6 file as it was."""
    con = db.con
    ddl = {t: stmt for stmt in _SCHEMA for t in UNINDEXED if f"EXISTS {t} (" in stmt}
    with db.transaction():
        for table in UNINDEXED:
            keyed = con.execute("SELECT count(*) FROM duckdb_constraints() WHERE table_name = ? "
                                "AND constraint_type = 'PRIMARY KEY'", [table]).fetchone()
            if keyed == (0,):
                continue
            columns = ", ".join(con.table(table).columns)
            con.execute(f"ALTER TABLE {table} RENAME TO {table}_v6")
            con.execute(ddl[table])
            con.execute(f"INSERT INTO {table} ({columns}) SELECT {columns} FROM {table}_v6")
            con.execute(f"DROP TABLE {table}_v6")
        con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION)])


def _from_v1(db: Connection) -> None:
    """v1 kept per-sample results and a summary per run, no ledger: each old run gets
    its sample statuses, one invocation (its last, as the summary recorded it) and the
    request rows its results imply (eval only: v1 did not keep judge requests apart)."""
    with db.transaction():
        con = db.con
        con.execute("ALTER TABLE results ADD COLUMN IF NOT EXISTS invocation INTEGER DEFAULT 1")
        con.execute("UPDATE results SET status = CASE WHEN status = 'ok' AND cached THEN 'from_cache' "
                    "WHEN status = 'ok' THEN 'answered' WHEN status = 'skipped' THEN 'skipped_budget' "
                    "ELSE status END")
        con.execute("INSERT INTO ledger_requests (run_id, invocation, purpose, task, source, key, sample_id, "
                    "prompt_tokens, completion_tokens, cached_prompt_tokens, cost_usd, saved_usd, latency_ms, "
                    "attempts) SELECT run_id, 1, purpose, task, CASE WHEN status = 'answered' "
                    "THEN 'sent' WHEN status = 'from_cache' THEN 'from_cache' WHEN status = 'failed' THEN 'failed' "
                    "ELSE 'skipped_budget' END, key, sample_id, prompt_tokens, completion_tokens, cached_prompt_tokens, "
                    "CASE WHEN status = 'answered' THEN cost_usd ELSE 0 END, "
                    "CASE WHEN status = 'from_cache' THEN cost_usd ELSE 0 END, latency_ms, 1 FROM results")
        for run_id, started, summary_json in con.execute("SELECT run_id, started_at, summary_json FROM runs").fetchall():
            old = json.loads(summary_json) if summary_json else {}
            con.execute("INSERT OR IGNORE INTO invocations VALUES (?, 1, ?, ?, ?, ?, ?, ?, ?, ?, 0, '')",
                        [run_id, started, old.get("wall_s", 0.0), old.get("requests_sent", 0), old.get("retries", 0),
                         old.get("rate_limited", 0), old.get("transient_errors", 0),
                         bool(old) and not old.get("n_failed") and not old.get("n_skipped_budget"), bool(old)])
        con.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
