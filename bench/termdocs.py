"""A real index's documents: term-document JSONL from the indexer -> our CSR corpus, and queries for it.

Lines are ``{"id": str, "terms": {token: weight}, ...}``; tokens map to vocabulary ids with the
model's tokenizer (``QueryTokenizer``), the same mapping the service uses. Non-positive weights
and unknown tokens are counted and dropped (logged), never silently turned into something else.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np

from vsparta.bench.corpus import Corpus, Query

log = logging.getLogger(__name__)


def _lines(path: Path):
    """Lines of one JSONL file, or of every ``*.jsonl`` in a folder (an ``--export-jsonl`` dir) in
    name order."""
    files = sorted(Path(path).glob("*.jsonl")) if Path(path).is_dir() else [Path(path)]
    if not files:
        raise ValueError(f"no *.jsonl term-document files in {path}")
    for file in files:
        with open(file, encoding="utf-8") as f:
            yield from f


def load_term_docs(path: Path, token_to_id, vocab_size: int, limit: int | None = None) -> Corpus:
    """Read JSONL (a file, or a folder of them) into CSR arrays (kept in memory: real benchmark
    sets are small)."""
    ids: list[str] = []
    indptr = [0]
    indices: list[np.ndarray] = []
    weights: list[np.ndarray] = []
    unknown = dropped = 0
    for line in _lines(path):
        if not line.strip():
            continue
        doc = json.loads(line)
        row: dict[int, float] = {}
        for token, w in doc["terms"].items():
            t = token_to_id(token)
            if t is None:
                unknown += 1
            elif float(w) > 0:
                row[t] = row.get(t, 0.0) + float(w)
            else:
                dropped += 1
        cols = np.array(sorted(row), dtype=np.int32)
        indices.append(cols)
        weights.append(np.array([row[c] for c in cols.tolist()], dtype=np.float32))
        indptr.append(indptr[-1] + len(cols))
        ids.append(str(doc["id"]))
        if limit is not None and len(ids) >= limit:
            break
    if unknown or dropped:
        log.warning("%s: %d unknown tokens and %d weights <= 0 dropped", path, unknown, dropped)
    if not ids:
        raise ValueError(f"{path}: no term documents")
    order = np.argsort(np.array(ids), kind="stable")  # rows in id order: ties by id == ties by row
    if not np.array_equal(order, np.arange(len(ids))):
        indices = [indices[i] for i in order]
        weights = [weights[i] for i in order]
        ids = [ids[i] for i in order]
        indptr = np.concatenate([[0], np.cumsum([len(x) for x in indices])]).tolist()
    return Corpus(
        np.asarray(indptr, dtype=np.int64),
        np.concatenate(indices) if indices else np.zeros(0, np.int32),
        np.concatenate(weights) if weights else np.zeros(0, np.float32),
        vocab_size,
        ids,
        {"source": str(path), "n_docs": len(ids)},
    )


def queries_from_df(
    corpus: Corpus, n_queries: int, seed: int = 0, min_len: int = 8, max_len: int = 12
) -> list[Query]:
    """Caption-like queries for a real corpus: tokens drawn (with repeats) in proportion to their df."""
    df = np.bincount(np.asarray(corpus.indices, dtype=np.int64), minlength=corpus.vocab_size).astype(
        np.float64
    )
    p = df / df.sum()
    rng = np.random.default_rng([seed, 4])
    out: list[Query] = []
    for _ in range(n_queries):
        q: Query = {}
        for t in rng.choice(len(p), size=int(rng.integers(min_len, max_len + 1)), p=p).tolist():
            q[t] = q.get(t, 0.0) + 1.0
        out.append(q)
    return out


def queries_from_captions(manifest: Path, query_weights, n_queries: int, seed: int = 0) -> list[Query]:
    """Real queries: captions of a manifest (JSONL with ``captions``), tokenized the way the service
    tokenizes a query (``QueryTokenizer.query_weights``); a seeded sample of ``n_queries``."""
    captions = []
    with open(manifest, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                captions.extend(json.loads(line).get("captions") or [])
    if not captions:
        raise ValueError(f"{manifest}: no captions")
    rng = np.random.default_rng([seed, 5])
    picked = rng.choice(len(captions), size=min(n_queries, len(captions)), replace=False)
    queries = [query_weights(captions[i]) for i in sorted(picked.tolist())]
    return [q for q in queries if q]
