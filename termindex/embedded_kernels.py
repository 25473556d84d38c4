"""Numba kernels of the embedded engine: segment building, merging and top-k scoring.

Postings layout of one segment (see ``embedded_format``): documents are grouped in blocks of
``1 << block_shift`` local ids; every (term t, block b) has a run, ``key = t * n_blocks + b``.
A sparse run is ``docs[doffsets[key]:doffsets[key+1]]`` (uint16 id inside the block,
ascending) with the same number of ``wbits`` from ``woffsets[key]`` (weight as IEEE half-float
bits). A dense run (empty ``docs`` range) has one ``wbits`` and one ``quant`` byte per document
of the block, 0 where the term is absent: chosen when more than 3/4 of the block has the term.
``blockmax[key]`` is the largest weight bits of the run (positive half floats order like their
bit patterns), used to skip blocks that cannot reach the top k.

Scoring accumulates ``boost * q`` (q: quantized upper bound of log1p(w), streamed from
``quant`` for dense runs, looked up from the weight bits for sparse runs) into a float32 array
the size of one block, which stays in L2 cache. The caller turns the quantization step and
float32 rounding into a margin, keeps every document within it of the k-th bound sum, and
rescores those in float64 from the half-float weights.

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


@lru_cache(maxsize=1)
def log1p_table64() -> np.ndarray:
    """float64 ``numpy.log1p`` of every half float: the oracle's exact function, as a table.

    numpy's (SIMD) log1p and libm's differ in the last bit for ~5% of inputs; rescoring with
    this table in numba gives the same bits as the oracle's ``np.log1p`` on float64 arrays.
    """
    values = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float64)
    ok = np.isfinite(values) & (values > 0)
    table = np.zeros(65536, dtype=np.float64)
    table[ok] = np.log1p(values[ok])
    table.setflags(write=False)
    return table


@njit(cache=True, nogil=True)
def rescore(bits, boosts, log1p64):
    """Exact float64 scores: sum of boost * log1p(w) in ascending term order, as the oracle adds
    (absent terms add boost * 0.0 there, which changes nothing)."""
    out = np.zeros(bits.shape[0], dtype=np.float64)
    for i in range(bits.shape[0]):
        total = 0.0
        for j in range(bits.shape[1]):
            total += boosts[j] * log1p64[bits[i, j]]
        out[i] = total
    return out


# Upper-bound quantization of a contribution c = log1p(w): q = floor(c / QUANT_STEP) + 1 for a
# stored weight, 0 for an absent one, so (q - 1) * STEP <= c < q * STEP and q > 0 marks a match.
QUANT_STEP = float(np.log1p(np.float64(65504.0)) / 254.0)  # q <= 255 for every half float


@lru_cache(maxsize=1)
def quant_tables() -> tuple[np.ndarray, np.ndarray]:
    """(uint8, float32) quantized log1p of every half-float bit pattern (see QUANT_STEP)."""
    values = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float64)
    ok = np.isfinite(values) & (values > 0)
    q = np.zeros(65536, dtype=np.int64)
    q[ok] = np.floor(np.log1p(values[ok]) / QUANT_STEP).astype(np.int64) + 1
    q8 = np.minimum(q, 255).astype(np.uint8)
    q32 = q8.astype(np.float32)
    q8.setflags(write=False)
    q32.setflags(write=False)
    return q8, q32


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
    doffsets,
    woffsets,
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

    Output is the sparse layout (``densify`` converts it). ``remap[old local id]`` is the new
    local id or -1 for a deleted document. Sources are fed in order of their new id ranges, so
    every output run stays sorted.
    """
    mask = (1 << block_shift) - 1
    for t in range(n_terms):
        for b in range(n_blocks):
            key = t * n_blocks + b
            base = b << block_shift
            dlo = doffsets[key]
            dhi = doffsets[key + 1]
            wlo = woffsets[key]
            dense = dlo == dhi
            n_run = woffsets[key + 1] - wlo
            for r in range(n_run):
                if dense:
                    if wbits[wlo + r] == 0:
                        continue
                    old = base + r
                else:
                    old = base + docs[dlo + r]
                new = remap[old]
                if new < 0:
                    continue
                nkey = t * new_n_blocks + (new >> block_shift)
                if fill:
                    pos = cursor[nkey]
                    out_docs[pos] = new & mask
                    out_wbits[pos] = wbits[wlo + r]
                    cursor[nkey] = pos + 1
                else:
                    counts[nkey] += 1


