"""Exhaustive ``scipy.sparse`` scoring as an engine (same code as the oracle, timed)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from threadpoolctl import threadpool_limits

from vsparta.bench import exact
from vsparta.bench.corpus import Corpus
from vsparta.bench.engines.base import Adapter, Skip


class ScipyAdapter(Adapter):
    name = "scipy (exhaustive)"
    kind = "exact"

    def check(self, corpus: Corpus, free_bytes: int) -> None:
        # float32 data + int32 rows (bench.invert: no second copy) + chunk temporaries
        need = corpus.nnz * 8 + 2**30
        if need > free_bytes:
            raise Skip(
                f"needs ~{need / 2**30:.1f} GiB to build the CSC matrix, {free_bytes / 2**30:.1f} free"
            )

    def build(self, corpus: Corpus, workdir: Path) -> None:
        self.matrix = exact.build_matrix(corpus)

    def search(self, qi: int, k: int) -> list[int]:
        return exact.top_k(exact.scores(self.matrix, self.queries[qi]), k).tolist()

    @contextlib.contextmanager
    def threads(self, n: int) -> Iterator[None]:
        with threadpool_limits(n):
            yield

    def disk_bytes(self) -> int | None:
        m = self.matrix
        return int(m.data.nbytes + m.indices.nbytes + m.indptr.nbytes)

    def close(self) -> None:
        self.matrix = None
