"""A project module imported inside a function must say why, once, in its module's docstring.

Such an import is kept only where it keeps a command's start fast (`groupscope --help` must not
load Spark, Streamlit, the Java reader and the like before a subcommand is chosen) or breaks an
import cycle; everywhere else it belongs at the top, where readers and `lint-imports` look
first. The reason is one sentence of the module's docstring beginning "Imports inside
functions", so a reader finds it without hunting through function bodies. Pure AST: nothing is
imported, and the check takes well under a second.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("backend", "dashboard")
SENTENCE = "Imports inside functions"


def _is_project(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] in PACKAGES
    return any(alias.name.split(".")[0] in PACKAGES for alias in node.names)


def _local_imports(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    """Project imports anywhere inside a function or method body, nested ones included."""
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            for stmt in fn.body:
                for node in ast.walk(stmt):
                    if isinstance(node, ast.Import | ast.ImportFrom) and _is_project(node):
                        yield node


def _modules() -> Iterator[tuple[str, ast.Module]]:
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            yield path.relative_to(REPO).as_posix(), ast.parse(path.read_text(), str(path))


def _undocumented() -> dict[str, str]:
    """Module -> what is wrong, for every module with a function-local project import whose
    docstring does not give the reason exactly once."""
    found: dict[str, str] = {}
    for name, tree in _modules():
        lines = sorted({node.lineno for node in _local_imports(tree)})
        if not lines:
            continue
        said = (ast.get_docstring(tree) or "").count(SENTENCE)
        if said != 1:
            where = ", ".join(str(n) for n in lines)
            found[name] = f"{'no' if said == 0 else said} {SENTENCE!r} (local imports: {where})"
    return found


def test_every_module_with_a_local_project_import_says_why() -> None:
    offenders = _undocumented()
    assert not offenders, (
        "hoist these imports to the module's top, or, where one keeps a command's start fast or "
        f"breaks an import cycle, say why in one docstring sentence beginning {SENTENCE!r}:\n"
        + "\n".join(f"  {name}: {why}" for name, why in sorted(offenders.items())))

