"""Text-to-image evaluation: Recall@K, NDCG@25 (ROUGE-L relevance, TERN), and the top-n trade-off.

VisualSparta is scored the way an index scores it: φ for every vocabulary id is computed once per
image, the top-n positive terms are kept, and a query scores ``Σ count · log(1 + φ)`` over its
tokens through a term -> image matrix (an inverted index). The dense baseline encodes each query
with its text transformer and takes dot products; "random" ranks at random.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from vsparta.core.manifest import ManifestRecord
from vsparta.core.progress import progress_bar
from vsparta.model.data import ImageStore, pad_queries
from vsparta.model.dense import DenseDualEncoder
from vsparta.model.encode import autocast_for
from vsparta.model.feature_cache import attach
from vsparta.model.metrics import caption_relevance, ndcg_at_k, recall_at_k
from vsparta.model.modeling import VisualSpartaModel
from vsparta.model.topn import drop_mask, select_top_terms, to_csr
from vsparta.termindex.scoring import saturate_array
from vsparta.termindex.weightings.registry import DEFAULT, WEIGHTINGS, weighting_named

log = logging.getLogger(__name__)

NATURAL = "natural"  # the model's positive terms, capped like `vsparta index` (config.top_n, default 1000)
TopN = int | str | None  # n, NATURAL, or None = every positive term ("all")
TOP_N: tuple[TopN, ...] = (50, 100, 300, 1000, NATURAL, None)  # paper Table 3, plus natural sparsity
KS = (1, 5, 10)


@dataclass
class Queries:
    texts: list[str]
    token_ids: list[list[int]]
    targets: np.ndarray  # [Q] index of each query's image


def build_queries(records: Sequence[ManifestRecord], tokenize: Callable[[str], list[int]]) -> Queries:
    """Every caption of every image is a query; its own image is the one relevant item."""
    texts, ids, targets = [], [], []
    for i, r in enumerate(records):
        for c in r.captions:
            texts.append(c)
            ids.append(tokenize(c))
            targets.append(i)
    return Queries(texts, ids, np.asarray(targets, dtype=np.int64))


# ---- VisualSparta: sparse term weights --------------------------------------------------------
@dataclass
class SparseImages:
    """Per image the positive φ, sorted descending (the top-n of any n is a prefix)."""

    ids: list[np.ndarray]  # each [p] int32
    values: list[np.ndarray]  # each [p] float32
    vocab_size: int

    def positive_terms(self) -> float:
        """Mean positive terms per image before any cut (the model's natural sparsity)."""
        return float(np.mean([len(i) for i in self.ids])) if self.ids else 0.0

    def term_matrix(self, n: int | None) -> sp.csr_matrix:
        """``[V, N]`` matrix of ``saturate(φ)`` (log(1 + φ)) keeping each image's top ``n`` (None = all)."""
        rows, cols, vals = [], [], []
        for j, (ids, v) in enumerate(zip(self.ids, self.values, strict=True)):
            k = len(ids) if n is None else min(n, len(ids))
            rows.append(ids[:k])
            cols.append(np.full(k, j, dtype=np.int32))
            vals.append(saturate_array(v[:k]))
        return sp.csr_matrix(
            (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
            shape=(self.vocab_size, len(self.ids)),
            dtype=np.float32,
        )


def _batch_starts(store: ImageStore, batch_size: int, progress: bool) -> Any:
    """The first index of each image batch, behind a progress bar when ``progress``."""
    starts = range(0, len(store), batch_size)
    return progress_bar(starts, desc="encoding images", unit="batch", enabled=progress, leave=False)


@torch.inference_mode()
def encode_sparse(
    model: VisualSpartaModel,
    store: ImageStore,
    batch_size: int,
    device: torch.device,
    amp: bool,
    progress: bool = False,
) -> SparseImages:
    """φ for every vocabulary id of every image (query-impossible ids zeroed), sorted, positive only."""
    model.eval()
    drop = drop_mask(model.non_query_ids(), model.config.vocab_size, device)
    ids_out, vals_out = [], []
    for start in _batch_starts(store, batch_size, progress):
        idx = list(range(start, min(len(store), start + batch_size)))
        pixels, regions = store.image_batch(idx)
        with autocast_for(device, amp):
            phi = model.image_term_weights(  # [B, V]
                pixel_values=None if pixels is None else pixels.to(device),
                regions=None if regions is None else regions.to(device),
            )
        indptr, term_ids, weights = to_csr(*select_top_terms(phi, None, drop))
        for a, b in zip(indptr[:-1], indptr[1:], strict=True):
            ids_out.append(term_ids[a:b])
            vals_out.append(weights[a:b])
    return SparseImages(ids_out, vals_out, model.config.vocab_size)


def query_matrix(queries: Queries, vocab_size: int) -> sp.csr_matrix:
    """``[Q, V]`` token counts (a repeated token counts once per occurrence)."""
    rows, cols = [], []
    for q, toks in enumerate(queries.token_ids):
        rows.extend([q] * len(toks))
        cols.extend(toks)
    data = np.ones(len(rows), dtype=np.float32)
    m = sp.csr_matrix((data, (rows, cols)), shape=(len(queries.token_ids), vocab_size))
    m.sum_duplicates()
    return m


def document_frequencies(terms: sp.csr_matrix) -> np.ndarray:
    """``[V]`` images holding each term in ``terms`` (``[V, N]``): an index's df."""
    return np.asarray((terms != 0).sum(axis=1)).ravel()


def weighted_queries(qmat: sp.csr_matrix, terms: sp.csr_matrix, weighting: str) -> sp.csr_matrix:
    """The query matrix as the service would send it under ``weighting`` (a name in
    ``termindex.weightings.registry.WEIGHTINGS``): every query's counts through the same rule, with
    the document frequencies over ``terms`` (the index searched) when the rule asks for them."""
    rule = weighting_named(weighting)
    out = qmat.astype(np.float64)
    df = document_frequencies(terms)[out.indices] if rule.statistics else None
    out.data = np.asarray(rule.weigh(out.data, df, terms.shape[1]), dtype=np.float64)
    return out.astype(np.float32)


def sparse_scores(terms: sp.csr_matrix, qmat: sp.csr_matrix) -> np.ndarray:
    """``[Q, N]`` = Σ_tokens count · log(1 + φ) (what the index returns)."""
    return np.asarray((qmat @ terms).todense(), dtype=np.float32)


def time_sparse_queries(
    terms: sp.csr_matrix, queries: Queries, tokenize: Callable[[str], dict[int, float]], k: int, sample: int
) -> float:
    """Mean ms per query for tokenize -> postings lookup -> accumulate -> top-k, one query at a time."""
    texts = queries.texts[:sample]
    if not texts:
        return float("nan")
    t0 = time.perf_counter()
    for text in texts:
        weights = tokenize(text)
        if not weights:
            continue
        ids = np.fromiter(weights.keys(), dtype=np.int64)
        counts = np.fromiter(weights.values(), dtype=np.float32)
        scores = terms[ids].T @ counts  # [N]
        kk = min(k, len(scores))
        top = np.argpartition(-scores, kk - 1)[:kk]
        top[np.argsort(-scores[top])]
    return (time.perf_counter() - t0) * 1000 / len(texts)


# ---- dense baseline ------------------------------------------------------------------------
@torch.inference_mode()
def encode_dense_images(
    model: DenseDualEncoder,
    store: ImageStore,
    batch_size: int,
    device: torch.device,
    amp: bool,
    progress: bool = False,
) -> np.ndarray:
    model.eval()
    out = []
    for start in _batch_starts(store, batch_size, progress):
        idx = list(range(start, min(len(store), start + batch_size)))
        pixels, regions = store.image_batch(idx)
        with autocast_for(device, amp):
            v = model.encode_image_vectors(
                pixel_values=None if pixels is None else pixels.to(device),
                regions=None if regions is None else regions.to(device),
            )
        out.append(v.float().cpu().numpy())
    return np.concatenate(out)


@torch.inference_mode()
def encode_dense_queries(
    model: DenseDualEncoder, queries: Queries, batch_size: int, device: torch.device, amp: bool
) -> np.ndarray:
    model.eval()
    out = []
    for start in range(0, len(queries.token_ids), batch_size):
        ids, mask = pad_queries(queries.token_ids[start : start + batch_size])
        with autocast_for(device, amp):
            q = model.encode_text(ids.to(device), mask.to(device))
        out.append(q.float().cpu().numpy())
    return np.concatenate(out)


@torch.inference_mode()
def time_dense_queries(
    model: DenseDualEncoder, image_vectors: np.ndarray, queries: Queries, k: int, sample: int
) -> float:
    """Mean ms per query on CPU: run the text transformer on one query, dot with all images, top-k."""
    model.eval()
    cpu = next(model.parameters()).device.type == "cpu"
    if not cpu:
        return float("nan")
    texts = queries.token_ids[:sample]
    t0 = time.perf_counter()
    for toks in texts:
        ids, mask = pad_queries([toks])
        q = model.encode_text(ids, mask).float().numpy()[0]
        scores = image_vectors @ q
        kk = min(k, len(scores))
        np.argpartition(-scores, kk - 1)[:kk]
    return (time.perf_counter() - t0) * 1000 / max(1, len(texts))


# ---- splits --------------------------------------------------------------------------------
def folds(n_images: int) -> dict[str, list[np.ndarray]]:
    """The image sets recall is reported on: all images, plus 1K folds and 5K when there are enough."""
    out = {f"{n_images}": [np.arange(n_images)]}
    if n_images >= 2000:
        out["1K"] = [np.arange(i, i + 1000) for i in range(0, min(n_images, 5000) - 999, 1000)]
    if n_images > 5000:
        out["5K"] = [np.arange(5000)]
    return out


def fold_recalls(scores: np.ndarray, targets: np.ndarray, n_images: int) -> dict[str, dict[str, float]]:
    """Recall@K per image set, averaged over folds; queries whose image is outside a fold are skipped."""
    res: dict[str, dict[str, float]] = {}
    for name, sets in folds(n_images).items():
        parts = []
        for s in sets:
            qsel = np.nonzero((targets >= s[0]) & (targets <= s[-1]))[0]
            parts.append(recall_at_k(scores[np.ix_(qsel, s)], targets[qsel] - s[0], KS))
        res[name] = {k: float(np.mean([p[k] for p in parts])) for k in parts[0]}
    return res


@dataclass
class EvalReport:
    n_images: int
    n_queries: int
    rows: list[dict[str, Any]] = field(default_factory=list)  # model, top_n, recalls, ndcg, ms/query

    def to_json(self) -> dict[str, Any]:
        return {"n_images": self.n_images, "n_queries": self.n_queries, "rows": self.rows}


def quick_recall(
    model: Any, store: ImageStore, device: torch.device, amp: bool, batch_size: int = 64
) -> dict:
    """Validation during training: Recall@1/5/10 over all captions (all terms for VisualSparta)."""
    queries = build_queries(store.records, store.tokenize)
    if isinstance(model, DenseDualEncoder):
        v = encode_dense_images(model, store, batch_size, device, amp)
        q = encode_dense_queries(model, queries, 256, device, amp)
        scores = q @ v.T
    else:
        images = encode_sparse(model, store, batch_size, device, amp)
        scores = sparse_scores(images.term_matrix(None), query_matrix(queries, images.vocab_size))
    return recall_at_k(scores, queries.targets, KS)


def _ndcg_subset(n_images: int, queries: Queries, limit: int) -> np.ndarray:
    """Query rows for NDCG: the first caption of evenly spaced images, at most ``limit`` of them."""
    first: dict[int, int] = {}
    for qi, t in enumerate(queries.targets.tolist()):
        first.setdefault(t, qi)
    rows = np.asarray([first[t] for t in sorted(first)], dtype=np.int64)
    if len(rows) > limit:
        rows = rows[np.linspace(0, len(rows) - 1, limit).round().astype(np.int64)]
    return rows


def _row(
    name: str, top_n: int | str, scores: np.ndarray, queries: Queries, n_images: int, ndcg: float, ms: float
) -> dict[str, Any]:
    return {
        "model": name,
        "top_n": top_n,
        "recall": fold_recalls(scores, queries.targets, n_images),
        "ndcg@25": ndcg,
        "ms_per_query": ms,
    }


def _prepared(
    model: Any,
    records: Sequence[ManifestRecord],
    feature_cache: str | Path | None,
    device: Any,
    progress: bool,
) -> tuple[Any, Queries, ImageStore]:
    """The model ready for inference, the captions as its queries, the images as its store."""
    model.to(device).eval()
    tok = model.query_tokenizer()
    store = ImageStore(records, model.config, tok.tokenize, cache=False)
    # regions cached at image_size cannot be read at other scales: pixels then (index_scales)
    attach(store, model, None if model.config.index_scales else feature_cache, device, progress)
    return tok, build_queries(records, tok.tokenize), store


def evaluate(
    records: Sequence[ManifestRecord],
    model: VisualSpartaModel | None,
    dense: DenseDualEncoder | None = None,
    top_ns: Sequence[TopN] = TOP_N,
    batch_size: int = 64,
    device: torch.device | None = None,
    amp: bool = False,
    ndcg_queries: int = 1000,
    time_queries: int = 500,
    seed: int = 0,
    progress: bool = False,
    query_weights: Sequence[str] = (DEFAULT,),
    feature_cache: str | Path | None = None,
) -> EvalReport:
    """All rows of the report: VisualSparta at each top-n (one row per ``query_weights``: names of
    ``termindex.weightings.registry.WEIGHTINGS``), the dense baseline, random. ``feature_cache``: a
    folder where a model with a frozen stem keeps these images' regions (``model.feature_cache``;
    built when missing or stale)."""
    for weighting in query_weights:
        WEIGHTINGS.check(weighting)  # before any image is encoded
    records = [r for r in records if r.captions]
    if len(records) < 2:
        raise ValueError("evaluation needs at least 2 images with captions")
    device = device or torch.device("cpu")
    n = len(records)
    texts = [c for r in records for c in r.captions]
    targets = np.asarray([i for i, r in enumerate(records) for _ in r.captions], dtype=np.int64)
    probe = Queries(texts, [[] for _ in texts], targets)
    ndcg_rows = _ndcg_subset(n, probe, ndcg_queries)
    t0 = time.perf_counter()
    relevance = caption_relevance([texts[i] for i in ndcg_rows], [r.captions for r in records])
    log.info("ROUGE-L relevance, %d queries x %d images: %.1fs", len(ndcg_rows), n, time.perf_counter() - t0)
    report = EvalReport(n_images=n, n_queries=len(texts))

    if model is not None:
        qtok, queries, store = _prepared(model, records, feature_cache, device, progress)
        t0 = time.perf_counter()
        images = encode_sparse(model, store, batch_size, device, amp, progress)
        log.info("VisualSparta: encoded %d images in %.1fs", n, time.perf_counter() - t0)
        qmat = query_matrix(queries, images.vocab_size)
        for top_n in top_ns:
            cut = model.config.top_n if top_n == NATURAL else top_n
            if isinstance(cut, str):
                raise ValueError(f"top-n: positive integers, {NATURAL!r} or None (all), got {cut!r}")
            terms = images.term_matrix(cut)
            ms = time_sparse_queries(terms, queries, qtok.query_weights, 10, time_queries)
            for weighting in query_weights:
                scores = sparse_scores(terms, weighted_queries(qmat, terms, weighting))
                row = _row("VisualSparta", top_n or "all", scores, queries, n, 0.0, ms)
                row["query_weights"] = weighting
                row["positive_terms_per_image"] = images.positive_terms()
                row["ndcg@25"] = ndcg_at_k(scores[ndcg_rows], relevance, 25)
                row["terms_per_image"] = float(terms.nnz / n)
                row["postings_per_query"] = postings_per_query(terms, qmat)
                report.rows.append(row)

    if dense is not None:
        dtok, queries, store = _prepared(dense, records, feature_cache, device, progress)
        vectors = encode_dense_images(dense, store, batch_size, device, amp, progress)
        q = encode_dense_queries(dense, queries, 256, device, amp)
        scores = q @ vectors.T
        ms = time_dense_queries(dense, vectors, queries, 10, time_queries)
        row = _row("dense", "-", scores, queries, n, ndcg_at_k(scores[ndcg_rows], relevance, 25), ms)
        report.rows.append(row)

    rng = np.random.default_rng(seed)
    scores = rng.random((len(texts), n), dtype=np.float64)
    report.rows.append(
        _row("random", "-", scores, probe, n, ndcg_at_k(scores[ndcg_rows], relevance, 25), 0.0)
    )
    return report


def postings_per_query(terms: sp.csr_matrix, qmat: sp.csr_matrix) -> float:
    """Mean postings an inverted index over ``terms`` (``[V, N]``) reads per query (``qmat``,
    ``[Q, V]``): the sum of its tokens' document frequencies (what an engine's work grows with)."""
    df = document_frequencies(terms).astype(np.float64)
    return float(((qmat != 0).astype(np.float64) @ df).mean()) if qmat.shape[0] else 0.0
