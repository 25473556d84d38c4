"""The one interface both engines implement, and the scoring rule they share.

A document is an image's weighted bag of words: ``{vocabulary id: weight}`` with weight > 0.
A query is ``{vocabulary id: boost}`` (boost = how often the token occurs in the query, or an
explicit weight). The score is the paper's Eq. 15 with repeated tokens counted:

    score(q, d) = sum over t in q of boost_t * saturate(w_{t,d}),   saturate(w) = log(1 + w)

(``termindex.scoring``, the one home of that function and of the largest query weight,
``MAX_QUERY_WEIGHT``), which is exactly a ``bool.should`` of Elasticsearch ``rank_feature``
clauses (``scoring.engine_clause``).
"""

from __future__ import annotations

import contextlib
import math
import numbers
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from vsparta.termindex.errors import InvalidDocument, InvalidInput, InvalidQuery
from vsparta.termindex.scoring import MAX_QUERY_WEIGHT, saturate

# Ids travel in URLs, file names of failure reports and ES _id: keep them printable and bounded.
MAX_ID_LENGTH = 512
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def heaviest_terms(terms: Mapping[int, float], n: int | None = None) -> list[tuple[int, float]]:
    """``(id, weight)`` pairs heaviest first, ties by id ascending, at most ``n`` (None = all).

    The one order of an image's terms: what "more like this" queries with, what the export and
    the API list, what a top-n cut keeps. Every caller uses this so they never disagree.
    """
    ordered = sorted(terms.items(), key=lambda kv: (-kv[1], kv[0]))
    return ordered if n is None else ordered[:n]


def similar_query(doc: TermDocument, n_terms: int) -> dict[int, float]:
    """ "More like this": the document's ``n_terms`` heaviest terms as the query (searched for
    k + 1 hits, then ``without_self``)."""
    if isinstance(n_terms, bool) or not isinstance(n_terms, int) or n_terms < 1:
        raise InvalidQuery(f"n_terms must be a positive integer, got {n_terms!r}")
    return dict(heaviest_terms(doc.weights, n_terms))


def without_self(hits: list[Hit], doc_id: str, k: int) -> list[Hit]:
    """The k hits of a "more like this" search other than the document itself."""
    return [h for h in hits if h.id != doc_id][:k]


@dataclass(frozen=True)
class TermDocument:
    """One image as indexed: its id, ``weights`` = ``{vocabulary id: weight}``, free-form metadata.

    Keyed by vocabulary id, not token string (the JSONL export's ``"terms"`` holds token
    strings): the name says weights so the two are never confused.
    """

    id: str
    weights: Mapping[int, float]
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TermStatistics:
    """What an index knows about some terms: ``n_docs`` documents, ``df[t]`` of them hold term t.

    ``version`` names the state the numbers come from (an index version, a segment set), so a
    cache can tell when they went stale. Query-side IDF weights are built from it (``termindex.scoring``).
    """

    n_docs: int
    df: Mapping[int, int]
    version: str = ""


@dataclass(frozen=True)
class Hit:
    """One search result. ``contributions`` maps matched vocabulary id -> (weight, score part)."""

    id: str
    score: float
    metadata: Mapping[str, Any] = field(default_factory=dict)
    contributions: Mapping[int, tuple[float, float]] | None = None


MAX_K = 10_000  # the most hits one search returns, every engine (Elasticsearch's max_result_window)


def validate_k(k: Any) -> int:
    """Check a search's ``k``: an integer in [1, ``MAX_K``] (a NumPy integer too); raises
    ``InvalidQuery``."""
    if type(k) is int and 1 <= k <= MAX_K:  # the common case, without the slower checks below
        return k
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or not 1 <= k <= MAX_K:
        raise InvalidQuery(f"k must be an integer in [1, {MAX_K}], got {k!r}")
    return int(k)


def validate_id(doc_id: Any) -> str:
    """Reject ids that cannot round-trip through URLs, ES and files; return the id.

    Raises ``InvalidDocument``: an id names a document, whether written or looked up."""
    if not isinstance(doc_id, str) or not doc_id:
        raise InvalidDocument(f"document id must be a non-empty string, got {doc_id!r}")
    if len(doc_id) > MAX_ID_LENGTH:
        raise InvalidDocument(f"document id longer than {MAX_ID_LENGTH} characters: {doc_id[:40]!r}...")
    if _CONTROL.search(doc_id):
        raise InvalidDocument(f"document id contains control characters: {doc_id!r}")
    return doc_id


def _check_weights(
    terms: Mapping[Any, Any], what: str, allow_empty: bool, max_weight: float, error: type[InvalidInput]
) -> dict[int, float]:
    if not isinstance(terms, Mapping):
        raise error(f"{what} must be a mapping of vocabulary id to weight")
    if not terms and not allow_empty:
        raise error(f"{what} is empty: nothing to match")
    out: dict[int, float] = {}
    for key, value in terms.items():
        if isinstance(key, bool) or not isinstance(key, int) or key < 0:
            raise error(f"{what}: vocabulary id must be a non-negative integer, got {key!r}")
        try:
            weight = float(value)
        except (TypeError, ValueError):
            raise error(f"{what}: weight of term {key} is not a number: {value!r}") from None
        if not math.isfinite(weight) or weight <= 0:
            raise error(f"{what}: weight of term {key} must be finite and > 0, got {value!r}")
        if weight > max_weight:
            raise error(f"{what}: weight of term {key} must be <= {max_weight:g}, got {value!r}")
        out[key] = weight
    return out


