"""Specs of the engines that speak Elasticsearch's protocol: ``[ENGINE+]http(s)://HOST:PORT[,HOST:PORT...]/NAME``.

A module of its own, below both the plug-in (which registers the parser) and the client code
(``common.py``, which turns a location back into node URLs), so neither imports the other.
"""

from __future__ import annotations

from collections.abc import Callable

from vsparta.termindex.plugin import BackendSpec


def http_spec_parser(engine: str, label: str) -> Callable[[str], BackendSpec]:
    """A parser of ``[ENGINE+]http(s)://HOST:PORT[,HOST:PORT...]/NAME`` into (engine, location,
    NAME); the location is one ``http(s)://HOST:PORT`` per node, comma-separated (``node_urls``)."""

    def parse(spec: str) -> BackendSpec:
        scheme, sep, rest = spec.partition("://")
        scheme = scheme if sep else spec.partition(":")[0]
        transport = scheme.rpartition("+")[2]
        host, _, name = rest.partition("/")
        name = name.strip("/")
        if not sep or transport not in ("http", "https") or not host or not name or "/" in name:
            raise ValueError(f"{label} spec must be {scheme}://HOST:PORT/INDEX, got {spec!r}")
        nodes = [_node_url(transport, h, spec, scheme, label) for h in host.split(",")]
        _refuse_repeats(nodes, spec, label)
        return BackendSpec(engine, ",".join(nodes), name)

    return parse


def _node_url(transport: str, host: str, spec: str, scheme: str, label: str) -> str:
    """``transport://HOST[:PORT]`` for one entry of a host list, or one sentence saying what is wrong."""
    from urllib.parse import urlsplit

    url = f"{transport}://{host.strip()}"
    try:
        parts = urlsplit(url)
        ok = bool(parts.hostname) and parts.port != 0 and not parts.username
        ok = ok and not any(c.isspace() for c in host)
    except ValueError:  # "Port could not be cast to integer", a port out of range
        ok = False
    if not ok:
        raise ValueError(
            f"{label} spec {spec!r}: {host.strip()!r} is not HOST:PORT; give one or more nodes as "
            f"{scheme}://HOST:PORT,HOST:PORT/INDEX"
        )
    return url


def _refuse_repeats(nodes: list[str], spec: str, label: str) -> None:
    """A node named twice (``es01:9200,ES01:9200``) is a typo: two entries would count one node
    twice when a client spreads requests or skips a dead node. (Nodes of two clusters are found on
    connect: ``servers.check_one_cluster``.)"""
    from urllib.parse import urlsplit

    seen: set[tuple[str, int]] = set()
    for url in nodes:
        parts = urlsplit(url)
        key = ((parts.hostname or "").lower(), parts.port or DEFAULT_PORTS[parts.scheme])
        if key in seen:
            raise ValueError(f"{label} spec {spec!r} lists {key[0]}:{key[1]} twice: name each node once")
        seen.add(key)


DEFAULT_PORTS = {"http": 9200, "https": 443}  # the client's port for a host given without one


def node_urls(location: str) -> list[str]:
    """The node URLs of a parsed location (one per host of the spec's host list)."""
    return location.split(",")
