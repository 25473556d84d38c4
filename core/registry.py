"""Named choices (a vision stem, a query weighting, a reranker) as registries of plug-in modules.

Shaped like ``termindex.registry`` for engines: a registry maps each name to the module that
implements it, one line per choice, and imports a module only when its choice is used, so a
command's ``--help``, the settings' allowed values and the OpenAPI enum list every name without
importing torch or a client library. Adding a choice is one new module and one line in its
registry; nothing else names the choices (``tests/test_registries.py``).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class UnknownChoice(ValueError):
    """A name no registry entry has; the message lists the names there are."""


class Registry(Generic[T]):
    """``name -> module path``; the module defines ``attribute`` (the choice itself)."""

    def __init__(self, kind: str, modules: Mapping[str, str], attribute: str) -> None:
        self.kind = kind  # for messages: "vision stem", "query weighting"
        self._modules = dict(modules)
        self.attribute = attribute
        self._loaded: dict[str, T] = {}

    def names(self) -> tuple[str, ...]:
        """Every registered name, in registration order (no module is imported)."""
        return tuple(self._modules)

    def __contains__(self, name: object) -> bool:
        return name in self._modules

    def check(self, name: Any) -> str:
        """``name`` if registered, else ``UnknownChoice`` naming the choices."""
        if not isinstance(name, str) or name not in self._modules:
            raise UnknownChoice(f"unknown {self.kind} {name!r}: one of {', '.join(self._modules)}")
        return name

    def get(self, name: str) -> T:
        """The choice registered as ``name`` (its module is imported on first use)."""
        self.check(name)
        if name not in self._loaded:
            module = importlib.import_module(self._modules[name])
            self._loaded[name] = getattr(module, self.attribute)
        return self._loaded[name]

    def module_of(self, name: str) -> str:
        return self._modules[self.check(name)]

    def register(self, name: str, module: str) -> None:
        """Add a choice at run time (a user's own module); a name is registered once."""
        if name in self._modules and self._modules[name] != module:
            raise ValueError(f"{self.kind} {name!r} is already registered ({self._modules[name]})")
        self._modules[name] = module
