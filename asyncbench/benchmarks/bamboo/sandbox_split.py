"""What the PrivateEval checker runs itself and what it takes from the sandbox.

The release execs prompt + completion + test as one module. Split at the trust boundary,
the prompt's complete statements (its *set-up*: imports and the test's inputs) run in the
checker too (a process apart from the model's code), and only the names the problem's reference (canonical) solution
binds or changes cross from the sandbox; so a completion that rebinds the inputs
(`a = b = c = bn.numset([])`) changes nothing the test reads but its own answer.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

_IMPORT_LINE = ("import ", "from ")


def trusted_imports(prompt: str) -> str:
    """The prompt's top-level import statements: loaded in the sandbox before its CPU
    clock starts, and in the checker before the set-up."""
    lines = []
    for line in prompt.splitlines():
        if line.startswith(_IMPORT_LINE):
            try:
                tree = ast.parse(line)
            except SyntaxError:
                continue
            if all(isinstance(node, (ast.Import, ast.ImportFrom)) for node in tree.body):
                lines.append(line)
    return "\n".join(lines)


def imported_modules(imports: str) -> set[str]:
    """Top-level module names an import block loads."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(imports)):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0])
    return names


def _setup_of(prompt: str) -> tuple[str, ast.Module]:
    """The prompt's longest prefix of whole lines that parses: its complete statements,
    which the completion continues (a last line `c =`, or a function's body)."""
    lines = prompt.split("\n")
    for k in range(len(lines), -1, -1):
        text = "\n".join(lines[:k])
        try:
            return text, ast.parse(text)
        except SyntaxError:
            continue
    return "", ast.parse("")


def _root_name(node: ast.expr) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _changed_names(statements: Sequence[ast.stmt]) -> set[str]:
    """Module-level names the statements bind, and those they change in place: the root
    of an assigned or deleted subscript or attribute (`a[0] = 1`, `df.x = ...`), and
    the object and arguments of a call made for its effect (`a.sort()`,
    `np.copyto(b, a)`)."""
    names: set[str] = set()
    for statement in statements:
        for node in _module_level(statement):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                names.add(node.id)
            elif isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.ctx, (ast.Store, ast.Del)):
                names.add(_root_name(node) or "")
            elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
                call = node.value
                for target in (call.func, *call.args, *(k.value for k in call.keywords)):
                    if isinstance(target, ast.Attribute):
                        names.add(_root_name(target.value) or "")
                    elif isinstance(target, ast.Name) and target is not call.func:
                        names.add(target.id)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update((a.asname or a.name).split(".")[0] for a in node.names)
    names.discard("")
    return names


def _module_level(node: ast.AST) -> list[ast.AST]:
    """`node` and what is under it, not descending into function or class bodies or
    comprehensions (their names are not the module's)."""
    out: list[ast.AST] = [node]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.ListComp, ast.SetComp,
                         ast.DictComp, ast.GeneratorExp)):
        return out
    for child in ast.iter_child_nodes(node):
        out += _module_level(child)
    return out


def split_prompt(prompt: str, reference: str) -> tuple[str, tuple[str, ...]]:
    """(set-up, outputs) of a problem: the prompt's complete statements, which the
    checker runs itself, and the names the reference solution binds or changes (the
    statements of prompt + reference that are not the set-up's), which are all it takes
    from the sandbox. Names the set-up imports are the checker's own."""
    setup, setup_tree = _setup_of(prompt)
    try:
        full = ast.parse(prompt + reference + "\n")
    except SyntaxError:
        full = ast.parse(setup)
    spans = {(s.lineno, s.col_offset, s.end_lineno, s.end_col_offset) for s in setup_tree.body}
    completed = [s for s in full.body if (s.lineno, s.col_offset, s.end_lineno, s.end_col_offset) not in spans]
    imported = _changed_names([s for s in setup_tree.body if isinstance(s, (ast.Import, ast.ImportFrom))])
    return setup, tuple(sorted(_changed_names(completed) - imported))
