"""The shape of the code, checked from its source (issue 26): typed seams at the centre,
benchmarks reached through their declared capabilities, small functions, a small engine
and runner seam, and the import contracts that keep the packages apart. Each rule is one
test that names every offender, so a failure says what to fix."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PKG = REPO / "asyncbench"

MAX_COMPLEXITY = 20
MAX_ENGINE_LINES = 350
MAX_RUNNER_MEMBERS = 3

# The typed centre: planning, the engine, runners, the ledger, the store, the run summary.
# Files not there (yet) are skipped.
TYPED_CENTRE = ["run/plan.py", "run/execute.py", "run/generate.py", "run/record.py", "runners", "ledger.py", "store",
                "run_summary.py"]
_MAPPINGS = {"dict", "Dict", "Mapping", "MutableMapping"}


def _files(*names: str) -> Iterator[Path]:
    for name in names:
        path = PKG / name
        if path.is_dir():
            yield from sorted(path.rglob("*.py"))
        elif path.is_file():
            yield path


def _where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(REPO)}:{getattr(node, 'lineno', 0)}"


def _name(node: ast.AST) -> str:
    """`dict`, `typing.Dict` -> `Dict`, `t.Any` -> `Any`; '' for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _untyped_mapping(annotation: ast.AST, aliases: set[str]) -> bool:
    """Whether an annotation is or holds `dict[str, Any]` (or Dict/Mapping/MutableMapping,
    or a module-level alias of one), anywhere inside it (`list[dict[str, Any]]` too)."""
    for node in ast.walk(annotation):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a quoted annotation
            try:
                quoted = ast.parse(node.value, mode="eval").body
            except SyntaxError:
                continue
            if _untyped_mapping(quoted, aliases):
                return True
        if isinstance(node, ast.Name) and node.id in aliases:
            return True
        if (isinstance(node, ast.Subscript) and _name(node.value) in _MAPPINGS
                and isinstance(node.slice, ast.Tuple) and len(node.slice.elts) == 2
                and _name(node.slice.elts[0]) == "str" and _name(node.slice.elts[1]) == "Any"):
            return True
    return False


def _aliases(tree: ast.Module) -> set[str]:
    """Module-level names that stand for an untyped mapping (`Row = dict[str, Any]`)."""
    found: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            target, value = stmt.targets[0].id, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            target, value = stmt.target.id, stmt.value
        elif sys.version_info >= (3, 12) and isinstance(stmt, ast.TypeAlias):
            target, value = stmt.name.id, stmt.value
        else:
            continue
        if _untyped_mapping(value, found):
            found.add(target)
    return found


def test_no_untyped_mapping_in_the_signatures_of_the_typed_centre() -> None:
    offenders = []
    for path in _files(*TYPED_CENTRE):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        aliases = _aliases(tree)
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            args = fn.args
            params = [*args.posonlyargs, *args.args, *args.kwonlyargs, *filter(None, (args.vararg, args.kwarg))]
            bad = [p.arg for p in params if p.annotation is not None and _untyped_mapping(p.annotation, aliases)]
            if fn.returns is not None and _untyped_mapping(fn.returns, aliases):
                bad.append("return")
            if bad:
                offenders.append(f"{_where(path, fn)} {fn.name}({', '.join(bad)})")
    print("\n".join(offenders))
    assert not offenders, (f"{len(offenders)} signature(s) of the typed centre pass dict[str, Any] "
                           "(give them a dataclass or TypedDict):\n" + "\n".join(offenders))


def test_no_hasattr_or_getattr_on_a_benchmark() -> None:
    """A benchmark's optional capabilities are declared on its base class, not probed."""
    offenders = []
    for path in _files("."):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("hasattr", "getattr") and node.args):
                continue
            target = ast.unparse(node.args[0])
            # a benchmark by name, or a benchmark class probing itself
            if "bench" in target.lower() or (target in ("cls", "self") and "benchmarks" in path.parts):
                offenders.append(f"{_where(path, node)} {ast.unparse(node)}")
    print("\n".join(offenders))
    assert not offenders, f"{len(offenders)} probe(s) of a benchmark:\n" + "\n".join(offenders)


# Where a sample's `meta` may be written: the functions that build Samples (loaders), by
# module and name. Everything else reads it; what scoring finds travels back as a
# SampleScore, what prompting decides in its own values.
META_WRITERS = {
    "benchmarks/longbench/benchmark.py": {"load_minilongbench"},
    "benchmarks/bamboo/benchmark.py": {"_samples"},
    "commands/score_bamboo.py": {"score_records"},  # a predictions file's rows as BAMBOO samples
}


