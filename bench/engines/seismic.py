"""Seismic (``pyseismic-lsr``): approximate learned-sparse retrieval with pruned, clustered postings.

Documents go in as ``saturate(w)`` (log(1 + w)) so its inner product is our score; queries carry their boosts.
We write Seismic's raw binary format (``u32 n_docs``, then per document ``u32 len``, ``u32 ids``,
``f32 values``) and build ``SeismicIndexRaw`` from it: no string ids to map. Its pruning keeps
about ``n_postings`` entries per list, so it is approximate: the agreement column says how much.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from vsparta.bench.corpus import Corpus, Query
from vsparta.bench.engines.base import Adapter, Skip, dir_bytes
from vsparta.bench.quiet import native_output_silenced
from vsparta.termindex.scoring import saturate_array


def write_seismic_bin(corpus: Corpus, path: Path, chunk: int = 4096) -> None:
    """Stream the corpus into Seismic's inner binary format, ``chunk`` images at a time."""
    with open(path, "wb") as f:
        f.write(np.array([corpus.n_docs], dtype=np.uint32).tobytes())
        for start, stop in corpus.chunks(chunk):
            a, b = int(corpus.indptr[start]), int(corpus.indptr[stop])
            lens = np.diff(np.asarray(corpus.indptr[start : stop + 1])).astype(np.int64)
            ids = np.asarray(corpus.indices[a:b], dtype=np.uint32)
            vals = saturate_array(np.asarray(corpus.weights[a:b], dtype=np.float32))
            # per row: [len][ids...][vals...], 4-byte words; vals reinterpreted as uint32 bits.
            words = np.empty(len(lens) + 2 * len(ids), dtype=np.uint32)
            row_start = np.concatenate([[0], np.cumsum(1 + 2 * lens)[:-1]])
            words[row_start] = lens
            pos = np.repeat(row_start + 1, lens) + (
                np.arange(len(ids)) - np.repeat(np.cumsum(lens) - lens, lens)
            )
            words[pos] = ids
            words[pos + np.repeat(lens, lens)] = vals.view(np.uint32)
            f.write(words.tobytes())


class SeismicAdapter(Adapter):
    kind = "approximate"

    def __init__(self, n_postings: int = 3500, query_cut: int = 12, heap_factor: float = 0.9) -> None:
        self.n_postings, self.query_cut, self.heap_factor = n_postings, query_cut, heap_factor
        self.name = f"Seismic (approx., {n_postings} postings/list)"

    def check(self, corpus: Corpus, free_bytes: int) -> None:
        try:
            import seismic  # noqa: F401
        except Exception as e:  # noqa: BLE001 - any import failure means: not runnable here
            raise Skip(f"pyseismic-lsr not importable: {e}") from None
        need = corpus.nnz * 16  # forward copy (ids + f16 values) and build-time buffers
        if need > free_bytes:
            raise Skip(f"needs ~{need / 2**30:.1f} GiB to build, {free_bytes / 2**30:.1f} free")

    def build(self, corpus: Corpus, workdir: Path) -> None:
        import seismic

        workdir.mkdir(parents=True, exist_ok=True)
        data = workdir / "seismic-docs.bin"
        write_seismic_bin(corpus, data)
        with native_output_silenced():
            self.index = seismic.SeismicIndexRaw.build(str(data), n_postings=self.n_postings)
            data.unlink()
            self.saved = workdir / "seismic"
            self.index.save(str(self.saved))

    def set_queries(self, queries: Sequence[Query]) -> None:
        self.queries = []
        for q in queries:
            ids = np.array(sorted(q), dtype=np.int32)
            self.queries.append((ids, np.array([q[t] for t in ids.tolist()], dtype=np.float32)))
        # The same queries in Seismic's binary format, for its native parallel batch search.
        self.query_file = self.saved.parent / "seismic-queries.bin"
        with open(self.query_file, "wb") as f:
            f.write(np.array([len(self.queries)], dtype=np.uint32).tobytes())
            for ids, vals in self.queries:
                f.write(np.array([len(ids)], dtype=np.uint32).tobytes())
                f.write(ids.astype(np.uint32).tobytes())
                f.write(vals.tobytes())

    def search_many(self, qis: Sequence[int], k: int, threads: int) -> list[list[int]]:
        if list(qis) != list(range(len(self.queries))):
            return super().search_many(qis, k, threads)
        results = self.index.batch_search(
            str(self.query_file), k, self.query_cut, self.heap_factor, 0, True, num_threads=threads
        )
        return [[int(d) for _, d in hits] for hits in results]

    def search(self, qi: int, k: int) -> list[int]:
        ids, vals = self.queries[qi]
        hits = self.index.search(ids, vals, k, self.query_cut, self.heap_factor, 0, True)
        return [int(d) for _, d in hits]

    def disk_bytes(self) -> int | None:
        files = [self.saved, *self.saved.parent.glob(self.saved.name + ".*")]  # name varies by version
        return sum(dir_bytes(p) for p in files if p.exists()) or None

    def close(self) -> None:
        self.index = None
