"""The engines, and every decision that depends on which one a spec names.

An engine registers by adding its plug-in module (which defines ``ENGINE``, a
``termindex.plugin.Engine``) to ``PLUGINS`` below, or at run time with ``register``. ``open_index``,
the service, the indexer's command line, the log setup and the benchmarks ask here; none of them
names an engine. Plug-ins load at first use, and importing one imports no client library.
``open_reader`` gives the serving side of an index (``termindex.reader``), whichever the engine.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import re
from typing import Any

from vsparta.termindex.base import TermIndex
from vsparta.termindex.plugin import BackendSpec, Engine
from vsparta.termindex.reader import AsyncReader, ThreadedReader

# One registration line per engine.
PLUGINS = (
    "vsparta.termindex.embedded.plugin",
    "vsparta.termindex.elastic.plugin",
    "vsparta.termindex.opensearch.plugin",
)

_SCHEME = re.compile(r"^([A-Za-z][\w+.-]+):")  # two letters at least: "C:\\index" stays a path
_ENGINES: dict[str, Engine] = {}
_loaded = False


def register(engine: Engine) -> None:
    """Add an engine; its name and schemes must be new (one engine per scheme)."""
    taken = {s: e.name for e in _ENGINES.values() for s in e.schemes}
    clash = [s for s in engine.schemes if s in taken and taken[s] != engine.name]
    if clash:
        raise ValueError(f"engine {engine.name!r}: scheme(s) {clash} already belong to {taken[clash[0]]!r}")
    if engine.paths and any(e.paths for e in _ENGINES.values() if e.name != engine.name):
        raise ValueError(f"engine {engine.name!r}: plain paths already belong to another engine")
    _ENGINES[engine.name] = engine


def engines() -> list[Engine]:
    """Every registered engine, in registration order."""
    global _loaded
    if not _loaded:
        _loaded = True
        for module in PLUGINS:
            register(importlib.import_module(module).ENGINE)
    return list(_ENGINES.values())


def engine(name: str) -> Engine:
    """The engine registered as ``name`` (a ``BackendSpec.engine``)."""
    for e in engines():
        if e.name == name:
            return e
    raise ValueError(f"no engine named {name!r}: known are {', '.join(e.name for e in engines())}")


def parse_spec(spec: str) -> BackendSpec:
    """Split a backend spec into (engine, location, index name); ValueError if malformed.

    ``SCHEME:REST`` goes to the engine that claims SCHEME (``embedded:``, ``http://``,
    ``elasticsearch+http://`` ...); a spec without one is a path, the embedded engine's.
    """
    match = _SCHEME.match(spec)
    if match is None:
        return next(e for e in engines() if e.paths).parse(spec)
    for e in engines():
        if match.group(1) in e.schemes:
            return e.parse(spec)
    examples = " or ".join(e.example for e in engines())
    raise ValueError(f"unknown backend {spec!r}: use {examples}")


def engine_of(spec: str | BackendSpec) -> Engine:
    """The engine a spec (text or parsed) names."""
    return engine((parse_spec(spec) if isinstance(spec, str) else spec).engine)


def open_index(spec: str | BackendSpec, *, create: bool = False, **options: Any) -> TermIndex:
    """Open (or with ``create=True`` create) the index a spec (text or parsed) names. Engines
    import lazily."""
    parsed = parse_spec(spec) if isinstance(spec, str) else spec
    return engine(parsed.engine).open(parsed, create=create, **options)


def open_reader(spec: str | BackendSpec, request_timeout: float, *, warm: bool = True) -> AsyncReader:
    """The serving side of the index a spec names (``termindex.reader``): the engine's own async
    reader, or its synchronous engine in threads (opened at the first call or at ``start``, waiting
    at most ``request_timeout`` for that; ``warm``: warm it up first). Contacts nothing yet.

    ``RuntimeError`` when the engine's client library is not installed (its install hint).
    """
    parsed = parse_spec(spec) if isinstance(spec, str) else spec
    chosen = engine(parsed.engine)
    if chosen.open_async is None:
        return ThreadedReader(lambda: chosen.open(parsed, create=False), request_timeout, warm=warm)
    try:
        return chosen.open_async(parsed, request_timeout)
    except ImportError as exc:
        hint = chosen.install_hint
        raise RuntimeError(f"backend {spec!r} needs the {chosen.label} client: {hint}") from exc


def client_loggers() -> list[str]:
    """The loggers of every engine's client library, each once (engines may share a client)."""
    return list(dict.fromkeys(name for e in engines() for name in e.client_loggers))


def quiet_client_loggers(level: int = logging.ERROR) -> None:
    """Clients log a line per request and a traceback per failed attempt: only ``level`` and up."""
    for name in client_loggers():
        logging.getLogger(name).setLevel(level)


def _option_groups() -> list[tuple[Any, list[Engine]]]:
    groups: dict[int, tuple[Any, list[Engine]]] = {}
    for e in engines():
        if e.index_options is not None:
            groups.setdefault(id(e.index_options), (e.index_options, []))[1].append(e)
    return list(groups.values())


def add_index_arguments(parser: argparse.ArgumentParser) -> None:
    """Each engine's ``vsparta index`` options, one argument group per set."""
    for options, _ in _option_groups():
        options.add(parser.add_argument_group(options.title))


def index_options(backend: BackendSpec | None, args: argparse.Namespace) -> dict[str, Any]:
    """The engine options ``vsparta index`` was given; ValueError when they do not fit ``backend``."""
    out: dict[str, Any] = {}
    for options, owners in _option_groups():
        given = options.read(args)
        if given and (backend is None or backend.engine not in {e.name for e in owners}):
            labels = " or ".join(e.label for e in owners)
            raise ValueError(f"{options.flags} need an {labels} --backend")
        out.update(given)
    return out


def versioned_examples() -> str:
    """Specs of the engines that keep versions (for "rollback needs ..." messages)."""
    return " or ".join(e.example for e in engines() if e.versions)