def _meta_target(node: ast.AST) -> bool:
    """`meta` itself, or a `.meta` attribute (`s.meta`, `samples[i].meta`)."""
    return (isinstance(node, ast.Name) and node.id == "meta") or (isinstance(node, ast.Attribute)
                                                                  and node.attr == "meta")


def _meta_writes(tree: ast.AST) -> Iterator[tuple[ast.AST, str | None]]:
    """Every write into a meta mapping (`meta[k] = v`, `meta[k] += v`, `del meta[k]`,
    `.update`, `.setdefault`, `.pop`, `.clear`, `.popitem` on it), each with the function
    it is in (the outermost, None at module level)."""
    mutators = {"update", "setdefault", "pop", "popitem", "clear"}

    def walk(node: ast.AST, fn: str | None) -> Iterator[tuple[ast.AST, str | None]]:
        for child in ast.iter_child_nodes(node):
            inner = fn if fn is not None or not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                else child.name
            if isinstance(child, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
                targets = child.targets if isinstance(child, (ast.Assign, ast.Delete)) else [child.target]
                for t in targets:
                    if isinstance(t, ast.Subscript) and _meta_target(t.value):
                        yield child, inner
            elif (isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute)
                  and child.func.attr in mutators and _meta_target(child.func.value)):
                yield child, inner
            yield from walk(child, inner)

    yield from walk(tree, None)


def test_no_meta_write_outside_the_loaders() -> None:
    """`Sample.meta` is input only: written where samples are built (META_WRITERS), read
    everywhere else. A benchmark's score returns SampleScores instead of writing into the
    samples it was given, so the run path reads typed values, not a shared dict."""
    offenders = []
    for path in _files("."):
        rel = path.relative_to(PKG).as_posix()
        allowed = META_WRITERS.get(rel, set())
        for node, fn in _meta_writes(ast.parse(path.read_text(encoding="utf-8"))):
            if fn not in allowed:
                offenders.append(f"{_where(path, node)} in {fn or 'module'}: {ast.unparse(node)[:80]}")
    print("\n".join(offenders))
    assert not offenders, (f"{len(offenders)} write(s) into a sample's meta outside the loaders (return a "
                           "SampleScore, or build the meta where the sample is built):\n" + "\n".join(offenders))


def test_the_meta_rule_sees_every_kind_of_write() -> None:
    src = """
meta = {}
def loader(s):
    meta["a"] = 1
def score(s, samples, i):
    s.meta["parsed"] = 1
    samples[i].meta["judge"] = []
    s.meta.update(x=1)
    s.meta.setdefault("y", 2)
    meta["n"] += 1
    del s.meta["z"]
    s.meta.pop("w", None)
    def inner():
        s.meta["deep"] = 1
def reads(s):
    return s.meta["a"], s.meta.get("b"), {**s.meta}
"""
    found = [(ast.unparse(node), fn) for node, fn in _meta_writes(ast.parse(src))]
    assert [fn for _, fn in found] == ["loader"] + ["score"] * 8
    assert found[-1][0] == "s.meta['deep'] = 1"


def test_no_function_above_the_complexity_limit() -> None:
    radon = pytest.importorskip("radon.complexity", reason="radon is a test dependency: pip install -e '.[test]'")
    from radon.visitors import Class

    def blocks(items: list[object]) -> Iterator[object]:
        """Functions, methods and closures (radon lists a class's methods beside it)."""
        for block in items:
            if not isinstance(block, Class):
                yield block
                yield from blocks(getattr(block, "closures", []))

    offenders = []
    for path in _files("."):
        for block in blocks(radon.cc_visit(path.read_text(encoding="utf-8"))):
            if block.complexity > MAX_COMPLEXITY:
                offenders.append(f"{path.relative_to(REPO)}:{block.lineno} {block.fullname} {block.complexity}")
    offenders = list(dict.fromkeys(offenders))
    print("\n".join(offenders))
    assert not offenders, (f"{len(offenders)} function(s) above cyclomatic complexity {MAX_COMPLEXITY} "
                           "(radon cc):\n" + "\n".join(offenders))


def test_the_engine_stays_small() -> None:
    lines = len((PKG / "run" / "execute.py").read_text(encoding="utf-8").splitlines())
    print(f"asyncbench/run/execute.py: {lines} lines")
    assert lines <= MAX_ENGINE_LINES, f"asyncbench/run/execute.py has {lines} lines, more than {MAX_ENGINE_LINES}"


