"""PISA through ``pyterrier-pisa``: exact top-k over quantized, compressed impact postings.

Pre-weighted documents are indexed the way ``PisaToksIndexer`` does (``PisaIndex(...,
stemmer='none')`` with ``{"docno", "toks": {term: impact}}`` docs and the ``quantized`` scorer,
whose score is ``sum query_weight * impact``), but the uncompressed inverted files it writes
(``inv.docs``/``inv.freqs``/``inv.sizes`` + lexicons) are produced here with numpy from our
own chunked inversion (``vsparta.bench.invert``, 5 bytes per posting): its Python dict loop would take
longer than every other engine's build. PISA compresses them (``block_simdbp``) and builds
block-max metadata on first use, which is timed as part of the build.

Impacts: ``round(255 * saturate(w) / max saturate(w))`` clipped to 1..255 (8-bit, like PISA's own
quantization), so ties and near-ties reorder: its agreement with the oracle is reported, not assumed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from vsparta.bench.corpus import Corpus, Query
from vsparta.bench.engines.base import Adapter, Skip, dir_bytes
from vsparta.bench.invert import invert
from vsparta.bench.quiet import native_output_silenced
from vsparta.termindex.scoring import saturate_array

QUANT_LEVELS = 255


def _term(t: int) -> str:
    """Zero-padded so that PISA's sorted lexicon order is vocabulary id order."""
    return f"t{t:05d}"


def _interleave(lengths: np.ndarray, values: np.ndarray) -> np.ndarray:
    """PISA's list layout: for each list, its length then its values (all uint32)."""
    out = np.empty(len(lengths) + len(values), dtype=np.uint32)
    csum = np.cumsum(lengths, dtype=np.int64)
    starts = np.concatenate([[0], csum[:-1]]).astype(np.int64) + np.arange(len(lengths), dtype=np.int64)
    mask = np.ones(len(out), dtype=bool)
    mask[starts] = False
    out[starts] = lengths
    out[mask] = values
    return out


