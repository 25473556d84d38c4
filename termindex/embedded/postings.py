"""Reading the embedded engine's postings: the layout, and the decoders every kernel shares.

Postings layout of one segment (see ``embedded.format``): documents are grouped in blocks of
``1 << block_shift`` local ids; every (term t, block b) has a run, ``key = t * n_blocks + b``.

- A *sparse* run has ``c = doffsets[key+1] - doffsets[key] > 0`` postings: ``c`` weights from
  ``wbits[woffsets[key]]`` (IEEE half-float bits) and ``c`` ids inside the block, ascending,
  stored from byte ``boffsets[key]`` of ``ids`` in one of two encodings:
  *flat*: 2 bytes (little-endian uint16) per id, when ``hoffsets[key] == hoffsets[key+1]``;
  *split*: 1 byte per id (its low byte), the high bytes in a directory ``hdir[h]`` for
  ``h`` in ``hoffsets[key]:hoffsets[key+1]``, one entry per 256-document sub-block that has
  postings, ``hend[h]`` = end of that sub-block's postings within the run. Chosen when the
  directory's 3 bytes per entry cost less than the second byte of every id (> 3 postings per
  used sub-block, the common case: ~1.3 instead of 2 bytes per id).
- A *dense* run (``c == 0``, non-empty ``wbits`` range) has one ``wbits`` and one ``quant``
  byte per document of the block, 0 where the term is absent: chosen when more than half of the
  block has the term.

``blockmax[key]`` is the largest weight bits of the run (positive half floats order like their
bit patterns), used to skip blocks that cannot reach the top k. The eight arrays travel
together as ``postings = (doffsets, woffsets, boffsets, hoffsets, ids, hdir, hend, wbits)``.

Kernels compile at first use and are cached on disk (``cache=True``).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _u16(ids, pos):
    """The flat-encoded id at byte ``pos`` (little-endian)."""
    return np.int64(ids[pos]) | (np.int64(ids[pos + 1]) << 8)


@njit(cache=True, nogil=True)
def _decode_sparse(doffsets, boffsets, hoffsets, ids, hdir, hend, key, out):
    """Ids of sparse run ``key`` into ``out[:c]``; returns c (0 for a dense or empty run)."""
    c = doffsets[key + 1] - doffsets[key]
    blo = boffsets[key]
    hlo = hoffsets[key]
    hhi = hoffsets[key + 1]
    if hlo == hhi:
        for r in range(c):
            out[r] = _u16(ids, blo + 2 * r)
        return c
    start = 0
    for h in range(hlo, hhi):
        base = np.int64(hdir[h]) << 8
        end = np.int64(hend[h])
        for r in range(start, end):
            out[r] = base | np.int64(ids[blo + r])
        start = end
    return c


@njit(cache=True, nogil=True)
def _split_range(hoffsets, hdir, hend, key, local):
    """(start, end) of the postings of ``local``'s 256-document sub-block in split run ``key``;
    (0, 0) when that sub-block has none."""
    hlo = hoffsets[key]
    hhi = hoffsets[key + 1]
    high = local >> 8
    lo = hlo
    hi = hhi
    while lo < hi:
        mid = (lo + hi) >> 1
        if np.int64(hdir[mid]) < high:
            lo = mid + 1
        else:
            hi = mid
    if lo == hhi or np.int64(hdir[lo]) != high:
        return 0, 0
    start = np.int64(hend[lo - 1]) if lo > hlo else 0
    return start, np.int64(hend[lo])


@njit(cache=True, nogil=True)
def _find_sparse(doffsets, boffsets, hoffsets, ids, hdir, hend, key, local):
    """Position (within the run) of ``local`` in sparse run ``key``, or -1."""
    blo = boffsets[key]
    if hoffsets[key] == hoffsets[key + 1]:
        c = doffsets[key + 1] - doffsets[key]
        lo = 0
        hi = c
        while lo < hi:
            mid = (lo + hi) >> 1
            if _u16(ids, blo + 2 * mid) < local:
                lo = mid + 1
            else:
                hi = mid
        if lo < c and _u16(ids, blo + 2 * lo) == local:
            return lo
        return -1
    start, end = _split_range(hoffsets, hdir, hend, key, local)
    low = local & 255
    lo = start
    hi = end
    while lo < hi:
        mid = (lo + hi) >> 1
        if np.int64(ids[blo + mid]) < low:
            lo = mid + 1
        else:
            hi = mid
    if lo < end and np.int64(ids[blo + lo]) == low:
        return lo
    return -1


@njit(cache=True, nogil=True)
def _weight_of(doffsets, woffsets, boffsets, hoffsets, ids, hdir, hend, wbits, key, local):
    """Weight bits of document ``local`` in run ``key`` (0 = term absent)."""
    wlo = woffsets[key]
    if doffsets[key] == doffsets[key + 1]:
        if local < woffsets[key + 1] - wlo:
            return wbits[wlo + local]
        return np.uint16(0)
    pos = _find_sparse(doffsets, boffsets, hoffsets, ids, hdir, hend, key, local)
    if pos < 0:
        return np.uint16(0)
    return wbits[wlo + pos]


@njit(cache=True, nogil=True)
def document_terms(
    doffsets, woffsets, boffsets, hoffsets, ids, hdir, hend, wbits, n_terms, n_blocks, block_shift, doc
):
    """Reconstruct one document's (term ids, weight bits) from the postings: no forward index."""
    b = doc >> block_shift
    local = doc & ((1 << block_shift) - 1)
    terms = np.empty(n_terms, dtype=np.int64)
    bits = np.empty(n_terms, dtype=np.uint16)
    n = 0
    for t in range(n_terms):
        w = _weight_of(
            doffsets, woffsets, boffsets, hoffsets, ids, hdir, hend, wbits, t * n_blocks + b, local
        )
        if w != 0:
            terms[n] = t
            bits[n] = w
            n += 1
    return terms[:n], bits[:n]