def validate_weights(
    terms: Mapping[Any, Any], *, what: str = "query", allow_empty: bool = False
) -> dict[int, float]:
    """Check a query ``{vocabulary id: weight}``: integer ids >= 0, finite weights in
    (0, ``MAX_QUERY_WEIGHT``]; raises ``InvalidQuery``.

    Zero or negative weights are rejected rather than dropped: they mean the caller's model or
    query builder is wrong, and silently dropping them would hide that. The upper bound keeps
    every engine exact (float32 bound sums cannot overflow).
    """
    return _check_weights(terms, what, allow_empty, MAX_QUERY_WEIGHT, InvalidQuery)


def validate_document_weights(
    terms: Mapping[Any, Any], *, what: str, allow_empty: bool = True
) -> dict[int, float]:
    """Check a document's ``{vocabulary id: weight}``: the query rule without the upper bound
    (engines clamp what they cannot store, see ``round_like_embedded``); raises ``InvalidDocument``."""
    return _check_weights(terms, what, allow_empty, math.inf, InvalidDocument)


def score(query: Mapping[int, float], terms: Mapping[int, float]) -> float:
    """Reference score of one document (the oracle every engine must agree with)."""
    return float(sum(b * saturate(terms[t]) for t, b in query.items() if t in terms))


class TermIndex(ABC):
    """A store of weighted-term documents with exact top-k search.

    Engines: ``vsparta.termindex.embedded.EmbeddedIndex`` (files on disk, memory-mapped) and
    ``vsparta.termindex.elastic.ElasticsearchIndex`` (rank_features). Open one with
    ``termindex.open_index``.
    """

    @abstractmethod
    def upsert(self, docs: Iterable[TermDocument]) -> int:
        """Insert or replace documents by id; returns how many were written."""

    def upsert_arrays(
        self,
        ids: list[str],
        indptr: Any,
        term_ids: Any,
        weights: Any,
        metadata: list[Mapping[str, Any]] | None = None,
    ) -> int:
        """Bulk upsert from CSR arrays: document i is ``term_ids/weights[indptr[i]:indptr[i+1]]``.

        The indexer's path (no Python object per term). Portable default: build documents and
        ``upsert``; engines override it with a vectorized write.
        """
        docs = []
        for i, doc_id in enumerate(ids):
            a, b = int(indptr[i]), int(indptr[i + 1])
            terms = dict(zip((int(t) for t in term_ids[a:b]), (float(w) for w in weights[a:b]), strict=True))
            docs.append(TermDocument(doc_id, terms, metadata[i] if metadata is not None else {}))
        return self.upsert(docs)

    @contextlib.contextmanager
    def bulk_load(self) -> Iterator[TermIndex]:
        """Bulk-load mode for a long write job (e.g. Elasticsearch: refresh and replicas off,
        restored after). Default: nothing to change."""
        yield self

    def finish_load(self) -> str | None:
        """After a complete (not interrupted) load: engine housekeeping that pays off only then
        (Elasticsearch: force-merge, swap a new version in). Returns a line for the job summary."""
        return None

    @abstractmethod
    def delete(self, ids: Iterable[str]) -> int:
        """Delete documents by id; returns how many existed."""

    @abstractmethod
    def count(self) -> int:
        """Number of live documents."""

    @abstractmethod
    def get(self, doc_id: str) -> TermDocument:
        """One document; raises ``DocumentNotFound``."""

    def iter_ids(self) -> Iterator[str]:
        """Every stored document's id, in no particular order (how ``vsparta index --prune`` finds
        the documents whose file left the input). Engines that can list themselves override it."""
        raise NotImplementedError(f"{type(self).__name__} cannot list its document ids")

    def existing_ids(self, ids: Iterable[str]) -> set[str]:
        """Which of ``ids`` are stored (how a resumed indexing job skips finished work): by default
        ``existing_metadata``'s keys; an engine may override it with a lookup of ids alone."""
        return set(self.existing_metadata(ids))

    def existing_metadata(self, ids: Iterable[str]) -> dict[str, Mapping[str, Any]]:
        """The metadata of each of ``ids`` that is stored (how a resumed indexing job tells a
        document it wrote from another input's under the same id).

        Portable default: one ``get`` each; engines override it with a lookup that does not rebuild
        documents.
        """
        from vsparta.termindex.errors import DocumentNotFound

        found: dict[str, Mapping[str, Any]] = {}
        for doc_id in ids:
            try:
                found[doc_id] = self.get(doc_id).metadata
            except DocumentNotFound:
                continue
        return found

    @abstractmethod
    def search(self, query: Mapping[int, float], k: int = 10, explain: bool = False) -> list[Hit]:
        """Top-k documents by ``score``, best first; ties broken by id ascending."""

    def term_statistics(self, term_ids: Iterable[int]) -> TermStatistics:
        """How many documents the index holds, and how many hold each of ``term_ids``: the engine's
        own statistics, for query-side IDF weights (``termindex.scoring``)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no term statistics")

    def warmup(self) -> None:  # noqa: B027 - optional hook
        """Before serving: whatever makes the first query as fast as the next (the embedded engine
        compiles its kernels). Default: nothing."""

    def similar(self, doc_id: str, k: int = 10, n_terms: int = 32, explain: bool = False) -> list[Hit]:
        """Documents like ``doc_id``: its ``n_terms`` heaviest terms as the query, itself excluded."""
        doc = self.get(doc_id)
        return without_self(self.search(similar_query(doc, n_terms), k=k + 1, explain=explain), doc_id, k)

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release files or connections."""

    def __enter__(self) -> TermIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