@njit(cache=True, nogil=True)
def dense_layout(offsets, n_docs, n_blocks, block_shift, doffsets, woffsets):
    """Choose each run's layout: dense (a weight and a quantized bound for every document of
    the block, 0 = absent: 3 bytes per block document) when more than 3/4 of the block has the
    term, so it costs < 4 bytes per posting and scans sequentially at 1 byte per document;
    sparse (uint16 id + weight) otherwise. Fills both offset arrays."""
    block = 1 << block_shift
    for key in range(offsets.shape[0] - 1):
        b = key % n_blocks
        nloc = min(block, n_docs - b * block)
        count = offsets[key + 1] - offsets[key]
        if 3 * nloc < 4 * count:
            doffsets[key + 1] = doffsets[key]
            woffsets[key + 1] = woffsets[key] + nloc
        else:
            doffsets[key + 1] = doffsets[key] + count
            woffsets[key + 1] = woffsets[key] + count


@njit(cache=True, nogil=True)
def densify(offsets, sp_docs, sp_wbits, doffsets, woffsets, qtab, out_docs, out_wbits, out_quant):
    """Copy sparse runs into the final arrays, expanding the ones ``dense_layout`` chose.

    A dense run's quantized bounds live at ``woffsets[key] - doffsets[key]`` in ``out_quant``
    (the number of dense weights before it), so no third offsets array is needed.
    """
    for key in range(offsets.shape[0] - 1):
        lo = offsets[key]
        hi = offsets[key + 1]
        dlo = doffsets[key]
        wlo = woffsets[key]
        if doffsets[key + 1] == dlo:
            qlo = wlo - dlo
            out_wbits[wlo : woffsets[key + 1]] = 0
            out_quant[qlo : qlo + woffsets[key + 1] - wlo] = 0
            for p in range(lo, hi):
                out_wbits[wlo + sp_docs[p]] = sp_wbits[p]
                out_quant[qlo + sp_docs[p]] = qtab[sp_wbits[p]]
        else:
            for p in range(lo, hi):
                out_docs[dlo + p - lo] = sp_docs[p]
                out_wbits[wlo + p - lo] = sp_wbits[p]


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
def _weight_of(doffsets, woffsets, docs, wbits, key, local):
    """Weight bits of document ``local`` in run ``key`` (0 = term absent)."""
    dlo = doffsets[key]
    dhi = doffsets[key + 1]
    wlo = woffsets[key]
    if dlo == dhi:
        if local < woffsets[key + 1] - wlo:
            return wbits[wlo + local]
        return np.uint16(0)
    pos = _find(docs, dlo, dhi, local)
    if pos < 0:
        return np.uint16(0)
    return wbits[wlo + pos - dlo]


