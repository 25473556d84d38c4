"""The 7.17 client's transports with this project's server check (``elastic.servers``).

Clients from 7.14 on call ``GET /`` once before their first request and refuse a server that
is not Elasticsearch. These transports do that call themselves and hand the answer to
``servers.check_product`` (the product the spec names, a warning for an untested version), then
ask the nodes for their modules once (``servers.check_modules``: ``rank_features`` present). A
refused server fails the first request, in one sentence; no search pays for the check again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Generator, Iterable, Mapping
from itertools import chain
from typing import Any

from elasticsearch import AsyncElasticsearch, AsyncTransport, Elasticsearch, Transport
from elasticsearch.exceptions import (
    AuthenticationException,
    AuthorizationException,
    ConnectionError,
    SerializationError,
    TransportError,
)

from vsparta.termindex.elastic import hedging, servers
from vsparta.termindex.elastic.masters import MasterProbe, steer

__all__ = ["AsyncCheckedClient", "AsyncCheckedTransport", "CheckedClient", "CheckedTransport"]

log = logging.getLogger(__name__)


def _accept_json(headers: Mapping[str, str] | None) -> dict[str, str]:
    out = {k.lower(): v for k, v in (headers or {}).items()}
    out.setdefault("accept", "application/json")
    return out


def _no_root(err: TransportError) -> bool:
    """``GET /`` answered 405: a server without the rest-root module (``servers.identify_headless``)."""
    return not isinstance(err, ConnectionError) and err.status_code == 405


Request = tuple[Any, str]  # (connection, path)
CHECK_TIMEOUT_S = 2.0  # a node answers GET / from itself, in milliseconds


def _check(product: str, connections: Iterable[Any]) -> Generator[Request, servers.Answer, bool | None]:
    """The check as steps (as ``reads``): yields (connection, path) of each GET, is sent its answer
    or has its error thrown in. Returns the verdict, or None when no connection answered. With
    several nodes, every other node that answers ``GET /`` too must be another node of the same
    cluster (``servers.check_one_cluster``)."""
    conns = list(dict.fromkeys(connections))  # the pool's connections are also its seeds
    roots: dict[Any, Any] = {}
    verdict = yield from _check_product(product, conns, roots)
    if verdict is not True or len(conns) < 2:
        return verdict
    for conn in conns:
        if conn in roots:
            continue
        try:
            roots[conn] = (yield conn, "/")[1]
        except (TransportError, SerializationError):
            continue  # a node down or not answering: the others decide
    servers.check_one_cluster({getattr(c, "host", str(c)): info for c, info in roots.items()})
    return verdict


def _check_product(
    product: str, conns: list[Any], roots: dict[Any, Any]
) -> Generator[Request, servers.Answer, bool | None]:
    """Product and modules, from the first connection that answers; its ``GET /`` goes to ``roots``."""
    error: Exception | None = None
    for conn in conns:
        root: servers.Answer | None = None
        try:
            root = yield conn, "/"
        except (AuthenticationException, AuthorizationException):
            return True  # the client's own rule: no rights to ask, no check
        except TransportError as err:
            if not _no_root(err):
                error = error or err
                continue
        except SerializationError:
            servers.refuse_unknown()  # answered, but not JSON: a web server, not a search server
        server = servers.check_product(product, *root) if root is not None else None
        if root is not None:
            roots[conn] = root[1]
        try:
            nodes = yield conn, servers.MODULES_PATH
        except (AuthenticationException, AuthorizationException):
            return True  # a key without cluster:monitor rights: the mapping or query error says it later
        except (TransportError, SerializationError) as err:
            if root is None or isinstance(err, ConnectionError):
                raise
            return True  # an answer from GET / but none we can read here: the product check stands
        servers.check_modules(server or servers.identify_headless(product, nodes), nodes)
        return True
    if error is not None:
        raise error
    return None


def _check_timeout(timeout: float | None, connection: Any, path: str) -> float | None:
    """The service's check's wait for one request: ``GET /`` at most ``CHECK_TIMEOUT_S``, the
    modules (which wait for every node, up to their own 3 s) the request's timeout. A host that
    takes requests and never answers (hung, stopped) costs the check that long; with the service's
    whole timeout for it, the check of a host list holding one never ended within that timeout,
    every request began it again, and no search was ever answered (bench.hedged_reads). The batch
    job's client, which may wait, keeps its timeout for both."""
    if path != "/":
        return timeout
    own = getattr(connection, "timeout", None)
    wanted = timeout if timeout is not None else own if isinstance(own, int | float) else CHECK_TIMEOUT_S
    return min(float(wanted), CHECK_TIMEOUT_S)


def _answer(deserializer: Any, got: Mapping[str, str], raw: Any) -> servers.Answer:
    return {k.lower(): v for k, v in got.items()}, deserializer.loads(raw, mimetype="application/json")


class CheckedTransport(Transport):  # type: ignore[misc]
    """``Transport`` whose product check is ``servers``' (``product``: what the spec names)."""

    product = "elasticsearch"

    def _do_verify_elasticsearch(self, headers: Any, timeout: Any) -> None:
        with self._verify_elasticsearch_lock:
            if self._verified_elasticsearch is not None:
                return
            steps = _check(self.product, chain(self.connection_pool.connections, self.seed_connections))
            ask = _accept_json(headers)
            try:
                conn, path = next(steps)
                while True:
                    try:
                        _, got, raw = conn.perform_request("GET", path, headers=ask, timeout=timeout)
                        answer = _answer(self.deserializer, got, raw)
                    except Exception as err:  # handed to the steps, which decide
                        conn, path = steps.throw(err)
                    else:
                        conn, path = steps.send(answer)
            except StopIteration as done:
                self._verified_elasticsearch = done.value