def test_the_runner_protocol_has_at_most_three_members() -> None:
    tree = ast.parse((PKG / "runners" / "base.py").read_text(encoding="utf-8"))
    runner = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Runner")
    members = []
    for stmt in runner.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            members.append(stmt.name)
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            members.append(stmt.target.id)
        elif isinstance(stmt, ast.Assign):
            members += [t.id for t in stmt.targets if isinstance(t, ast.Name)]
    members = list(dict.fromkeys(members))  # a property's getter and setter are one member
    print("Runner:", ", ".join(members))
    assert {"run", "aclose"} <= set(members), members
    assert len(members) <= MAX_RUNNER_MEMBERS, (f"the Runner protocol has {len(members)} members "
                                                f"({', '.join(members)}), more than {MAX_RUNNER_MEMBERS}")


def _contracts() -> list[dict[str, object]]:
    import tomllib

    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    contracts: list[dict[str, object]] = config["tool"]["importlinter"]["contracts"]
    return contracts


def test_the_benchmarks_do_not_import_each_other_by_contract() -> None:
    """tests/test_static.py runs lint-imports; here: the contract covers every benchmark package."""
    packages = sorted(f"asyncbench.benchmarks.{p.name}" for p in (PKG / "benchmarks").iterdir()
                      if (p / "__init__.py").is_file())
    covering = [c["name"] for c in _contracts()
                if c.get("type") == "independence" and set(packages) <= set(c.get("modules", []))]
    print("benchmark packages:", ", ".join(packages), "| contracts:", covering)
    assert covering, f"no import-linter independence contract covers the benchmark packages {packages}"


def test_the_run_path_does_not_import_the_simulator_by_contract() -> None:
    run_path = {"asyncbench.run", "asyncbench.runners", "asyncbench.client", "asyncbench.store"}
    covering = [c["name"] for c in _contracts()
                if c.get("type") == "forbidden" and "asyncbench.sim" in c.get("forbidden_modules", [])
                and run_path <= set(c.get("source_modules", []))
                and c.get("allow_indirect_imports") in (False, "false", "False")]
    print("run path:", ", ".join(sorted(run_path)), "| contracts:", covering)
    assert covering, (f"no import-linter forbidden contract (direct and indirect) keeps asyncbench.sim out of "
                      f"{sorted(run_path)}")


# What the run path may import of asyncbench/benchmarks/: the registry and the base types.
RUN_PATH_MAY_IMPORT = {"asyncbench.benchmarks", "asyncbench.benchmarks.base"}


def _benchmark_modules() -> set[str]:
    """Every module and package directly under asyncbench/benchmarks/, from the tree."""
    root = PKG / "benchmarks"
    found = {f"asyncbench.benchmarks.{p.stem}" for p in root.glob("*.py") if p.stem != "__init__"}
    found |= {f"asyncbench.benchmarks.{p.name}" for p in root.iterdir() if (p / "__init__.py").is_file()}
    return found - RUN_PATH_MAY_IMPORT


def test_the_run_path_imports_no_benchmark_by_contract() -> None:
    """Every benchmark module but the registry and the base types is forbidden to
    asyncbench.run (lint-imports enforces the contract); a benchmark added to the tree and
    not to the contract fails here."""
    modules = _benchmark_modules()
    contracts = [c for c in _contracts() if c.get("type") == "forbidden"
                 and "asyncbench.run" in c.get("source_modules", [])]
    forbidden = set().union(*(set(c.get("forbidden_modules", [])) for c in contracts))
    print("benchmark modules:", ", ".join(sorted(modules)), "| forbidden to asyncbench.run:", sorted(forbidden))
    assert modules <= forbidden, (f"not forbidden to asyncbench.run (pyproject.toml): {sorted(modules - forbidden)}")
    assert not forbidden & RUN_PATH_MAY_IMPORT, "the registry and the base types are the run path's way in"


def test_the_benchmark_listing_sees_every_benchmark() -> None:
    """The listing above can fail: it finds the packages and the single-file benchmarks."""
    modules = _benchmark_modules()
    assert {"asyncbench.benchmarks.longbench", "asyncbench.benchmarks.jsonl"} <= modules
    assert not modules & RUN_PATH_MAY_IMPORT


def _layered(contract: dict[str, object]) -> set[str]:
    layers = contract.get("layers", [])
    assert isinstance(layers, list)
    return {name.strip() for layer in layers for name in str(layer).split(":")}


