"""What the sync and async Elasticsearch engines share: mapping, request bodies, response parsing
(the client's errors are translated in ``elastic.translate``). Pure functions, no I/O, so both
clients build and read exactly the same JSON.

Layout of one document (``_id`` = document id, so a repeated load overwrites):

    {"doc_id": "img-1", "terms": {"2874": 1.53, ...}, "metadata": {...}, "image": "a/b.jpg"}

``terms`` is a ``rank_features`` field keyed by *vocabulary id* (feature names may not contain
dots, and word-pieces such as "." exist). Its values are written as the shortest text of what
Elasticsearch keeps (9 significant bits, ``elastic.text``), and read back as that value.
``doc_id`` repeats ``_id`` as a keyword with doc values because sorting on ``_id`` is deprecated;
it breaks score ties by id ascending, as the oracle does.

``metadata_json`` repeats the metadata as one stored string. A search returns it instead of
``_source``: filtering a ~1000-term ``_source`` down to its metadata parses the whole JSON for
every hit, which cost ~11 ms of a 13 ms query on a 5K-image index. Indices created before the
field existed still work: their mapping gains the field on the first write, and hits without it
get their metadata from ``_source`` in one extra ``_mget``.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from vsparta.termindex.base import (
    Hit,
    TermDocument,
    validate_document_weights,
    validate_id,
    validate_k,
    validate_weights,
)
from vsparta.termindex.elastic.spec import node_urls
from vsparta.termindex.elastic.text import round_like_elasticsearch
from vsparta.termindex.elastic.translate import error_reason
from vsparta.termindex.errors import EngineUnavailable, InvalidDocument
from vsparta.termindex.scoring import engine_clause, saturate

# Lucene's FeatureField takes positive *normal* float32 values only.
MIN_FEATURE_VALUE = 1.17549435e-38
MAX_FEATURE_VALUE = 3.4028234e38
# Elasticsearch refuses _id values longer than 512 bytes (UTF-8), which is stricter than
# base.MAX_ID_LENGTH (characters) for non-ASCII ids.
MAX_ID_BYTES = 512
# index.max_result_window: deeper pages need search_after, which top-k search never does.
_ALIAS_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")

METADATA_FIELD = "metadata_json"
# The load that wrote a document (its job id), while and after it runs: what the alias hides
# from searches until that load ends (``elastic.leases.hide_steps``).
LOAD_FIELD = "load"

MAPPING: dict[str, Any] = {
    "dynamic": "strict",
    "properties": {
        "doc_id": {"type": "keyword"},
        "terms": {"type": "rank_features"},
        # Arbitrary user metadata: kept in _source, never mapped, so it cannot explode the mapping.
        "metadata": {"type": "object", "enabled": False},
        "image": {"type": "keyword", "index": False},
        METADATA_FIELD: {"type": "keyword", "index": False, "doc_values": False, "store": True},
        LOAD_FIELD: {"type": "keyword", "doc_values": False},
    },
}


def validate_alias(name: str) -> str:
    """Index/alias names: lowercase, no wildcards or separators (ES rules, plus our '-v<N>')."""
    if not isinstance(name, str) or not _ALIAS_RE.match(name) or len(name) > 200:
        raise ValueError(
            f"an index name must be lowercase letters, digits, '_', '.', '-' "
            f"(not starting with a symbol), got {name!r}"
        )
    return name


def check_es_id(doc_id: Any) -> str:
    doc_id = validate_id(doc_id)
    if len(doc_id.encode("utf-8")) > MAX_ID_BYTES:
        raise InvalidDocument(f"document id longer than {MAX_ID_BYTES} bytes in UTF-8: {doc_id[:40]!r}...")
    return doc_id


_METADATA_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def metadata_json(doc_id: str, metadata: Mapping[str, Any]) -> str:
    """The metadata as the stored JSON text; InvalidDocument (as the embedded engine says) when it is none."""
    try:
        return _METADATA_JSON.encode(metadata)
    except (TypeError, ValueError) as exc:
        raise InvalidDocument(f"document {doc_id!r}: metadata is not JSON-serializable: {exc}") from None


def doc_source(doc: TermDocument) -> dict[str, Any]:
    """The _source of one document; raises InvalidDocument for what Elasticsearch would reject."""
    doc_id = check_es_id(doc.id)
    terms = validate_document_weights(doc.weights, what=f"document {doc_id!r} terms", allow_empty=False)
    for t, w in terms.items():
        if not MIN_FEATURE_VALUE <= w <= MAX_FEATURE_VALUE:
            raise InvalidDocument(
                f"document {doc_id!r}: weight {w!r} of term {t} is outside the float32 normal range "
                f"[{MIN_FEATURE_VALUE:g}, {MAX_FEATURE_VALUE:g}] that rank_features stores"
            )
    metadata = dict(doc.metadata or {})
    source: dict[str, Any] = {
        "doc_id": doc_id,
        "terms": {str(t): w for t, w in terms.items()},
        "metadata": metadata,
        METADATA_FIELD: metadata_json(doc_id, metadata),
    }
    image = metadata.get("image")
    if isinstance(image, str):
        source["image"] = image
    return source


def index_body(shards: int, replicas: int, codec: str = "default") -> dict[str, Any]:
    """Settings and mapping of a new version, created ready for a bulk load.

    ``codec``: ``best_compression`` stores ``_source`` with DEFLATE instead of LZ4 (see
    docs/benchmarks.md for bytes per term and query time of each).
    """
    return {
        "settings": {
            "index": {
                "codec": codec,
                "number_of_shards": shards,
                "number_of_replicas": replicas,
                "refresh_interval": "-1",
                # Not searchable until commit, and a crash means loading again anyway: no fsync
                # per bulk request while loading (restored to "request" by _finish_version).
                "translog": {"durability": "async"},
            }
        },
        "mappings": MAPPING,
    }


def search_body(
    query: Mapping[int, float], k: int, explain: bool, track_total_hits: bool = True
) -> dict[str, Any]:
    """``bool.should`` of ``rank_feature`` clauses: score = sum of boost * saturate(w) (``saturation``).

    ``track_total_hits`` (the engine's option of the same name) picks Lucene's algorithm.
    True: every matching document is scored in windows of 2048 (BooleanScorer). False: block-max
    WAND skips documents that cannot enter the top k. Which is faster depends on the documents
    (``choose_track_total_hits``): over ~1000-term documents 8-12 caption tokens with similar
    maximum contributions leave little to skip and WAND pays per-document bookkeeping; over a
    sparse model's few terms per image it skips most of the images that only share common words
    with the query. Both return the same top k. Ties sort by ``doc_id`` ascending. Metadata
    comes from the stored ``metadata_json``, not ``_source``. ``explain`` fetches the hit's query
    terms from ``_source`` (slower) so contributions can be computed here, exactly, without the
    (slow, per-hit) explain API.
    """
    q = validate_weights(query, what="query")
    k = validate_k(k)
    clauses = [engine_clause(f"terms.{t}", b) for t, b in sorted(q.items())]
    return {
        "size": k,
        "track_total_hits": track_total_hits,
        "query": {"bool": {"should": clauses}},
        "sort": [{"_score": {"order": "desc"}}, {"doc_id": {"order": "asc"}}],
        "stored_fields": ["_id", METADATA_FIELD],
        # Only the query's own terms of each hit, never its ~1000 terms.
        "_source": [f"terms.{t}" for t in sorted(q)] if explain else False,
    }


def contributions(query: Mapping[int, float], terms: Mapping[str, Any]) -> dict[int, tuple[float, float]]:
    """Per matched term: (weight as stored by ES, boost * saturate(weight))."""
    out: dict[int, tuple[float, float]] = {}
    for t, b in query.items():
        w = terms.get(str(t))
        if w is not None:
            v = float(round_like_elasticsearch(float(w)))
            out[t] = (v, float(b) * saturate(v))
    return out


def check_shards(resp: Mapping[str, Any], what: str) -> None:
    """Refuse a partial answer: with a shard unassigned (a node lost, no replica to promote yet)
    the engine answers 200 from the shards it has; a top-k from some shards is a wrong top-k."""
    shards = resp.get("_shards") or {}
    failed = int(shards.get("failed", 0) or 0)
    if failed or int(shards.get("successful", 0) or 0) < int(shards.get("total", 0) or 0):
        reasons = [str((f.get("reason") or {}).get("type", "")) for f in shards.get("failures") or []]
        raise EngineUnavailable(
            f"only {shards.get('successful')} of {shards.get('total')} shards answered ({what})"
            + (f": {', '.join(sorted(set(reasons)))}" if any(reasons) else "")
        )


def parse_hits(resp: Mapping[str, Any], query: Mapping[int, float], explain: bool) -> list[Hit]:
    check_shards(resp, "search")
    q = validate_weights(query, what="query")
    hits = []
    for h in resp["hits"]["hits"]:
        src = h.get("_source") or {}
        stored = (h.get("fields") or {}).get(METADATA_FIELD)
        hits.append(
            Hit(
                id=h["_id"],
                score=float(h["_score"]),
                metadata=json.loads(stored[0]) if stored else None,  # type: ignore[arg-type]
                contributions=contributions(q, src.get("terms") or {}) if explain else None,
            )
        )
    return hits


def without_metadata(hits: list[Hit]) -> list[str]:
    """Ids of hits from documents written before ``metadata_json`` existed (see module doc)."""
    return [h.id for h in hits if h.metadata is None]


def mget_metadata_body(ids: list[str]) -> dict[str, Any]:
    return {"body": {"ids": ids}, "_source_includes": ["metadata"]}


def mget_stored_metadata_body(ids: list[str]) -> dict[str, Any]:
    """An ``_mget`` of the stored ``metadata_json`` alone: 5x faster than filtering ``_source``
    (docs/indexing.md); documents written before the field existed need ``mget_metadata_body``."""
    return {"body": {"ids": ids}, "stored_fields": METADATA_FIELD, "_source": False}


def stored_metadata(mget_resp: Mapping[str, Any]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The metadata of each found document from a ``mget_stored_metadata_body`` answer, and the
    found ids without the stored field (older documents: read from ``_source``). A document whose
    shard cannot answer (an inline error) is in neither."""
    found: dict[str, dict[str, Any]] = {}
    older: list[str] = []
    for d in mget_resp["docs"]:
        if d.get("found"):
            stored = (d.get("fields") or {}).get(METADATA_FIELD)
            if stored:
                found[d["_id"]] = json.loads(stored[0])
            else:
                older.append(d["_id"])
    return found, older


def source_metadata(mget_resp: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The metadata of each found document of a ``mget_metadata_body`` answer (from ``_source``)."""
    return {
        d["_id"]: (d.get("_source") or {}).get("metadata") or {} for d in mget_resp["docs"] if d.get("found")
    }


def fill_metadata(hits: list[Hit], mget_resp: Mapping[str, Any]) -> list[Hit]:
    """Hits with metadata from an ``_mget`` of their ``_source`` where it was missing. An ``_mget``
    answers 200 with a document's failure inline (its shard has no copy to read): refused like a
    partial search, never shown as a hit without metadata."""
    failed = [d for d in mget_resp["docs"] if d.get("error")]
    if failed:
        why = error_reason(failed[0]["error"])
        raise EngineUnavailable(f"{len(failed)} of the hits' metadata could not be read (mget): {why}")
    found = source_metadata(mget_resp)
    return [
        h if h.metadata is not None else dataclasses.replace(h, metadata=found.get(h.id, {})) for h in hits
    ]


def parse_doc(resp: Mapping[str, Any]) -> TermDocument:
    src = resp.get("_source") or {}
    raw = src.get("terms") or {}
    # The weights as Elasticsearch keeps them (9 significant bits), whatever text the source has.
    values = round_like_elasticsearch(np.fromiter(raw.values(), dtype=np.float64, count=len(raw)))
    terms = dict(zip((int(t) for t in raw), values.tolist(), strict=True))
    return TermDocument(id=resp["_id"], weights=terms, metadata=src.get("metadata") or {})


def json_serializer() -> Any:
    """The client's JSON codec: orjson when installed (a 1000-term document serializes ~10x faster,
    which is ~20% of a bulk load's time), else the client's own ``json``-based one."""
    from elasticsearch.serializer import JSONSerializer

    try:
        import orjson
    except ImportError:
        return JSONSerializer()

    class OrjsonSerializer(JSONSerializer):
        _options = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY

        def dumps(self, data: Any) -> str:
            if isinstance(data, (str, bytes)):
                return data  # already serialized (bulk bodies)
            try:
                return orjson.dumps(data, default=self.default, option=self._options).decode()
            except (TypeError, ValueError):
                return super().dumps(data)  # what orjson refuses (e.g. >64-bit ints): stdlib rules

        def loads(self, s: Any) -> Any:
            try:
                return orjson.loads(s)
            except orjson.JSONDecodeError:
                return super().loads(s)  # raises the client's SerializationError

    return OrjsonSerializer()


def pop_track_total_hits(options: dict[str, Any]) -> bool | None:
    """The ``track_total_hits`` engine option (see ``search_body``): True, False, or None (the
    default: chosen per index from its documents, see ``choose_track_total_hits``)."""
    value = options.pop("track_total_hits", None)
    if value is not None and not isinstance(value, bool):
        raise ValueError(f"track_total_hits must be true or false, got {value!r}")
    return value


# Block-max WAND pays off when an image has few terms, and costs when it has ~1,000 (measured,
# docs/elasticsearch.md): a sparse model's index (28 terms per image, 1M images) searched in
# 68 instead of 127 ms p50 on one shard and 40 instead of 70 on two; 1,000-term documents were
# slower with WAND (1M adversarial: 120 vs 65 ms; 10K fitted from a 1,000-term model: 7.0 vs
# 5.4 ms). Between 28 and 1,000 nothing was measured; the cut sits nearer the sparse side.
WAND_MAX_MEAN_TERMS = 200
SAMPLE_DOCS = 20


def sample_body() -> dict[str, Any]:
    """A few documents' terms: what ``choose_track_total_hits`` decides from."""
    return {"size": SAMPLE_DOCS, "query": {"match_all": {}}, "_source": ["terms"], "track_total_hits": False}


def choose_track_total_hits(resp: Mapping[str, Any]) -> bool | None:
    """Score every match (True) for long documents, WAND (False) for short ones; None while the
    index is empty (decide at a later search)."""
    lengths = [len((h.get("_source") or {}).get("terms") or {}) for h in resp["hits"]["hits"]]
    if not lengths:
        return None
    return sum(lengths) / len(lengths) > WAND_MAX_MEAN_TERMS


def make_client(client_class: Any, location: str, client_kwargs: Mapping[str, Any]) -> Any:
    """A client over every node of the spec's host list. With several nodes a request that cannot
    reach one (connection refused, reset) goes on to the next at once, up to every node once; a
    timeout is not retried unless ``retry_on_timeout`` says so (the service's time bound holds;
    the synchronous engine, a batch job's, asks the next node) and one node keeps no retries."""
    urls = node_urls(location)
    return client_class(urls, **{**client_kwargs, "max_retries": len(urls) - 1})


def client_options(options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split engine options into (client kwargs, the rest). One place for both clients."""
    opts = dict(options)
    timeout = float(opts.pop("request_timeout", 10.0))
    if not timeout > 0:
        raise ValueError(f"request_timeout must be > 0 seconds, got {timeout!r}")
    client = {
        "timeout": timeout,
        # Immediate transport-level retries hide outages; the bulk loader retries with backoff.
        "max_retries": 0,
        "retry_on_timeout": False,
        "serializer": json_serializer(),
    }
    for key in ("http_auth", "api_key", "verify_certs", "ca_certs", "http_compress"):
        if key in opts:
            client[key] = opts.pop(key)
    return client, opts
