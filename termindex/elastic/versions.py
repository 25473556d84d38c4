"""Versioned indices behind an alias: ``<alias>-v<N>`` concrete indices, one of them aliased.

A re-index writes ``v<N+1>`` while searches keep hitting ``v<N>``, then one ``_aliases`` call
moves the alias (remove + add, atomic), so a search sees either the old or the new version,
never a mix. Old versions stay for ``rollback()`` (the newest ``keep_versions`` are kept).
``vsparta index --new-version`` loads this way; ``vsparta index rollback`` swaps back.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from elasticsearch import exceptions as es_errors

from vsparta.termindex.base import TermDocument
from vsparta.termindex.elastic.common import index_body
from vsparta.termindex.elastic.translate import errors
from vsparta.termindex.errors import IndexNotFound, InvalidQuery, TermIndexError

__all__ = ["IndexVersion", "Reindex", "VersionedAlias"]

log = logging.getLogger(__name__)


def missing_index(engine: str, spec_prefix: str, url: str, alias: str) -> str:
    """The sentence for an index or alias that is not there, with the command that builds one."""
    return (
        f"no {engine} index or alias {alias!r} at {url}; build one with "
        f"`vsparta index IMAGES --backend {spec_prefix}{url}/{alias}`"
    )


@dataclass(frozen=True)
class IndexVersion:
    """One concrete index behind the alias."""

    name: str
    number: int
    docs: int
    active: bool


class VersionedAlias:
    """The alias and its versions; ``ElasticsearchIndex`` inherits it (reads and writes are there)."""

    alias: str
    url: str
    engine_label: str
    spec_prefix: str
    _client: Any
    _shards: int
    _replicas: int
    _keep: int
    _codec: str

    def _finish_version(self, index: str) -> None:
        raise NotImplementedError

    @classmethod
    def _bound_to(cls, parent: Any, target: str) -> Any:
        """A view of ``parent`` writing straight to the concrete index ``target``."""
        raise NotImplementedError

    def _version_re(self) -> re.Pattern[str]:
        return re.compile(rf"^{re.escape(self.alias)}-v(\d+)$")

    def _check_exists(self) -> None:
        with errors("open", engine=self.engine_label):
            if not self._client.indices.exists(index=self.alias):
                raise IndexNotFound(missing_index(self.engine_label, self.spec_prefix, self.url, self.alias))

    def _ensure_alias(self) -> bool:
        """Create the alias over a first version unless it exists; True when it was made now."""
        found = self._indices_named()
        if self.alias in found:
            raise TermIndexError(
                f"{self.alias!r} is a concrete index, not an alias: this engine needs the name free "
                f"for an alias over versioned indices ({self.alias}-v1, ...)"
            )
        if found:
            return False  # the alias exists: found holds the versions behind it
        if not self._version_names() and self._create_first_version():
            return True
        if self._alias_appears():
            return False  # another writer's first version: it is being created right now
        version = self._create_version()
        self._swap_alias(version, current=[])
        self._finish_version(version)
        return True

    def _indices_named(self) -> set[str]:
        """The concrete indices the name resolves to, in one request: itself when it is a concrete
        index, the versions behind it when it is an alias, none when it is free. Two requests
        (is it an alias? is it an index?) can each go to another node of a cluster, and a writer
        starting at the same moment can create the alias between them, so that the name looked
        like a concrete index."""
        with errors("create", engine=self.engine_label):
            return set(self._client.indices.get(index=self.alias, ignore_unavailable=True))

    def _alias_appears(self, tries: int = 10, pause_s: float = 0.2) -> bool:
        """Versions exist but the alias did not: either orphans (a deleted alias) or another writer's
        first version, created with its alias in one request, read from a node whose cluster state
        had the index and not yet the alias (a client that spreads requests over several nodes
        sees that). Ask again for a moment before putting a second version behind the alias:
        an alias over two versions has no write index and refuses every write."""
        for _ in range(tries):
            with errors("create", engine=self.engine_label):
                if self._client.indices.exists_alias(name=self.alias):
                    return True
            time.sleep(pause_s)
        return False

    def _create_first_version(self) -> bool:
        """Create ``<alias>-v1`` and the alias in one request, so that jobs starting together
        (shards) cannot each put their own version behind the alias. True when the alias exists
        afterwards, whoever created it."""
        name = f"{self.alias}-v1"
        body = index_body(self._shards, 0, self._codec)
        body["aliases"] = {self.alias: {}}
        try:
            with errors("create version", engine=self.engine_label):
                self._client.indices.create(index=name, **body)
        except InvalidQuery as exc:
            if "resource_already_exists" not in str(exc):
                raise
            with errors("create", engine=self.engine_label):
                return bool(self._client.indices.exists_alias(name=self.alias))
        self._finish_version(name)
        log.info("alias %s -> %s (new)", self.alias, name)
        return True

    def _active(self) -> list[str]:
        with errors("read alias", engine=self.engine_label):
            try:
                return sorted(self._client.indices.get_alias(name=self.alias))
            except es_errors.NotFoundError:
                return []

    def _version_names(self) -> dict[str, int]:
        pattern = self._version_re()
        with errors("list versions", engine=self.engine_label):
            names = self._client.indices.get(index=f"{self.alias}-v*", ignore_unavailable=True)
        return {n: int(m.group(1)) for n in names if (m := pattern.match(n))}

    def _create_version(self) -> str:
        """Create ``<alias>-v<N+1>`` (retrying the number if a concurrent writer took it)."""
        for _ in range(5):
            number = max(self._version_names().values(), default=0) + 1
            name = f"{self.alias}-v{number}"
            try:
                with errors("create version", engine=self.engine_label):
                    self._client.indices.create(index=name, **index_body(self._shards, 0, self._codec))
                return name
            except InvalidQuery as exc:
                if "resource_already_exists" not in str(exc):
                    raise
        raise TermIndexError(f"could not allocate a new version of {self.alias!r}")

    def _swap_alias(self, version: str, current: list[str]) -> None:
        """One ``_aliases`` call: removing the old and adding the new happen atomically."""
        actions: list[dict[str, Any]] = [{"remove": {"index": c, "alias": self.alias}} for c in current]
        actions.append({"add": {"index": version, "alias": self.alias}})
        with errors("swap alias", engine=self.engine_label):
            self._client.indices.update_aliases(body={"actions": actions})
        log.info("alias %s -> %s (was %s)", self.alias, version, ", ".join(current) or "nothing")

    def list_versions(self) -> list[IndexVersion]:
        """Every ``<alias>-v<N>`` index, oldest first, with its document count."""
        versions = self._version_names()
        if not versions:
            return []
        active = set(self._active())
        with errors("list versions", engine=self.engine_label):
            rows = self._client.cat.indices(index=f"{self.alias}-v*", format="json", h="index,docs.count")
        counts = {r["index"]: int(r.get("docs.count") or 0) for r in rows}
        return [
            IndexVersion(name=n, number=v, docs=counts.get(n, 0), active=n in active)
            for n, v in sorted(versions.items(), key=lambda kv: kv[1])
        ]

    def begin_reindex(self) -> Reindex:
        """Start writing a new version; searches keep using the current one until ``commit``."""
        return Reindex(self, self._create_version())  # type: ignore[arg-type]

    def activate(self, version: str) -> None:
        """Point the alias at ``version`` (an existing ``<alias>-v<N>``), atomically."""
        if version not in self._version_names():
            raise IndexNotFound(f"{version!r} is not a version of {self.alias!r}")
        current = self._active()
        if current != [version]:
            self._swap_alias(version, [c for c in current if c != version] if version in current else current)

    def rollback(self, version: str | None = None) -> str:
        """Point the alias back at ``version`` or, by default, the newest one older than the active."""
        if version is None:
            versions = self._version_names()
            active = [versions[a] for a in self._active() if a in versions]
            if not active:
                raise IndexNotFound(f"alias {self.alias!r} points at no version")
            older = [n for n, v in versions.items() if v < min(active)]
            if not older:
                raise TermIndexError(
                    f"no version of {self.alias!r} older than the active one to roll back to"
                )
            version = max(older, key=versions.__getitem__)
        self.activate(version)
        return version

    def prune(self, keep: int | None = None) -> list[str]:
        """Delete all but the newest ``keep`` versions (never the active one); returns deleted names."""
        keep = self._keep if keep is None else keep
        if keep < 1:
            raise ValueError("keep must be >= 1")
        versions = sorted(self._version_names().items(), key=lambda kv: kv[1])
        active = set(self._active())
        doomed = [n for n, _ in versions[: max(0, len(versions) - keep)] if n not in active]
        for name in doomed:
            with errors("delete old version", engine=self.engine_label):
                self._client.indices.delete(index=name)
        return doomed

    def drop(self) -> None:
        """Delete the alias and every version (tests, ``--recreate``)."""
        names = list(self._version_names())
        with errors("drop", engine=self.engine_label):
            for name in names:
                self._client.indices.delete(index=name)


class Reindex:
    """A new version being written; ``commit()`` swaps the alias to it, ``abort()`` deletes it.

    As a context manager it commits on success and aborts on an exception::

        with index.begin_reindex() as new:
            new.upsert(docs)
    """

    def __init__(self, parent: VersionedAlias, version: str) -> None:
        # parent is an ElasticsearchIndex (which inherits VersionedAlias); named by its base here so
        # that this module does not import the engine that imports it.
        self.parent = parent
        self.version = version
        self.index = type(parent)._bound_to(parent, version)
        self._done = False

    def upsert(self, docs: Iterable[TermDocument]) -> int:
        # The version was created with refresh off; one refresh at commit makes it all visible.
        return self.index.upsert(docs, refresh=False)

    def delete(self, ids: Iterable[str]) -> int:
        return self.index.delete(ids, refresh=False)

    def count(self) -> int:
        self.index.refresh()
        return self.index.count()

    def commit(self) -> str:
        """Finish the load (settings, refresh), swap the alias atomically, prune old versions."""
        if self._done:
            raise TermIndexError(f"reindex into {self.version} already finished")
        p = self.parent
        p._finish_version(self.version)
        self.index.refresh()
        p._swap_alias(self.version, [c for c in p._active() if c != self.version])
        self._done = True
        pruned = p.prune()
        if pruned:
            log.info("deleted old versions %s", ", ".join(pruned))
        return self.version

    def abort(self) -> None:
        if self._done:
            return
        self._done = True
        with errors("abort reindex", engine=self.parent.engine_label):
            self.parent._client.indices.delete(index=self.version, ignore_unavailable=True)

    def __enter__(self) -> Reindex:
        return self

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()