def write_pisa_inverted(corpus: Corpus, path: Path) -> None:
    """Write the uncompressed PISA collection ``PisaToksIndexer`` would write for impact docs."""
    from pyterrier_pisa import _pisathon

    step = 50_000_000
    max_log = max(
        float(saturate_array(np.asarray(corpus.weights[a : a + step], dtype=np.float32).max()))
        for a in range(0, corpus.nnz, step)
    )
    scale = np.float32(QUANT_LEVELS / max_log)

    def quantize(w: np.ndarray) -> np.ndarray:
        return np.clip(np.rint(saturate_array(w) * scale), 1, QUANT_LEVELS).astype(np.uint8)

    indptr, rows, impacts = invert(corpus, quantize, np.uint8)  # 5 bytes per posting
    doc_lens = np.zeros(corpus.n_docs, dtype=np.int64)
    for a in range(0, corpus.nnz, step):  # document "length" = sum of its impacts, as PISA expects
        doc_lens += np.bincount(
            rows[a : a + step], weights=impacts[a : a + step], minlength=corpus.n_docs
        ).astype(np.int64)
    df = np.diff(indptr)
    present = np.flatnonzero(df > 0)
    path.mkdir(parents=True, exist_ok=True)
    with open(path / "inv.docs", "wb") as fd, open(path / "inv.freqs", "wb") as ff:
        fd.write(np.array([1, corpus.n_docs], dtype=np.uint32).tobytes())
        for group in np.array_split(present, max(1, int(corpus.nnz // step) + 1)):
            if len(group) == 0:
                continue
            lengths = df[group].astype(np.uint32)
            a, b = int(indptr[group[0]]), int(indptr[group[-1] + 1])  # present columns are contiguous runs
            fd.write(_interleave(lengths, rows[a:b].astype(np.uint32)).tobytes())
            ff.write(_interleave(lengths, impacts[a:b].astype(np.uint32)).tobytes())
    del rows, impacts
    with open(path / "inv.sizes", "wb") as f:
        f.write(np.concatenate([[corpus.n_docs], doc_lens]).astype(np.uint32).tobytes())
    (path / "fwd.documents").write_text("".join(corpus.id_of(i) + "\n" for i in range(corpus.n_docs)))
    (path / "fwd.terms").write_text("".join(_term(int(t)) + "\n" for t in present))
    _pisathon.build_binlex(str(path / "fwd.documents"), str(path / "fwd.doclex"))
    _pisathon.build_binlex(str(path / "fwd.terms"), str(path / "fwd.termlex"))
    meta = {"type": "sparse_index", "format": "pisa", "package_hint": "pyterrier-pisa", "stemmer": "none"}
    (path / "pt_meta.json").write_text(json.dumps(meta))


class PisaAdapter(Adapter):
    kind = "exact, 8-bit impacts"  # exact top-k of quantized scores

    def __init__(self, algorithm: str = "block_max_maxscore") -> None:
        self.algorithm = algorithm
        self.name = f"PISA ({algorithm}, 8-bit)"

    def check(self, corpus: Corpus, free_bytes: int) -> None:
        try:
            import pyterrier_pisa  # noqa: F401
        except Exception as e:  # noqa: BLE001 - any import failure means: not runnable here
            raise Skip(f"pyterrier-pisa not importable: {e}") from None
        # our inversion (5 B/posting) + PISA's own compression pass over its mapped input
        need = corpus.nnz * 13 + 2**30
        if need > free_bytes:
            raise Skip(f"writing its postings needs ~{need / 2**30:.1f} GiB, {free_bytes / 2**30:.1f} free")

    def build(self, corpus: Corpus, workdir: Path) -> None:
        from pyterrier_pisa import PisaIndex, _pisathon

        self.corpus = corpus
        self.path = workdir / "pisa"
        with native_output_silenced():
            write_pisa_inverted(corpus, self.path)
            self.index = PisaIndex(str(self.path), stemmer="none", stops="none", threads=1)
            self.retr = self.index.quantized(num_results=10, query_algorithm=self.algorithm, toks_scale=1.0)
            # The first retrieval context compresses the postings and builds block-max data: part of build.
            self.retr.reset_retrieval_context(force=True)
        self._pisathon = _pisathon

    def set_queries(self, queries: Sequence[Query]) -> None:
        self.queries = [{_term(t): float(b) for t, b in q.items()} for q in queries]

    def _retrieve(self, qis: Sequence[int], k: int, threads: int) -> list[list[int]]:
        n = len(qis) * k
        qidx = np.empty(n, dtype=np.int32)
        docnos = np.empty(n, dtype=object)
        ranks = np.empty(n, dtype=np.int32)
        scores = np.empty(n, dtype=np.float32)
        size = self._pisathon.retrieve(
            self.retr._ctxt,
            self.algorithm,
            [(j, self.queries[qi]) for j, qi in enumerate(qis)],
            k=k,
            threads=threads,
            query_weighted=1,
            pretokenised=True,
            result_qidxs=qidx,
            result_docnos=docnos,
            result_ranks=ranks,
            result_scores=scores,
        )
        out: list[list[tuple[int, int]]] = [[] for _ in qis]
        for j in range(size):
            out[qidx[j]].append((int(ranks[j]), self.corpus.row_of(docnos[j])))
        return [[row for _, row in sorted(hits)] for hits in out]

    def search(self, qi: int, k: int) -> list[int]:
        return self._retrieve([qi], k, 1)[0]

    def search_many(self, qis: Sequence[int], k: int, threads: int) -> list[list[int]]:
        return self._retrieve(list(qis), k, threads)

    def disk_bytes(self) -> int | None:
        # The compressed index PISA searches (+ block-max data, lexicons), not its uncompressed input.
        skip = {"inv.docs", "inv.freqs", "inv.sizes", "fwd.documents", "fwd.terms"}
        return sum(p.stat().st_size for p in self.path.iterdir() if p.is_file() and p.name not in skip)

    def close(self) -> None:
        self.retr = self.index = None

    def input_bytes(self) -> int:
        return dir_bytes(self.path)
