"""Document frequencies of the embedded engine, counted from its postings (no extra file).

A term's postings in a segment are one run per block (``embedded.postings``): a sparse run stores
its length in ``doffsets``; a dense run has one weight per document of the block, 0 where absent,
so its postings are the non-zero weights. Segments never change, so a count is cached by
(segment name, term) for as long as the segment lives.

Like Lucene's ``docFreq`` and ``maxDoc``, a document deleted or replaced since its segment was
written still counts, in ``df`` and in the document total alike, until a merge drops it: exact
live counts would mean decoding every posting of a common word per query.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

import numpy as np

from vsparta.termindex.base import TermStatistics
from vsparta.termindex.embedded.format import Segment
from vsparta.termindex.errors import InvalidQuery


def segment_df(seg: Segment, term: int) -> int:
    """How many postings ``term`` has in ``seg`` (0 for a term outside its vocabulary)."""
    if term >= seg.n_terms or not seg.n_docs:
        return 0
    keys = term * seg.n_blocks + np.arange(seg.n_blocks)
    sparse = seg.doffsets[keys + 1] - seg.doffsets[keys]
    total = int(sparse.sum())
    starts, ends = seg.woffsets[keys], seg.woffsets[keys + 1]
    for b in np.flatnonzero((sparse == 0) & (ends > starts)).tolist():  # dense runs
        total += int(np.count_nonzero(seg.wbits[int(starts[b]) : int(ends[b])]))
    return total


class SegmentCounts:
    """Per-(segment, term) counts, at most ``max_entries`` (emptied when full: segments come and
    go with merges, so old entries are the ones to drop)."""

    def __init__(self, max_entries: int = 262_144) -> None:
        self.max_entries = max_entries
        self._counts: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()

    def statistics(
        self, segments: Sequence[Segment], term_ids: Iterable[int], version: str
    ) -> TermStatistics:
        df: dict[int, int] = {}
        ids = sorted({int(t) for t in term_ids})
        if ids and ids[0] < 0:
            raise InvalidQuery("vocabulary ids are non-negative integers")
        for t in ids:
            total = 0
            for seg in segments:
                key = (seg.name, t)
                n = self._counts.get(key)
                if n is None:
                    n = segment_df(seg, t)
                    with self._lock:
                        if len(self._counts) >= self.max_entries:
                            self._counts.clear()
                        self._counts[key] = n
                total += n
            df[t] = total
        return TermStatistics(sum(seg.n_docs for seg in segments), df, version)