def test_every_top_level_module_sits_in_a_layer() -> None:
    """A module outside the layers contract is one whose imports nothing checks: the
    last redesign added eight such modules before anyone noticed."""
    modules = {f"asyncbench.{p.stem}" for p in PKG.glob("*.py") if p.stem != "__init__"}
    modules |= {f"asyncbench.{p.name}" for p in PKG.iterdir() if (p / "__init__.py").is_file()}
    top = [c for c in _contracts() if c.get("type") == "layers" and not c.get("containers")]
    layered = set().union(*(_layered(c) for c in top))
    print("top-level modules:", len(modules), "| in a layer:", len(modules & layered))
    assert modules <= layered, f"not in the layers contract (pyproject.toml): {sorted(modules - layered)}"


def test_every_run_path_module_sits_in_a_layer_of_its_own_contract() -> None:
    modules = {p.stem for p in (PKG / "run").glob("*.py") if p.stem != "__init__"}
    inner = [c for c in _contracts() if c.get("type") == "layers" and "asyncbench.run" in c.get("containers", [])]
    assert inner, "no layers contract with containers = ['asyncbench.run']"
    assert modules <= _layered(inner[0]), f"not layered inside asyncbench.run: {sorted(modules - _layered(inner[0]))}"


def test_the_signature_rule_sees_every_spelling_of_an_untyped_mapping() -> None:
    source = '''
Row = dict[str, Any]
Rows = list[Row]
def a(x: dict[str, Any]) -> None: ...
def b(x: typing.Dict[str, typing.Any]) -> None: ...
def c() -> Mapping[str, Any]: ...
async def d(*, x: "MutableMapping[str, Any] | None") -> None: ...
def e(x: Rows) -> None: ...
def ok(x: dict[str, int], y: Mapping[str, object]) -> list[str]: ...
'''
    tree = ast.parse(source)
    aliases = _aliases(tree)
    flagged = [fn.name for fn in ast.walk(tree) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
               and any(_untyped_mapping(a, aliases) for a in
                       [*(p.annotation for p in [*fn.args.args, *fn.args.kwonlyargs] if p.annotation), fn.returns]
                       if a is not None)]
    assert aliases == {"Row", "Rows"} and flagged == ["a", "b", "c", "d", "e"]


# -- tests read the store through its API ------------------------------------------------

TESTS = REPO / "tests"
# Where a test may read the store's tables with SQL: the store's own tests (what its SQL
# does to the file), schema migrations (a cache as an older version left it, whose tables
# no method of today's store reads) and the secrets scan (every table, those that no
# method reads too). A whole file, or one function of it ("file::function").
STORE_SQL_READERS = {
    "test_journal_ingest.py": "the journal's ingest into the tables: the store's own test",
    "test_cache_damage.py": "damaged and foreign files, `cache recover`: the store's own test",
    "test_store_boundary.py": "the rule that keeps SQL inside asyncbench/store: the store's own test",
    "test_cache_size_memory.py": "unique keys without an index, v6 -> v7, memory of a large cache: the store's own test",
    "test_ledger.py::test_a_v1_cache_is_migrated_with_its_runs_history": "a v1 cache, migrated",
    "test_serving.py::test_a_v5_cache_is_migrated_with_no_timings": "a v5 cache, migrated",
    "test_prompt_cache.py::test_a_v3_cache_gains_the_cache_write_columns": "a v3 cache, migrated",
    "test_secrets.py::_stored_text": "a key searched for in every table of the file",
}
# Deliberate damage: a test that rewrites rows to make a hostile state opens the file
# itself (it reads nothing that way: what it asserts goes through the store's methods).
STORE_DAMAGE = {
    "test_hostile_numbers.py::test_a_cache_with_null_token_counts_from_an_earlier_version_reruns": "NULL counts",
    "test_memory_flat.py::test_windows_record_what_one_window_does_and_a_warm_rerun_writes_nothing": "a changed row",
    "test_reuse.py::_forget_mark": "a run's reuse mark removed",
    "test_reuse.py::test_what_could_change_a_score_takes_the_full_path": "an answer gone from the cache",
    "test_prompt_cache.py::test_only_requests_still_to_send_are_grouped": "answers gone from the cache",
}


