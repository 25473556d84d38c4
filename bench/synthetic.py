"""Deterministic synthetic term documents and caption-like queries shaped like VisualSparta's.

Choices (stated so the numbers can be judged):

- Vocabulary: the 30,522 BERT word-pieces; ids 0..998 ([PAD], [unusedN], [CLS] ...) never occur,
  so 29,523 ids are usable. Each usable id gets a popularity rank from a seeded permutation.
- Document frequency: every image keeps exactly ``n_terms`` (top-n = 1000) distinct ids, drawn
  without replacement with probability proportional to a Zipf law ``1 / (rank + 100) ** 1.0``
  (Efraimidis-Spirakis keys ``-log(u) / p``; the n smallest win). ~190 ids end up in more than
  half the images, the tail in few: a skewed df like a trained model's top-1000 lists.
- Weights φ: log-normal, ``exp(-1.0 + a_t + 1.0 z)`` with a per-term offset ``a_t ~ N(0, 0.5)``
  (some word-pieces score higher everywhere) and ``z ~ N(0, 1)``; median ~0.37, heavy right tail,
  always > 0, float32. Per-term offsets give per-list maxima that differ, which is what dynamic
  pruning (MaxScore, block-max) exploits on real models.
- Queries: 8-12 tokens drawn *with replacement* (repeats count) from the same Zipf ranking
  (``1 / (rank + 100) ** 1.0``): captions are made of frequent words. A query then touches
  about 2.3 x N postings (its terms' document frequencies summed), reported with each run.

Rows are generated in fixed blocks seeded by (seed, block), so any size is a prefix of a larger
one. Generation streams into memory-mapped ``.npy`` files under a cache directory.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.lib.format import open_memmap

from vsparta.bench.corpus import Corpus, Query

log = logging.getLogger(__name__)

VOCAB_SIZE = 30522
FIRST_REAL_ID = 999  # BERT uncased: 0 [PAD], 1..998 [unusedN]/[UNK]/[CLS]/[SEP]/[MASK]
BLOCK = 256  # rows per seeded block: fixes the stream so sizes are prefixes of each other
FORMAT_VERSION = 1


@dataclass(frozen=True)
class SyntheticSpec:
    """Everything that determines the generated documents (the cache key)."""

    n_docs: int
    n_terms: int = 1000
    vocab_size: int = VOCAB_SIZE
    seed: int = 0
    zipf_s: float = 1.0
    zipf_b: float = 100.0
    weight_mu: float = -1.0
    weight_sigma: float = 1.0
    term_sigma: float = 0.5

    def __post_init__(self) -> None:
        usable = self.vocab_size - FIRST_REAL_ID
        if self.n_docs < 1:
            raise ValueError(f"n_docs must be >= 1, got {self.n_docs}")
        if not 1 <= self.n_terms <= usable:
            raise ValueError(f"n_terms must be in 1..{usable}, got {self.n_terms}")

    def key(self) -> str:
        """Cache folder name; n_docs is left out (prefix-consistent: a bigger cache serves)."""
        return (
            f"synthetic-v{FORMAT_VERSION}-t{self.n_terms}-V{self.vocab_size}-s{self.seed}"
            f"-z{self.zipf_s}-{self.zipf_b}-w{self.weight_mu}-{self.weight_sigma}-{self.term_sigma}"
        )


class _Model:
    """Per-term popularity and weight offsets, fixed by the seed."""

    def __init__(self, spec: SyntheticSpec) -> None:
        rng = np.random.default_rng([spec.seed, 0])
        self.term_ids = np.arange(FIRST_REAL_ID, spec.vocab_size, dtype=np.int64)
        rank = rng.permutation(len(self.term_ids))  # rank[j] = popularity rank of term_ids[j]
        self.rank = rank
        p = 1.0 / (rank + spec.zipf_b) ** spec.zipf_s
        self.p = p / p.sum()
        self.inv_p = (1.0 / self.p).astype(np.float32)
        self.offset = rng.normal(0.0, spec.term_sigma, len(self.term_ids)).astype(np.float32)


def _generate_block(
    spec: SyntheticSpec, model: _Model, block: int, n_rows: int
) -> tuple[np.ndarray, np.ndarray]:
    """[n_rows, n_terms] ids (ascending per row) and weights for one seeded block."""
    rng = np.random.default_rng([spec.seed, 1, block])
    keys = rng.standard_exponential((n_rows, len(model.term_ids)), dtype=np.float32)
    keys *= model.inv_p
    pick = np.argpartition(keys, spec.n_terms - 1, axis=1)[:, : spec.n_terms]
    pick.sort(axis=1)  # term_ids is ascending, so sorted positions = ascending vocabulary ids
    z = rng.standard_normal((n_rows, spec.n_terms), dtype=np.float32)
    w = np.exp(spec.weight_mu + model.offset[pick] + spec.weight_sigma * z, dtype=np.float32)
    np.maximum(w, np.float32(1e-6), out=w)
    return model.term_ids[pick], w


def generate(spec: SyntheticSpec, directory: Path) -> Corpus:
    """Write the corpus to ``directory`` block by block (memory: one block), return it mmapped."""
    tmp = directory.with_name(directory.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    nnz = spec.n_docs * spec.n_terms
    index_dtype = np.uint16 if spec.vocab_size <= 65536 else np.int32
    indices = open_memmap(tmp / "indices.npy", mode="w+", dtype=index_dtype, shape=(nnz,))
    weights = open_memmap(tmp / "weights.npy", mode="w+", dtype=np.float32, shape=(nnz,))
    model = _Model(spec)
    for block, start in enumerate(range(0, spec.n_docs, BLOCK)):
        ids, w = _generate_block(spec, model, block, BLOCK)
        rows = min(BLOCK, spec.n_docs - start)
        a, b = start * spec.n_terms, (start + rows) * spec.n_terms
        indices[a:b] = ids[:rows].reshape(-1)
        weights[a:b] = w[:rows].reshape(-1)
        if block % 200 == 0:
            log.info("generated %d / %d images", start + rows, spec.n_docs)
    indices.flush()
    weights.flush()
    del indices, weights
    np.save(tmp / "indptr.npy", np.arange(spec.n_docs + 1, dtype=np.int64) * spec.n_terms)
    meta = {"source": "synthetic", "n_docs": spec.n_docs, "vocab_size": spec.vocab_size}
    meta |= {k: v for k, v in spec.__dict__.items() if k != "n_docs"}
    (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
    shutil.rmtree(directory, ignore_errors=True)
    tmp.rename(directory)
    return Corpus.load(directory)


def load_or_generate(spec: SyntheticSpec, cache_dir: Path) -> Corpus:
    """The corpus for ``spec``: from any cached run at least as large, else generated and cached."""
    base = cache_dir / spec.key()
    if base.exists():
        cached = sorted(
            (int(sub.name[2:]), sub)
            for sub in base.iterdir()
            if re.fullmatch(r"n-\d+", sub.name) and (sub / "meta.json").exists()
        )
        for n_cached, sub in cached:
            if n_cached >= spec.n_docs:
                log.info("synthetic corpus from cache %s", sub)
                corpus = Corpus.load(sub)
                return corpus if n_cached == spec.n_docs else corpus.head(spec.n_docs)
    log.info("generating %d synthetic images x %d terms into %s", spec.n_docs, spec.n_terms, base)
    return generate(spec, base / f"n-{spec.n_docs}")


def generate_queries(
    n_queries: int,
    vocab_size: int = VOCAB_SIZE,
    seed: int = 0,
    min_len: int = 8,
    max_len: int = 12,
    zipf_s: float = 1.0,
    zipf_b: float = 100.0,
) -> list[Query]:
    """Caption-like queries ``{id: count}`` over the same popularity ranking as the documents."""
    if not 1 <= min_len <= max_len:
        raise ValueError(f"need 1 <= min_len <= max_len, got {min_len}, {max_len}")
    model = _Model(SyntheticSpec(n_docs=1, vocab_size=vocab_size, seed=seed))
    p = 1.0 / (model.rank + zipf_b) ** zipf_s
    p /= p.sum()
    rng = np.random.default_rng([seed, 2])
    queries: list[Query] = []
    for _ in range(n_queries):
        length = int(rng.integers(min_len, max_len + 1))
        toks = model.term_ids[rng.choice(len(p), size=length, p=p)]
        q: Query = {}
        for t in toks.tolist():
            q[t] = q.get(t, 0.0) + 1.0
        queries.append(q)
    return queries