@njit(cache=True, nogil=True)
def gather_weights(qterms, doffsets, woffsets, docs, wbits, n_terms, n_blocks, block_shift, locals_):
    """Half-float bits of each query term in each candidate document (0 = term absent).

    Dense runs are read directly. Sparse runs need a binary search each, mostly cache misses
    on a large index: all searches advance one step per pass, so their memory loads are
    independent and overlap (about 3x faster than one search after another).
    """
    nc = locals_.shape[0]
    m = qterms.shape[0]
    out = np.zeros((nc, m), dtype=np.uint16)
    mask = (1 << block_shift) - 1
    los = np.empty(nc * m, dtype=np.int64)
    his = np.empty(nc * m, dtype=np.int64)
    which = np.empty(nc * m, dtype=np.int64)  # i * m + j of each pending search
    n = 0
    for i in range(nc):
        b = locals_[i] >> block_shift
        local = locals_[i] & mask
        for j in range(m):
            t = qterms[j]
            if t >= n_terms:
                continue
            key = t * n_blocks + b
            dlo = doffsets[key]
            dhi = doffsets[key + 1]
            wlo = woffsets[key]
            if dlo == dhi:
                if local < woffsets[key + 1] - wlo:
                    out[i, j] = wbits[wlo + local]
            else:
                los[n] = dlo
                his[n] = dhi
                which[n] = i * m + j
                n += 1
    active = n
    while active > 0:
        active = 0
        for r in range(n):
            lo = los[r]
            hi = his[r]
            if lo < hi:
                mid = (lo + hi) >> 1
                if docs[mid] < (locals_[which[r] // m] & mask):
                    los[r] = mid + 1
                else:
                    his[r] = mid
                active += 1
    for r in range(n):
        i = which[r] // m
        j = which[r] % m
        key = qterms[j] * n_blocks + (locals_[i] >> block_shift)
        pos = los[r]
        if pos < doffsets[key + 1] and docs[pos] == (locals_[i] & mask):
            out[i, j] = wbits[woffsets[key] + pos - doffsets[key]]
    return out


@njit(cache=True, nogil=True)
def document_terms(doffsets, woffsets, docs, wbits, n_terms, n_blocks, block_shift, doc):
    """Reconstruct one document's (term ids, weight bits) from the postings: no forward index."""
    b = doc >> block_shift
    local = doc & ((1 << block_shift) - 1)
    terms = np.empty(n_terms, dtype=np.int64)
    bits = np.empty(n_terms, dtype=np.uint16)
    n = 0
    for t in range(n_terms):
        w = _weight_of(doffsets, woffsets, docs, wbits, t * n_blocks + b, local)
        if w != 0:
            terms[n] = t
            bits[n] = w
            n += 1
    return terms[:n], bits[:n]


@njit(cache=True, nogil=True)
def _kth_largest(scores, n, k):
    return np.partition(scores[:n], n - k)[n - k]


@njit(cache=True, nogil=True)
def _accumulate(acc, docs, wbits, qlut, lo, hi, wshift, qb):
    """Sparse run: scatter-add quantized bounds (uint8 table: 64 KiB, stays in cache; slice views
    let LLVM keep the bounds in registers: ~2x the indexed loop)."""
    d = docs[lo:hi]
    w = wbits[lo + wshift : hi + wshift]
    for p in range(hi - lo):
        acc[d[p]] += qb * np.float32(qlut[w[p]])


@njit(cache=True, nogil=True)
def _accumulate_dense(acc, quant, lo, n, qb):
    """Dense run: one quantized bound per document of the block, added in order (absent = 0).

    Written over slice views: LLVM then vectorizes it (~0.04 ns per document, 12x the indexed
    loop).
    """
    a = acc[:n]
    b = quant[lo : lo + n]
    for i in range(n):
        a[i] += qb * np.float32(b[i])


@njit(cache=True, nogil=True)
def _assign_dense(acc, quant, lo, n, qb):
    """First dense run of a block: overwrite instead of zeroing then adding (same values)."""
    a = acc[:n]
    b = quant[lo : lo + n]
    for i in range(n):
        a[i] = qb * np.float32(b[i])


@njit(cache=True, nogil=True, fastmath=True)
def _chunk_max(a):
    """Max of a few scores; fastmath only lets LLVM reorder the max (exact, no NaN here)."""
    best = a[0]
    for i in range(1, a.shape[0]):
        best = max(best, a[i])
    return best


@njit(cache=True, nogil=True)
def search_segment(
    qterms,
    qboosts,
    doffsets,
    woffsets,
    docs,
    wbits,
    quant,
    blockmax,
    lut,
    qlut,
    deleted,
    n_docs,
    n_blocks,
    block_shift,
    k,
    theta,
    margin,
    kth_floor,
):
    """Candidates of one segment for an exact top-k: (bound sums, local ids, new threshold).

    Each document gets A = sum of boost * q (quantized upper bounds, see QUANT_STEP) in float32:
    dense runs stream 1 byte per document, sparse runs map weights through ``qlut``.
    ``theta`` is the k-th largest A so far (-inf at first, then carried across segments).
    Every matched document with A >= theta - ``margin`` is returned: the caller chose
    ``margin`` so that no document of the exact top k (in float64) is left out, and rescores
    them. ``kth_floor(theta)`` = QUANT_STEP * (theta - slack) is a lower bound of the k-th true
    score: blocks whose true upper bound (``blockmax`` through ``lut``) is below it are skipped.
    ``qterms`` must all be < the segment's ``n_terms``.
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
    step = kth_floor[0]
    slack = kth_floor[1]
    for oi in range(n_blocks):
        b = order[oi]
        if ub[b] <= 0 or ub[b] < step * theta - slack:
            break
        first = b << block_shift
        nloc = min(block, n_docs - first)
        first_dense = -1  # a dense run initializes acc by assignment: no separate memset
        for j in range(m):
            key = qterms[j] * n_blocks + b
            if doffsets[key] == doffsets[key + 1] and woffsets[key + 1] - woffsets[key] == nloc:
                first_dense = j
                _assign_dense(acc, quant, woffsets[key] - doffsets[key], nloc, qboosts[j])
                break
        if first_dense < 0:
            acc[:nloc] = 0
        for j in range(m):
            if j == first_dense:
                continue
            key = qterms[j] * n_blocks + b
            dlo = doffsets[key]
            dhi = doffsets[key + 1]
            wlo = woffsets[key]
            if dlo == dhi:
                _accumulate_dense(acc, quant, wlo - dlo, woffsets[key + 1] - wlo, qboosts[j])
            else:
                _accumulate(acc, docs, wbits, qlut, dlo, dhi, wlo - dlo, qboosts[j])
        lim = theta - margin
        for c0 in range(0, nloc, 64):
            c1 = min(c0 + 64, nloc)
            if _chunk_max(acc[c0:c1]) < lim:
                continue  # nothing in these 64 documents reaches the threshold (vectorized test)
            for i in range(c0, c1):
                s = acc[i]
                if s < lim or s <= 0 or deleted[first + i] != 0:
                    continue
                if n == cap:  # full: raise theta, drop what fell below, grow if still crowded
                    if n >= k:
                        theta = max(theta, _kth_largest(cand_s, n, k))
                        lim = theta - margin
                    w = 0
                    for r in range(n):
                        if cand_s[r] >= lim:
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
