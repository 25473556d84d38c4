"""Numba kernels of the embedded engine: segment building, merging and top-k scoring.

Postings layout of one segment (see ``embedded_format``): documents are grouped in blocks of
``1 << block_shift`` local ids; for every (term t, block b) the postings run is
``offsets[t * n_blocks + b] : offsets[t * n_blocks + b + 1]`` in two parallel arrays:
``docs`` (uint16 id inside the block, ascending) and ``wbits`` (the weight as IEEE half-float
bits, uint16). ``blockmax[t * n_blocks + b]`` is the largest weight bits of that run (positive
half floats order like their bit patterns), used to skip blocks that cannot reach the top k.

Scoring accumulates ``boost * LUT[wbits]`` (``LUT`` = float32 log1p of every half float) into a
float32 array the size of one block, which stays in L2 cache. Float32 rounding is handled by
keeping every candidate within ``2 * eps`` of the k-th score, then rescoring them in float64.

Kernels compile at first use and are cached on disk (``cache=True``).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from numba import njit


@lru_cache(maxsize=1)
def log1p_table() -> np.ndarray:
    """float32 log1p of every half-float bit pattern; 0 for patterns never stored (<= 0, inf, NaN)."""
    values = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float64)
    ok = np.isfinite(values) & (values > 0)
    table = np.zeros(65536, dtype=np.float32)
    table[ok] = np.log1p(values[ok]).astype(np.float32)
    table.setflags(write=False)
    return table


# --------------------------------------------------------------------------- building / merging


@njit(cache=True, nogil=True)
def count_postings(terms, docs, n_blocks, block_shift, counts):
    """Pass 1 of a build: postings per (term, block) key. ``terms``/``docs`` in document order."""
    for p in range(terms.shape[0]):
        counts[terms[p] * n_blocks + (docs[p] >> block_shift)] += 1


@njit(cache=True, nogil=True)
def fill_postings(terms, docs, wbits, n_blocks, block_shift, cursor, out_docs, out_wbits):
    """Pass 2 of a build: scatter postings to their key's run; document order keeps runs sorted."""
    mask = (1 << block_shift) - 1
    for p in range(terms.shape[0]):
        key = terms[p] * n_blocks + (docs[p] >> block_shift)
        pos = cursor[key]
        out_docs[pos] = docs[p] & mask
        out_wbits[pos] = wbits[p]
        cursor[key] = pos + 1


@njit(cache=True, nogil=True)
def remap_postings(
    offsets,
    docs,
    wbits,
    n_terms,
    n_blocks,
    block_shift,
    remap,
    new_n_blocks,
    counts,
    cursor,
    out_docs,
    out_wbits,
    fill,
):
    """Count (``fill=False``) or scatter (``fill=True``) one source segment's live postings.

    ``remap[old local id]`` is the new local id or -1 for a deleted document. Sources are fed in
    order of their new id ranges, so every output run stays sorted.
    """
    mask = (1 << block_shift) - 1
    for t in range(n_terms):
        for b in range(n_blocks):
            key = t * n_blocks + b
            base = b << block_shift
            for p in range(offsets[key], offsets[key + 1]):
                new = remap[base + docs[p]]
                if new < 0:
                    continue
                nkey = t * new_n_blocks + (new >> block_shift)
                if fill:
                    pos = cursor[nkey]
                    out_docs[pos] = new & mask
                    out_wbits[pos] = wbits[p]
                    cursor[nkey] = pos + 1
                else:
                    counts[nkey] += 1


@njit(cache=True, nogil=True)
def run_maxima(offsets, wbits, out):
    """Largest weight bits of every (term, block) run (0 for an empty run)."""
    for key in range(out.shape[0]):
        best = 0
        for p in range(offsets[key], offsets[key + 1]):
            if wbits[p] > best:
                best = wbits[p]
        out[key] = best


@njit(cache=True, nogil=True)
def gather_ranges(src, offsets, selected):
    """Concatenate ``src[offsets[i]:offsets[i+1]]`` for i in ``selected``; returns (bytes, offsets)."""
    new_offsets = np.zeros(selected.shape[0] + 1, dtype=np.int64)
    for j in range(selected.shape[0]):
        i = selected[j]
        new_offsets[j + 1] = new_offsets[j] + offsets[i + 1] - offsets[i]
    out = np.empty(new_offsets[-1], dtype=np.uint8)
    for j in range(selected.shape[0]):
        i = selected[j]
        out[new_offsets[j] : new_offsets[j + 1]] = src[offsets[i] : offsets[i + 1]]
    return out, new_offsets


# --------------------------------------------------------------------------- reading


@njit(cache=True, nogil=True)
def _find(docs, lo, hi, local):
    """Position of ``local`` in the sorted run ``docs[lo:hi]``, or -1."""
    end = hi
    while lo < hi:
        mid = (lo + hi) >> 1
        if docs[mid] < local:
            lo = mid + 1
        else:
            hi = mid
    if lo < end and docs[lo] == local:
        return lo
    return -1