def _store_tables() -> set[str]:
    import re

    schema = (PKG / "store" / "schema.py").read_text(encoding="utf-8")
    return set(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", schema)) | {"information_schema"}


def _reads_a_table(text: str, tables: set[str]) -> bool:
    """SQL that reads one of the store's tables: a SELECT (or WITH) from or joining it."""
    import re

    if not re.match(r"\s*(SELECT|WITH)\b", text, re.IGNORECASE):
        return False
    named = re.findall(r"\b(?:FROM|JOIN)\s+\"?(\w+)", text, re.IGNORECASE)
    return any(n.lower() in tables for n in named)


def _raw_store_reads(tree: ast.Module, tables: set[str]) -> list[tuple[str, int, str]]:
    """(the top-level function or '', line, what) for each raw read of the store: SQL
    text reading one of its tables (a literal, an f-string's text or a constant, whatever
    runs it: `.con.execute`, `.one(`, a connection of one's own) and `duckdb.connect` on a
    file (the in-memory `duckdb.connect()` reads no cache)."""
    found: list[tuple[str, int, str]] = []

    def visit(node: ast.AST, where: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not where:
            where = node.name
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "x"
                           for v in node.values)
            if _reads_a_table(text, tables):
                found.append((where, node.lineno, "reads a table with SQL"))
            return
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _reads_a_table(node.value, tables):
            found.append((where, node.lineno, "reads a table with SQL"))
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "connect"
                and _name(node.func.value) == "duckdb" and (node.args or node.keywords)):
            found.append((where, node.lineno, "opens the cache with duckdb.connect"))
        for child in ast.iter_child_nodes(node):
            visit(child, where)

    visit(tree, "")
    return found


def test_tests_read_the_store_through_its_api() -> None:
    """A test that queries the cache with SQL tests the table layout, not what the store
    promises: a schema change breaks it, and a method the code uses goes untested. Reads go
    through the named methods of store.cache / store.runs / store.batches."""
    tables = _store_tables()
    offenders = []
    for path in sorted(TESTS.glob("test_*.py")):
        if path.name in STORE_SQL_READERS:
            continue
        for where, line, what in _raw_store_reads(ast.parse(path.read_text(encoding="utf-8")), tables):
            at = f"{path.name}::{where}"
            if at in STORE_SQL_READERS or (at in STORE_DAMAGE and what.startswith("opens")):
                continue
            offenders.append(f"tests/{path.name}:{line} ({where or 'module'}) {what}")
    assert offenders == [], "read the store through store.cache/runs/batches:\n" + "\n".join(offenders)


def test_the_allowed_raw_readers_exist() -> None:
    """An allow-list entry names a file and function that are there (a stale one would
    let the next test of that name read the tables unseen)."""
    def functions(path: Path) -> set[str]:
        return {n.name for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}

    stale = []
    for at in [*STORE_SQL_READERS, *STORE_DAMAGE]:
        name, _, function = at.partition("::")
        path = TESTS / name
        if not path.is_file() or (function and function not in functions(path)):
            stale.append(at)
    assert stale == []


def test_the_raw_read_rule_sees_each_way_of_reading_a_table() -> None:
    source = '''
import duckdb
ROWS = "SELECT sample_id FROM results ORDER BY 1"
def a(store):
    return store.con.execute("select key from responses").fetchall()
def b(store):
    return store.one(f"SELECT count(*) FROM {'ledger_requests'} l JOIN runs r USING (run_id)")
def c(path):
    con = duckdb.connect(str(path), read_only=True)
def ok(path):
    duckdb.connect().execute("SELECT * FROM read_parquet('x.parquet')")
    con.execute("DELETE FROM responses WHERE key = (SELECT min(key) FROM responses)")
    con.execute("SELECT 1 FROM my_own_table")
'''
    found = _raw_store_reads(ast.parse(source), _store_tables())
    assert [(where, what.split()[0]) for where, _, what in found] == [
        ("", "reads"), ("a", "reads"), ("b", "reads"), ("c", "opens")]


# -- Any: few, and none hidden behind a name ----------------------------------------------
MAX_ANY = 121  # issue 37: at most 150; lower it as more go, never raise it


def _any_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    for node in ast.walk(tree):
        if (isinstance(node, ast.Name) and node.id == "Any") or (isinstance(node, ast.Attribute) and node.attr == "Any"):
            yield node


def test_the_package_holds_at_most_max_any_any() -> None:
    """Every `Any` is a value nothing checks; the count (imports aside) may only fall."""
    found = [_where(p, n) for p in sorted(PKG.rglob("*.py")) for n in _any_nodes(ast.parse(p.read_text()))]
    print(f"{len(found)} Any in the package (at most {MAX_ANY})")
    assert len(found) <= MAX_ANY, f"{len(found)} Any, over {MAX_ANY}: {found}"


def test_no_alias_of_any() -> None:
    """A name for Any (`JSON = Any`, `X: TypeAlias = Any`) would hide any number of them."""
    found = []
    for path in sorted(PKG.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
            if value is not None and any(True for _ in _any_nodes(value)) and not isinstance(value, ast.Call):
                found.append(_where(path, node))
    assert not found, f"aliases of Any: {found}"
