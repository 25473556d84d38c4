"""No import cycles between the project's modules (issue 15: bench/cli.py <-> bench/topn.py).

Static: every `import` and `from ... import` in a module, at any depth (lazy imports inside
functions count: a cycle through them still ties two modules together), and every string that
is exactly a project module's name (`importlib.import_module("literal")`, but also the tables
that name modules to import later: `vsparta.cli.SUBCOMMANDS`, `termindex.registry.PLUGINS`).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("vsparta", "core", "model", "indexer", "termindex", "service", "bench", "scenes")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[0] != "vsparta":  # model/, indexer/, ... install as vsparta.model, vsparta.indexer, ...
        parts.insert(0, "vsparta")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules: set[str]) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = [node.value]  # a module named in a string is imported by name somewhere
        found |= {n for n in names if n in modules}
    return found


def _graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}
    modules = set(files)
    graph = {name: _imports(path, modules) for name, path in files.items()}
    for name, deps in graph.items():  # a package's __init__ is not an edge back to its own modules
        deps.discard(name)
        deps -= {d for d in deps if name.startswith(d + ".") and files[d].name == "__init__.py"}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_checker_sees_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_bench_cli_and_topn_no_longer_import_each_other() -> None:
    graph = _graph()
    assert "vsparta.bench.topn" in graph["vsparta.bench.cli"]  # the CLI wires the benchmark in ...
    assert "vsparta.bench.cli" not in graph["vsparta.bench.topn"]  # ... options: bench.options
    assert "vsparta.bench.options" in graph["vsparta.bench.topn"]


def test_module_names_in_strings_are_edges() -> None:
    graph = _graph()
    assert "vsparta.indexer.cli" in graph["vsparta.cli"]  # SUBCOMMANDS, imported when chosen
    assert "vsparta.termindex.elastic.plugin" in graph["vsparta.termindex.registry"]  # PLUGINS


def test_no_import_cycles() -> None:
    assert _cycles(_graph()) == []


# Folders that install as vsparta.<name>; importing them by the bare name would load a second copy
# of each module (two class identities) whenever the repository root is on sys.path.
BARE = {"core", "model", "indexer", "termindex", "service", "bench"}
# A benchmark that imports an older source tree (from before the namespace) by its own names.
OLD_TREE_READERS = {"bench/embedded_search_ab.py"}


def test_project_modules_are_imported_by_their_vsparta_name_only() -> None:
    offenders = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith((".venv/", "build/")) or rel in OLD_TREE_READERS:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif _import_module_call(node):
                names = [_leading_text(node.args[0])]  # type: ignore[attr-defined]
            offenders += [f"{rel}:{node.lineno} {n}" for n in names if n.split(".")[0] in BARE]
    assert offenders == []


def _import_module_call(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "import_module"
        and bool(node.args)
    )


def _leading_text(arg: ast.expr) -> str:
    """The literal start of a module name: a string, or an f-string's text before its first field
    (``f"bench.{task}"`` -> ``bench.``: a bare name only the repository root on sys.path finds)."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
        return str(arg.values[0].value)
    return ""