@njit(cache=True, nogil=True)
def gather_weights(qterms, offsets, docs, wbits, n_terms, n_blocks, block_shift, locals_):
    """Half-float bits of each query term in each candidate document (0 = term absent)."""
    out = np.zeros((locals_.shape[0], qterms.shape[0]), dtype=np.uint16)
    mask = (1 << block_shift) - 1
    for i in range(locals_.shape[0]):
        b = locals_[i] >> block_shift
        local = locals_[i] & mask
        for j in range(qterms.shape[0]):
            t = qterms[j]
            if t >= n_terms:
                continue
            key = t * n_blocks + b
            pos = _find(docs, offsets[key], offsets[key + 1], local)
            if pos >= 0:
                out[i, j] = wbits[pos]
    return out


@njit(cache=True, nogil=True)
def document_terms(offsets, docs, wbits, n_terms, n_blocks, block_shift, doc):
    """Reconstruct one document's (term ids, weight bits) from the postings: no forward index."""
    b = doc >> block_shift
    local = doc & ((1 << block_shift) - 1)
    terms = np.empty(n_terms, dtype=np.int64)
    bits = np.empty(n_terms, dtype=np.uint16)
    n = 0
    for t in range(n_terms):
        key = t * n_blocks + b
        pos = _find(docs, offsets[key], offsets[key + 1], local)
        if pos >= 0:
            terms[n] = t
            bits[n] = wbits[pos]
            n += 1
    return terms[:n], bits[:n]


@njit(cache=True, nogil=True)
def _kth_largest(scores, n, k):
    return np.partition(scores[:n], n - k)[n - k]


@njit(cache=True, nogil=True)
def _accumulate(acc, docs, wbits, lut, lo, hi, qb):
    """The hot loop: scatter-add one postings run (bounds hoisted so LLVM keeps them in registers)."""
    for p in range(lo, hi):
        acc[docs[p]] += qb * lut[wbits[p]]


@njit(cache=True, nogil=True)
def search_segment(
    qterms,
    qboosts,
    offsets,
    docs,
    wbits,
    blockmax,
    lut,
    deleted,
    n_docs,
    n_blocks,
    block_shift,
    k,
    theta,
    eps,
):
    """Candidates of one segment for an exact top-k: (float32 scores, local ids, new threshold).

    ``qterms`` must all be < the segment's ``n_terms``. ``theta`` is the k-th best float32
    score seen so far (from earlier segments; -inf at first). Every document whose float32
    score is within ``2 * eps`` of the final k-th score is returned, so rescoring in float64
    yields the exact top k; ``eps`` bounds one document's float32 error. Blocks are visited best
    upper bound first and skipped once their bound is below ``theta - 4 * eps``.
    """
    m = qterms.shape[0]
    ub = np.zeros(n_blocks, dtype=np.float32)
    for j in range(m):
        base = qterms[j] * n_blocks
        for b in range(n_blocks):
            ub[b] += qboosts[j] * lut[blockmax[base + b]]
    order = np.argsort(-ub)
    block = 1 << block_shift
    acc = np.zeros(block, dtype=np.float32)
    cap = 4 * k + 64
    cand_s = np.empty(cap, dtype=np.float32)
    cand_l = np.empty(cap, dtype=np.int64)
    n = 0
    for oi in range(n_blocks):
        b = order[oi]
        if ub[b] <= 0 or ub[b] < theta - 4 * eps:
            break
        first = b << block_shift
        nloc = min(block, n_docs - first)
        acc[:nloc] = 0
        for j in range(m):
            key = qterms[j] * n_blocks + b
            _accumulate(acc, docs, wbits, lut, offsets[key], offsets[key + 1], qboosts[j])
        lim = theta - 2 * eps
        for i in range(nloc):
            s = acc[i]
            if s < lim or s <= 0 or deleted[first + i] != 0:
                continue
            if n == cap:  # full: raise theta, drop what fell below, grow if still crowded
                if n >= k:
                    theta = max(theta, _kth_largest(cand_s, n, k))
                    lim = theta - 2 * eps
                w = 0
                for r in range(n):
                    if cand_s[r] >= theta - 2 * eps:
                        cand_s[w] = cand_s[r]
                        cand_l[w] = cand_l[r]
                        w += 1
                n = w
                if n > cap // 2:
                    cap *= 2
                    grown_s = np.empty(cap, dtype=np.float32)
                    grown_l = np.empty(cap, dtype=np.int64)
                    grown_s[:n] = cand_s[:n]
                    grown_l[:n] = cand_l[:n]
                    cand_s = grown_s
                    cand_l = grown_l
                if s < lim:
                    continue
            cand_s[n] = s
            cand_l[n] = first + i
            n += 1
        if n >= k:
            theta = max(theta, _kth_largest(cand_s, n, k))
    return cand_s[:n].copy(), cand_l[:n].copy(), theta


@njit(cache=True, nogil=True)
def first_repeated_term_row(indptr, terms, n_terms):
    """Index of the first document listing a term id twice, or -1 (O(postings), no sort)."""
    seen = np.full(n_terms, -1, dtype=np.int64)
    for row in range(indptr.shape[0] - 1):
        for p in range(indptr[row], indptr[row + 1]):
            t = terms[p]
            if seen[t] == row:
                return row
            seen[t] = row
    return -1
