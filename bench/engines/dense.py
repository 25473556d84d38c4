"""The paper's dense baseline: brute-force inner product over 768-d float32 image vectors.

The vectors are random (seeded, unit norm): their values do not matter for speed, only the shape
(N x 768 float32, 3 KiB per image). Agreement with the term oracle does not apply (another model).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from vsparta.bench.corpus import Corpus, Query
from vsparta.bench.engines.base import Adapter, Skip

DIM = 768


def random_unit_vectors(n: int, seed: int, dim: int = DIM, block: int = 65536) -> np.ndarray:
    out = np.empty((n, dim), dtype=np.float32)
    for b, start in enumerate(range(0, n, block)):
        rng = np.random.default_rng([seed, 3, b])
        x = rng.standard_normal((min(block, n - start), dim), dtype=np.float32)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        out[start : start + len(x)] = x
    return out


class _Dense(Adapter):
    kind = "dense"
    sparse = False

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def check(self, corpus: Corpus, free_bytes: int) -> None:
        need = corpus.n_docs * DIM * 4 * 2
        if need > free_bytes:
            raise Skip(
                f"{corpus.n_docs} x {DIM} float32 needs ~{need / 2**30:.1f} GiB, "
                f"{free_bytes / 2**30:.1f} free"
            )

    def set_queries(self, queries: Sequence[Query]) -> None:
        self.qvecs = random_unit_vectors(len(queries), self.seed + 1)

    def disk_bytes(self) -> int | None:
        return int(self.vectors.nbytes)

    def close(self) -> None:
        self.vectors = None


class NumpyDenseAdapter(_Dense):
    name = "dense 768-d (numpy)"

    def build(self, corpus: Corpus, workdir: Path) -> None:
        self.vectors = random_unit_vectors(corpus.n_docs, self.seed)

    def search(self, qi: int, k: int) -> list[int]:
        s = self.vectors @ self.qvecs[qi]
        k = min(k, len(s))
        part = np.argpartition(-s, k - 1)[:k]
        return part[np.argsort(-s[part], kind="stable")].tolist()

    @contextlib.contextmanager
    def threads(self, n: int) -> Iterator[None]:
        with threadpool_limits(n):
            yield


class FaissDenseAdapter(_Dense):
    name = "dense 768-d (faiss flat)"

    def check(self, corpus: Corpus, free_bytes: int) -> None:
        try:
            import faiss  # noqa: F401
        except Exception as e:  # noqa: BLE001
            raise Skip(f"faiss-cpu not importable: {e}") from None
        super().check(corpus, free_bytes)

    def build(self, corpus: Corpus, workdir: Path) -> None:
        import faiss

        self.vectors = random_unit_vectors(corpus.n_docs, self.seed)
        self.index = faiss.IndexFlatIP(DIM)
        self.index.add(self.vectors)

    def search(self, qi: int, k: int) -> list[int]:
        _, ids = self.index.search(self.qvecs[qi : qi + 1], k)
        return [int(i) for i in ids[0] if i >= 0]

    def search_many(self, qis: Sequence[int], k: int, threads: int) -> list[list[int]]:
        """faiss's own batch (OpenMP over queries/blocks): how it is used at scale."""
        import faiss

        faiss.omp_set_num_threads(threads)
        _, ids = self.index.search(self.qvecs[list(qis)], k)
        return [[int(i) for i in row if i >= 0] for row in ids]

    @contextlib.contextmanager
    def threads(self, n: int) -> Iterator[None]:
        import faiss

        before = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(n)
        try:
            yield
        finally:
            faiss.omp_set_num_threads(before)

    def close(self) -> None:
        self.index = None
        super().close()
