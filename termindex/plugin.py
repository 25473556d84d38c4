"""What an engine plug-in provides: one ``Engine`` record, registered in ``termindex.registry``.

Kept apart from the registry so that plug-in modules import only these types (the registry
imports the plug-ins: no cycle). A plug-in module must stay light (no client library, no numba at
import): its openers import the engine when called.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from vsparta.termindex.base import TermIndex
from vsparta.termindex.reader import AsyncReader


class BackendSpec(NamedTuple):
    """A parsed backend spec: engine name, location (a folder, a base URL) and index name (or None).

    A tuple, so ``engine, location, name = parse_spec(text)`` reads it as before. Parsed once where
    a spec comes in (a command line, a setting); what is passed on is this, not the text.
    """

    engine: str
    location: str
    name: str | None

    def __str__(self) -> str:
        """For messages: ``ENGINE:LOCATION`` or ``ENGINE+LOCATION/NAME`` (a spec of one node reads back)."""
        return f"{self.engine}+{self.location}/{self.name}" if self.name else f"{self.engine}:{self.location}"


@dataclass(frozen=True)
class CommandOptions:
    """Command-line options an engine's ``open`` takes from ``vsparta index`` (one argument group).

    Engines speaking the same protocol share one object: the group is added once.
    """

    title: str  # the group's title in --help
    add: Callable[[Any], None]  # adds the flags to an argparse group
    read: Callable[[argparse.Namespace], dict[str, Any]]  # the options given (empty: none); ValueError
    flags: str  # for "FLAGS need an Elasticsearch --backend"


def no_errors() -> tuple[type[BaseException], ...]:
    return ()


@dataclass(frozen=True)
class Engine:
    """One engine as the rest of the project sees it: how its specs read, how it opens, what the
    indexer's command line, the log setup and the service need to know about it."""

    name: str  # BackendSpec.engine: "embedded", "elasticsearch"
    label: str  # for people: "Elasticsearch"
    example: str  # a spec shown in messages: "http://HOST:PORT/INDEX"
    schemes: tuple[str, ...]  # the spec prefixes (before ":") it claims: "embedded", "http", ...
    parse: Callable[[str], BackendSpec]  # the whole spec; ValueError when malformed
    open: Callable[..., TermIndex]  # (spec, create=False, **options): the synchronous engine
    # (spec, request_timeout) -> the engine's own ``AsyncReader`` (``termindex.reader``); None: the
    # service runs the synchronous engine in threads (``ThreadedReader``).
    open_async: Callable[[BackendSpec, float], AsyncReader] | None = None
    paths: bool = False  # local files: a spec without a scheme (a plain path) is this engine's
    versions: bool = False  # an alias over versions: --new-version, `vsparta index rollback`
    index_options: CommandOptions | None = None
    client_loggers: tuple[str, ...] = ()  # loggers of its client library (quietened, filtered)
    # Client exceptions (imported when called) that mean the engine cannot serve: the service
    # answers 503. ``wrong_server``: the URL answers, but not as this engine (the 503 says so).
    unreachable: Callable[[], tuple[type[BaseException], ...]] = no_errors
    wrong_server: Callable[[], tuple[type[BaseException], ...]] = no_errors
    install_hint: str = ""  # what a missing client needs: "pip install 'vsparta[service]'"
