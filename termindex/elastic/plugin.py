"""Elasticsearch's registration (``termindex.registry.PLUGINS``), and the parts an engine that
speaks the same protocol (OpenSearch) reuses: ``protocol_engine`` (the parser, options and client
errors of ``http_spec_parser``, ``INDEX_OPTIONS``, ``client_errors``).

Specs: ``http(s)://HOST:PORT/NAME`` or, explicitly, ``elasticsearch+http(s)://HOST:PORT/NAME``.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from typing import Any

from vsparta.termindex.base import TermIndex
from vsparta.termindex.elastic.spec import http_spec_parser
from vsparta.termindex.plugin import BackendSpec, CommandOptions, Engine
from vsparta.termindex.reader import AsyncReader


def _add_options(group: Any) -> None:
    group.add_argument(
        "--shards", type=int, help="primary shards of a new index (default: two per data node)"
    )
    group.add_argument(
        "--replicas", type=int, help="replicas after the load (default: 1 on a cluster, else 0)"
    )
    group.add_argument(
        "--new-version",
        action="store_true",
        help="load into a new version of the index; the alias moves to it when the load completes",
    )


def _read_options(args: argparse.Namespace) -> dict[str, Any]:
    opts: dict[str, Any] = {"shards": args.shards, "replicas": args.replicas}
    if args.new_version:
        if args.resume or args.num_shards > 1:
            raise ValueError("--new-version writes one new version in one job: drop --resume/--num-shards")
        opts["new_version"] = True
    return {k: v for k, v in opts.items() if v is not None}


# `vsparta index` options of an alias over versioned indices (Elasticsearch, OpenSearch).
INDEX_OPTIONS = CommandOptions(
    title="Elasticsearch",
    add=_add_options,
    read=_read_options,
    flags="--shards, --replicas and --new-version",
)


def client_errors(module: str, *names: str) -> Callable[[], tuple[type[BaseException], ...]]:
    """The named exception classes of a client's exceptions module, imported when called."""

    def load() -> tuple[type[BaseException], ...]:
        try:
            exceptions = __import__(module, fromlist=list(names))
        except ImportError:
            return ()
        return tuple(getattr(exceptions, n) for n in names)

    return load


def protocol_engine(
    *,
    name: str,
    label: str,
    example: str,
    schemes: tuple[str, ...],
    index: tuple[str, str],
    reader: tuple[str, str],
) -> Engine:
    """The registration of an engine that speaks Elasticsearch's protocol through its client:
    ``index`` and ``reader`` name its synchronous index and its async reader (module, class),
    imported when first opened."""

    def open_index(spec: BackendSpec, create: bool = False, **options: Any) -> TermIndex:
        return _class(index)(spec.location, spec.name, create=create, **options)

    def open_async(spec: BackendSpec, request_timeout: float) -> AsyncReader:
        return _class(reader)(spec.location, spec.name, request_timeout=request_timeout)

    return Engine(
        name=name,
        label=label,
        example=example,
        schemes=schemes,
        parse=http_spec_parser(name, label),
        open=open_index,
        open_async=open_async,
        versions=True,
        index_options=INDEX_OPTIONS,
        client_loggers=("elasticsearch",),
        unreachable=client_errors("elasticsearch.exceptions", "ConnectionError"),
        wrong_server=client_errors("elasticsearch.exceptions", "UnsupportedProductError"),
        install_hint="pip install 'vsparta[service]'",
    )


def _class(where: tuple[str, str]) -> Any:
    module, name = where
    return getattr(importlib.import_module(module), name)


ENGINE = protocol_engine(
    name="elasticsearch",
    label="Elasticsearch",
    example="http://HOST:PORT/INDEX",
    schemes=("http", "https", "elasticsearch+http", "elasticsearch+https"),
    index=("vsparta.termindex.elastic.index", "ElasticsearchIndex"),
    reader=("vsparta.termindex.elastic.index_async", "AsyncElasticsearchIndex"),
)
