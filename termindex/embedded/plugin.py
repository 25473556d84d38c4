"""The embedded engine's registration (``termindex.registry.PLUGINS``): ``embedded:PATH`` or a path."""

from __future__ import annotations

from typing import Any

from vsparta.termindex.base import TermIndex
from vsparta.termindex.plugin import BackendSpec, Engine

PREFIX = "embedded:"


def parse(spec: str) -> BackendSpec:
    path = spec[len(PREFIX) :] if spec.startswith(PREFIX) else spec
    if not path:
        raise ValueError("embedded spec needs a directory: embedded:/path/to/index")
    return BackendSpec("embedded", path, None)


def open_index(spec: BackendSpec, create: bool = False, **options: Any) -> TermIndex:
    from vsparta.termindex.embedded.index import EmbeddedIndex

    return EmbeddedIndex(spec.location, create=create, **options)


ENGINE = Engine(
    name="embedded",
    label="embedded",
    example="embedded:/path/to/index",
    schemes=("embedded",),
    parse=parse,
    open=open_index,
    paths=True,
)
