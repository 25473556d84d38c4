"""The packages stand on floors, and a module imports only from the floors below its own (or from
its own package): the ground floor needs nothing of the model, the model nothing of the service.

Edges are read statically by ``test_import_cycles._graph`` (lazy imports and module names in
strings count). The top floor holds the entry points: the ``vsparta`` console script names every
subcommand's module, ``bench`` included, and the benchmarks run ``python -m vsparta.cli``.
"""

from __future__ import annotations

from test_import_cycles import _graph

# Lowest first. docs/architecture.md section 1 describes each package.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("core",),  # I/O, ids, errors, progress, file walking
    ("termindex",),  # the engines
    ("model",),  # the model, its tokenizer and preprocessing, training, evaluation
    ("indexer", "service", "scenes"),  # the batch job, the query service, the generated benchmarks
    ("cli", "bench"),  # the console script and demo wiring (vsparta/*.py), the benchmarks
)


def _package(module: str) -> str:
    """``vsparta.model.train`` -> ``model``; the top-level ``vsparta/`` modules -> ``cli``."""
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in {p for floor in FLOORS for p in floor}:
        return parts[1]
    return "cli"


def _floor(package: str) -> int:
    return next(i for i, floor in enumerate(FLOORS) if package in floor)


def _violations(graph: dict[str, set[str]]) -> list[str]:
    out = []
    for module, deps in sorted(graph.items()):
        own = _package(module)
        for dep in sorted(deps):
            other = _package(dep)
            if other == own:
                continue
            if _floor(other) < _floor(own) or _floor(own) == len(FLOORS) - 1 == _floor(other):
                continue
            where = f"{module} ({own}, floor {_floor(own)})"
            out.append(f"{where} imports {dep} ({other}, floor {_floor(other)})")
    return out


def test_every_package_has_a_floor() -> None:
    packages = {_package(m) for m in _graph()}
    assert packages == {p for floor in FLOORS for p in floor}


def test_the_checker_sees_an_import_from_above() -> None:
    graph = {"vsparta.model.train": {"vsparta.service.app"}, "vsparta.service.app": {"vsparta.core.ids"}}
    assert _violations(graph) == [
        "vsparta.model.train (model, floor 2) imports vsparta.service.app (service, floor 3)"
    ]


def test_no_module_imports_from_its_own_floor_or_above() -> None:
    assert _violations(_graph()) == []


def test_the_ground_floor_imports_no_project_package() -> None:
    graph = _graph()
    core = {m: deps for m, deps in graph.items() if _package(m) == "core"}
    assert core and all(_package(d) == "core" for deps in core.values() for d in deps)
