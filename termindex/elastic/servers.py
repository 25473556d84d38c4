"""Which servers the Elasticsearch-protocol engines are tested against, and what a server must have.

One home for the rule, run once per client when it first connects (the product check that the
7.17 client makes anyway, ``elastic.transport``), never per search:

- the product must be the one the spec names (Elasticsearch for ``http://``, OpenSearch for
  ``opensearch+http://``), else one sentence naming both;
- a major version outside ``TESTED`` gets one warning per process and version, naming the tested
  versions and the client pairing that major needs;
- every node must have the ``mapper-extras`` module, which holds ``rank_features`` and the
  ``rank_feature`` query (Elasticsearch's integ-test-zip 8.x ships without it): else one sentence,
  instead of a mapping error at create time or a query error at the first search;
- the hosts of a spec's host list must be distinct nodes of one cluster (``check_one_cluster``):
  nodes of two clusters would each hold their own copy of the index, and a client spreading
  requests over them would write half the documents into each.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from elasticsearch.exceptions import UnsupportedProductError

from vsparta.termindex.errors import WrongBackend

__all__ = [
    "MODULES_PATH",
    "TESTED",
    "NotOpenSearch",
    "UnsupportedServer",
    "check_modules",
    "check_one_cluster",
    "check_product",
    "identify_headless",
    "refuse_unknown",
    "server_product",
]

log = logging.getLogger(__name__)

# product -> the versions the test suite runs against (scripts/test.sh starts them).
TESTED: dict[str, tuple[str, ...]] = {"elasticsearch": ("7.17",), "opensearch": ("2.19", "3.x")}
_LABEL = {"elasticsearch": "Elasticsearch", "opensearch": "OpenSearch"}
# (product, major) -> the client a major outside TESTED pairs with (this project pins elasticsearch-py 7.17).
_PAIRING: dict[tuple[str, int], str] = {
    ("elasticsearch", 8): "elasticsearch-py 7.17 talks to it only in REST compatibility mode "
    "(ELASTIC_CLIENT_APIVERSIONING=true); its own client is elasticsearch-py 8",
    ("elasticsearch", 9): "elasticsearch-py 7.17 is not compatible with it; it needs elasticsearch-py 9",
}
MODULE = "mapper-extras"
# Module and plugin names and the version of every node: a few hundred bytes, once per client. A
# node cut off from the one asked would hold the answer for as long as the client waits (every new
# client failed during a partition): each node gets 3 s, and the nodes that answer decide.
MODULES_PATH = (
    "/_nodes/plugins?filter_path=nodes.*.version,nodes.*.modules.name,nodes.*.plugins.name&timeout=3s"
)
_warned: set[tuple[str, str]] = set()


class UnsupportedServer(UnsupportedProductError):  # type: ignore[misc]
    """The server cannot serve this project's indices; the message is the whole sentence
    (``elastic.translate.translate`` passes a subclass's message on as it is)."""


class NotOpenSearch(UnsupportedServer):
    """An ``opensearch+http`` spec names an Elasticsearch server."""


def server_product(info: Mapping[str, Any]) -> tuple[str, str]:
    """(product, version number) from a ``GET /`` answer: ``opensearch`` or ``elasticsearch``."""
    version = info.get("version") if isinstance(info, Mapping) else None
    version = version if isinstance(version, Mapping) else {}
    product = "opensearch" if version.get("distribution") == "opensearch" else "elasticsearch"
    return product, str(version.get("number", "?"))


def _tested(product: str, number: str) -> bool:
    for line in TESTED[product]:
        prefix = line.removesuffix(".x")
        if number == prefix or number.startswith(prefix + "."):
            return True
    return False


def _warn_untested(product: str, number: str) -> None:
    if _tested(product, number) or (product, number) in _warned:
        return
    _warned.add((product, number))
    major = int(m.group(1)) if (m := re.match(r"(\d+)", number)) else 0
    tested = ", ".join(f"{_LABEL[p]} {' and '.join(v)}" for p, v in TESTED.items())
    pairing = _PAIRING.get(
        (product, major),
        f"it pairs with the {_LABEL[product]} client of major version {major}",
    )
    log.warning(
        "%s %s is a version this project is not tested against (tested: %s, all through elasticsearch-py "
        "7.17); %s",
        _LABEL[product],
        number,
        tested,
        pairing,
    )


Answer = tuple[Mapping[str, str], Any]  # (lower-cased headers, parsed body) of one request


def _nodes(nodes: Any) -> dict[str, Any]:
    found = nodes.get("nodes") if isinstance(nodes, Mapping) else None
    return dict(found) if isinstance(found, Mapping) else {}


def identify_headless(expected: str, nodes: Answer) -> str:
    """``check_product`` for a server without ``GET /`` (Elasticsearch 8.x's integ-test-zip lacks
    the rest-root module): the version from the nodes, the product from the answer's headers."""
    number = next((str(n["version"]) for n in _nodes(nodes[1]).values() if n.get("version")), "?")
    info = {"version": {"number": number}, "tagline": "You Know, for Search"}
    return check_product(expected, nodes[0], info)


def refuse_unknown() -> None:
    """Raise the client's own "not Elasticsearch" error: ``GET /`` answered, but not with JSON."""
    from elasticsearch.transport import _ProductChecker

    _ProductChecker.raise_error(_ProductChecker.UNSUPPORTED_PRODUCT)


def check_product(expected: str, headers: Mapping[str, str], info: Any) -> str:
    """Refuse a server of the other product; warn once for an untested version. Returns
    "<Product> <version>" for the messages that follow."""
    product, number = server_product(info)
    if expected == "opensearch" and product != "opensearch":
        raise NotOpenSearch(
            f"the backend is Elasticsearch {number}, not OpenSearch: "
            "name it with http://HOST:PORT/NAME, or point opensearch+http:// at an OpenSearch server"
        )
    if expected == "elasticsearch":
        # The client's own rules (7.14+ must send X-Elastic-Product, older ones the tagline).
        from elasticsearch.transport import _ProductChecker

        _ProductChecker.raise_error(_ProductChecker.check_product(dict(headers), info))
    _warn_untested(product, number)
    return f"{_LABEL[product]} {number}"


def _extensions(node: Mapping[str, Any]) -> set[str]:
    return {str(m.get("name")) for m in (node.get("modules") or []) + (node.get("plugins") or [])}


def check_modules(server: str, nodes: Answer) -> None:
    """Refuse a cluster where a node lacks ``mapper-extras`` (``nodes``: the ``MODULES_PATH`` answer)."""
    found = _nodes(nodes[1])
    if not found:
        return  # filter_path left nothing: not a shape we know, so no verdict
    lacking = [node_id for node_id, node in found.items() if MODULE not in _extensions(node)]
    if lacking:
        raise UnsupportedServer(
            f"the backend ({server}) cannot hold this project's indices: {len(lacking)} of {len(found)} "
            f"node(s) lack the {MODULE} module, which provides rank_features fields and "
            "rank_feature queries"
        )


def _cluster_of(info: Any) -> tuple[str, str] | None:
    """(cluster uuid, cluster name) from a ``GET /`` answer; None for a node that has not joined a
    cluster yet (uuid ``_na_``) or an answer without one."""
    if not isinstance(info, Mapping):
        return None
    uuid = str(info.get("cluster_uuid") or "")
    if not uuid or uuid == "_na_":
        return None
    return uuid, str(info.get("cluster_name", "?"))


def check_one_cluster(roots: Mapping[str, Any]) -> None:
    """Refuse a host list whose nodes (``roots``: host URL -> its ``GET /`` answer) belong to
    different clusters, in one sentence. (One node reached under two names, e.g. through a proxy,
    is allowed: it is one cluster.)"""
    first: tuple[str, tuple[str, str]] | None = None
    for host, info in roots.items():
        found = _cluster_of(info)
        if found is None:
            continue
        if first is None:
            first = (host, found)
        elif found[0] != first[1][0]:
            (other, (uuid, name)) = first
            raise WrongBackend(
                f"the backend's hosts belong to different clusters (cluster UUIDs differ): {other} is in "
                f"cluster {name!r} ({uuid}), {host} in cluster {found[1]!r} ({found[0]}); "
                "list the nodes of one cluster"
            )