class AsyncCheckedTransport(AsyncTransport):  # type: ignore[misc]
    """``AsyncTransport`` with ``CheckedTransport``'s check, awaited; with several hosts, searches
    leave out those without a master and prefer the others' shard copies (``elastic.masters``), and
    a slow read is sent again to another host (``hedge``, ``elastic.hedging``)."""

    product = "elasticsearch"
    masters: MasterProbe | None = None
    _probing: asyncio.Task[None] | None = None

    def __init__(self, hosts: Any, *args: Any, hedge: hedging.Hedge | None = None, **kwargs: Any) -> None:
        super().__init__(hosts, *args, **kwargs)
        self.hedge = hedge

    async def _async_init(self) -> None:
        await super()._async_init()
        hosts = tuple(getattr(self.connection_pool, "orig_connections", ()))
        if len(hosts) > 1:
            self.masters = MasterProbe(self.product)
            self._probing = asyncio.get_running_loop().create_task(self.masters.run(hosts))

    def get_connection(self) -> Any:
        """The pool's next host, passing over those the probe last saw without a master and, for a
        hedged read's second attempt, the host its first used; when every host is passed over, the
        next that only the hedge would pass over, else the pool's own next (the engine decides)."""
        route = hedging.current_route()
        connection = super().get_connection()
        if self.masters is not None or route is not None:
            seen = [connection]
            for _ in range(len(self.connection_pool.connections) - 1):
                if self._rank(seen[-1], route) == 0:
                    break
                seen.append(super().get_connection())
            connection = min(seen, key=lambda c: self._rank(c, route))
        if route is not None:
            route.used.append(connection)
        return connection

    def _rank(self, connection: Any, route: hedging.Route | None) -> int:
        """0: a host to use; 1: one only a hedge's first attempt used; 2: one without a master."""
        if self.masters is not None and not self.masters.usable(connection):
            return 2
        return int(route is not None and connection in route.avoid)

    async def perform_request(
        self, method: str, url: str, headers: Any = None, params: Any = None, body: Any = None
    ) -> Any:
        """The client's request; while some host has no master, reads prefer the copies on the
        nodes that know one (``masters.steer``); with several hosts, a slow read is hedged."""
        await self._async_call()  # the probe starts there: the first request too is steered and hedged
        if self.masters is not None:
            params, body = steer(self.masters.preference, method, url, params, body)

        def attempt() -> Any:
            return super(AsyncCheckedTransport, self).perform_request(
                method, url, headers=headers, params=params, body=body
            )

        if self.hedge is not None and self.masters is not None and hedging.is_read(method, url):
            return await self.hedge.run(attempt, give_up=self._give_up)
        return await attempt()

    def _give_up(self, connection: Any) -> None:
        """Leave out a host whose reads other hosts kept answering first, as the client leaves out
        one it cannot reach: for the pool's dead timeout (60 s, doubling while it stays so)."""
        log.warning(
            "reads leave out %s for a while: another host answered its last %d hedged reads first",
            getattr(connection, "host", connection),
            hedging.STRIKES,
        )
        self.connection_pool.mark_dead(connection)

    async def close(self) -> None:
        if self._probing is not None:
            self._probing.cancel()
            # (RuntimeError: closed from another event loop than the one the probe ran in)
            with contextlib.suppress(asyncio.CancelledError, RuntimeError):
                await self._probing
        await super().close()

    async def _do_verify_elasticsearch(self, headers: Any, timeout: Any) -> None:
        async with self._verify_elasticsearch_lock:
            if self._verified_elasticsearch is not None:
                return
            steps = _check(self.product, chain(self.connection_pool.connections, self.seed_connections))
            ask = _accept_json(headers)
            try:
                conn, path = next(steps)
                while True:
                    try:
                        wait = _check_timeout(timeout, conn, path)
                        _, got, raw = await conn.perform_request("GET", path, headers=ask, timeout=wait)
                        answer = _answer(self.deserializer, got, raw)
                    except Exception as err:
                        conn, path = steps.throw(err)
                    else:
                        conn, path = steps.send(answer)
            except StopIteration as done:
                self._verified_elasticsearch = done.value


class CheckedClient(Elasticsearch):  # type: ignore[misc]
    """The 7.17 client with ``CheckedTransport``: what ``ElasticsearchIndex`` talks through."""

    transport_class: Any = CheckedTransport

    def __init__(self, hosts: Any = None, **kwargs: Any) -> None:
        super().__init__(hosts, transport_class=self.transport_class, **kwargs)


class AsyncCheckedClient(AsyncElasticsearch):  # type: ignore[misc]
    """The 7.17 async client with ``AsyncCheckedTransport`` (the service's reader)."""

    transport_class: Any = AsyncCheckedTransport

    def __init__(self, hosts: Any = None, **kwargs: Any) -> None:
        super().__init__(hosts, transport_class=self.transport_class, **kwargs)
