"""Static view of the project's import statements (``ast``), for the architecture tests.

Every ``import``/``from ... import`` is read, wherever it stands (module level, inside a function,
under ``TYPE_CHECKING``), so a deferred import counts like any other; only the ones under
``if TYPE_CHECKING:`` are marked, because they never run.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("retry_bot", "runner_wrapper")


@dataclass(frozen=True)
class ImportStmt:
    """One imported module name, where it is imported, and whether only a type checker sees it."""

    importer: str
    target: str
    path: Path
    line: int
    type_only: bool

    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def module_files(package: str) -> dict[str, Path]:
    """Dotted module name -> source file, for every module of ``package``."""
    base = ROOT / package
    out: dict[str, Path] = {}
    for path in sorted(base.rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    if not is_package:
        parts = parts[:-1]
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


def imports_of(module: str, path: Path, known: set[str] | frozenset[str] = frozenset()) -> list[ImportStmt]:
    """Every module ``module`` imports (``from a import b`` counts as ``a.b`` when that is a module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    out: list[ImportStmt] = []
    is_package = path.name == "__init__.py"

    def visit(node: ast.AST, type_only: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, True)
            for child in node.orelse:
                visit(child, type_only)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                out.append(ImportStmt(module, alias.name, path, node.lineno, type_only))
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, is_package, node)
            out.append(ImportStmt(module, base, path, node.lineno, type_only))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in known:
                    out.append(ImportStmt(module, sub, path, node.lineno, type_only))
        for child in ast.iter_child_nodes(node):
            visit(child, type_only)

    visit(tree, False)
    return out


def all_imports() -> list[ImportStmt]:
    """The import statements of every module of both packages."""
    files: dict[str, Path] = {}
    for package in PACKAGES:
        files.update(module_files(package))
    known = set(files)
    out: list[ImportStmt] = []
    for module, path in files.items():
        out.extend(imports_of(module, path, known))
    return out


def within(name: str, prefix: str) -> bool:
    """``name`` is ``prefix`` or one of its submodules."""
    return name == prefix or name.startswith(prefix + ".")
