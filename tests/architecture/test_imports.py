"""Imports: every module loads, nothing hides a broken import, the core stays free of edges.

Issue 14: a guard such as ``try: from retry_bot.x import y / except ImportError: ...`` turns a
broken module into a silently missing feature; a core module (classification, policy, decision,
prediction, plain data) that imports an edge (GitLab, the state store, HTTP, SQL) can no longer be
tested or replayed without it.  Both are checked statically, on the import statements (``ast``),
deferred imports included; ``if TYPE_CHECKING:`` imports never run and do not count.
"""

from __future__ import annotations

import ast
import collections
import importlib

import pytest

from tests.architecture.imports import PACKAGES, ROOT, ImportStmt, all_imports, module_files, within

MODULES = sorted(m for p in PACKAGES for m in module_files(p))

#: The pure core (issue 14 point 4): plain functions over dataclasses.
CORE = ("retry_bot.classify", "retry_bot.policy", "retry_bot.decide", "retry_bot.predict", "retry_bot.model")
#: Edges: GitLab, durable state, the servers, the live bot's I/O loop, and the libraries that do I/O.
EDGES = (
    "retry_bot.gitlab", "retry_bot.state", "retry_bot.server", "retry_bot.httpserver", "retry_bot.live.webhook",
    "retry_bot.live.daemon", "retry_bot.live.poller", "retry_bot.live.actions", "retry_bot.commands", "retry_bot.cli",
    "standin.demo", "retry_bot.report", "retry_bot.live.config", "retry_bot.live.metrics",
    "http", "urllib.request", "socket", "socketserver", "ssl", "sqlite3", "psycopg", "gitlab", "gql",
    "requests", "httpx", "subprocess",
)


@pytest.mark.parametrize("module", [m for m in MODULES if not m.endswith("__main__")])
def test_every_module_imports(module: str) -> None:
    """A broken import anywhere in either package fails here, by name (``__main__`` modules run a CLI)."""
    importlib.import_module(module)


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    names = []
    for node in ([handler.type] if handler.type is not None else []):
        names.extend(n.id if isinstance(n, ast.Name) else getattr(n, "attr", "")
                     for n in (node.elts if isinstance(node, ast.Tuple) else [node]))
    return handler.type is None or bool({"ImportError", "ModuleNotFoundError"} & set(names))


def _own_imports(body: list[ast.stmt]) -> list[tuple[int, str]]:
    """Project modules imported in ``body`` (statements, or ``importlib.import_module("retry_bot...")``)."""
    out: list[tuple[int, str]] = []
    for stmt in body:
        for node in ast.walk(stmt):
            name = ""
            if isinstance(node, ast.Import):
                name = node.names[0].name
            elif isinstance(node, ast.ImportFrom):
                name = "." if node.level else (node.module or "")
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr == "import_module" and node.args):
                arg = node.args[0]
                if isinstance(arg, ast.Constant):
                    name = str(arg.value)
                elif isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
                    name = str(arg.values[0].value)
            if name == "." or name.split(".")[0] in PACKAGES:
                out.append((node.lineno, name))
    return out


def test_no_import_error_guard_around_the_projects_own_modules() -> None:
    """``except ImportError`` may guard only optional third-party or C modules (psycopg, ``_json``)."""
    found = []
    for package in PACKAGES:
        for module, path in module_files(package).items():
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.Try) and any(_catches_import_error(h) for h in node.handlers):
                    for line, name in _own_imports(node.body):
                        found.append(f"{path.relative_to(ROOT)}:{line}: {name} is imported under a guard "
                                     "that catches ImportError")
    assert not found, "a broken project module must fail loudly:\n" + "\n".join(found)


def _graph(imports: list[ImportStmt]) -> dict[str, list[ImportStmt]]:
    """Importer -> its (run-time) imports; importing ``a.b.c`` also runs ``a/__init__`` and ``a/b/__init__``."""
    modules = set(MODULES)
    graph: dict[str, list[ImportStmt]] = collections.defaultdict(list)
    for stmt in imports:
        if stmt.type_only:
            continue
        graph[stmt.importer].append(stmt)
        parts = stmt.target.split(".")
        for i in range(1, len(parts)):
            parent = ".".join(parts[:i])
            if parent in modules and parent != stmt.importer and not within(stmt.importer, parent):
                graph[stmt.importer].append(ImportStmt(stmt.importer, parent, stmt.path, stmt.line, False))
    return graph


def core_edge_violations(imports: list[ImportStmt]) -> list[str]:
    """Every way a core module reaches an edge, directly or through other project modules, with the lines."""
    graph = _graph(imports)
    project = set(MODULES)
    problems = []
    for start in sorted(m for m in project if any(within(m, c) for c in CORE)):
        # breadth-first over project modules; the chain of import statements is kept for the message
        chains: dict[str, list[ImportStmt]] = {start: []}
        queue = collections.deque([start])
        while queue:
            mod = queue.popleft()
            for stmt in graph.get(mod, ()):
                if any(within(stmt.target, e) for e in EDGES):
                    chain = chains[mod] + [stmt]
                    problems.append(f"{start} imports the edge {stmt.target}: " + " -> ".join(
                        f"{s.importer} ({s.where()})" for s in chain) + f" -> {stmt.target}")
                elif stmt.target in project and stmt.target not in chains:
                    chains[stmt.target] = chains[mod] + [stmt]
                    queue.append(stmt.target)
    return sorted(set(problems))


def test_core_modules_import_no_edge() -> None:
    problems = core_edge_violations(all_imports())
    assert not problems, "core modules must stay pure (issue 14):\n" + "\n".join(problems)


def test_the_boundary_check_sees_direct_deferred_and_indirect_imports() -> None:
    """The checker itself: a deferred edge import in a core module, and one reached through a helper."""
    direct = ImportStmt("retry_bot.decide", "retry_bot.state.store", ROOT / "retry_bot/decide.py", 7, False)
    via = [ImportStmt("retry_bot.policy.load", "retry_bot.storm", ROOT / "retry_bot/policy/load.py", 9, False),
           ImportStmt("retry_bot.storm", "sqlite3", ROOT / "retry_bot/storm.py", 3, False)]
    typed = ImportStmt("retry_bot.model", "retry_bot.gitlab.client", ROOT / "retry_bot/model.py", 5, True)
    found = core_edge_violations([direct, *via, typed])
    assert any("retry_bot.decide imports the edge retry_bot.state.store" in p and "decide.py:7" in p for p in found)
    assert any(p.startswith("retry_bot.policy.load imports the edge sqlite3") and "storm.py:3" in p for p in found)
    assert not any("retry_bot.model " in p for p in found)


def _core_cycles(imports: list[ImportStmt]) -> list[list[str]]:
    """Strongly connected components (more than one module) that contain a core module."""
    graph = {m: sorted({s.target for s in stmts if s.target in set(MODULES) and s.target != m})
             for m, stmts in _graph(imports).items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 and any(within(m, c) for m in comp for c in CORE):
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_core_modules_form_no_import_cycle() -> None:
    cycles = _core_cycles(all_imports())
    assert not cycles, "import cycles through core modules:\n" + "\n".join(" <-> ".join(c) for c in cycles)
