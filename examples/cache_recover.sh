#!/usr/bin/env bash
# A damaged cache: asyncbench names the recovery command in one line, and `cache recover`
# copies every readable row into a new file. Runs against the built-in simulator.
set -euo pipefail
# the checkout's virtual environment (make run / make test build it), when not activated
export PATH="$(cd "$(dirname "$0")/.." && pwd)/.venv/bin:$PATH"
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
asyncbench run jsonl:examples/my_data.jsonl --model sim --cache "$tmp/cache.duckdb" --out "$tmp/run" --no-progress >/dev/null
asyncbench cache recover --cache "$tmp/cache.duckdb" --out "$tmp/copy.duckdb"     # every row copied
head -c 4096 "$tmp/cache.duckdb" > "$tmp/broken.duckdb"; head -c 200000 /dev/urandom >> "$tmp/broken.duckdb"
asyncbench cache stats --cache "$tmp/broken.duckdb" || true                        # one line naming `cache recover`
# a truncated file keeps none of its rows; its journal (CACHE.journal/*.jsonl.kept) has every paid answer
cp "$tmp/cache.duckdb" "$tmp/cut.duckdb"; cp -r "$tmp/cache.duckdb.journal" "$tmp/cut.duckdb.journal"
truncate -s 300000 "$tmp/cut.duckdb"
asyncbench cache stats --cache "$tmp/cut.duckdb" || true                           # one line naming `cache recover`
asyncbench cache recover --cache "$tmp/cut.duckdb" --out "$tmp/rebuilt.duckdb"     # N answers from the journal
