"""Numba kernels of the embedded engine: segment building, merging and top-k scoring.

Postings layout of one segment (see ``embedded_format``): documents are grouped in blocks of
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
  byte per document of the block, 0 where the term is absent: chosen when more than 3/4 of the
  block has the term.

``blockmax[key]`` is the largest weight bits of the run (positive half floats order like their
bit patterns), used to skip blocks that cannot reach the top k. The eight arrays travel
together as ``postings = (doffsets, woffsets, boffsets, hoffsets, ids, hdir, hend, wbits)``.

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
def remap_postings(
    doffsets,
    woffsets,
    boffsets,
    hoffsets,
    ids,
    hdir,
    hend,
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
    scratch = np.empty(1 << block_shift, dtype=np.int64)
    for t in range(n_terms):
        for b in range(n_blocks):
            key = t * n_blocks + b
            base = b << block_shift
            wlo = woffsets[key]
            dense = doffsets[key] == doffsets[key + 1]
            n_run = woffsets[key + 1] - wlo
            if not dense:
                _decode_sparse(doffsets, boffsets, hoffsets, ids, hdir, hend, key, scratch)
            for r in range(n_run):
                if dense:
                    if wbits[wlo + r] == 0:
                        continue
                    old = base + r
                else:
                    old = base + scratch[r]
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
def choose_layout(offsets, sp_docs, n_docs, n_blocks, block_shift, doffsets, woffsets, boffsets, hoffsets):
    """Choose each run's layout (see the module doc) and fill the four offset arrays.

    Dense (a weight and a quantized bound for every document of the block, 0 = absent: 3 bytes
    per block document) when more than 3/4 of the block has the term, so it costs < 4 bytes per
    posting and scans sequentially at 1 byte per document. Otherwise sparse: 2 weight bytes per
    posting plus its id, split-encoded when that is smaller than 2 bytes per id.
    """
    block = 1 << block_shift
    for key in range(offsets.shape[0] - 1):
        b = key % n_blocks
        nloc = min(block, n_docs - b * block)
        lo = offsets[key]
        count = offsets[key + 1] - lo
        if 3 * nloc < 4 * count:
            doffsets[key + 1] = doffsets[key]
            woffsets[key + 1] = woffsets[key] + nloc
            boffsets[key + 1] = boffsets[key]
            hoffsets[key + 1] = hoffsets[key]
            continue
        doffsets[key + 1] = doffsets[key] + count
        woffsets[key + 1] = woffsets[key] + count
        subblocks = 0
        for p in range(lo, lo + count):
            if p == lo or (sp_docs[p] >> 8) != (sp_docs[p - 1] >> 8):
                subblocks += 1
        if 3 * subblocks < count:
            boffsets[key + 1] = boffsets[key] + count
            hoffsets[key + 1] = hoffsets[key] + subblocks
        else:
            boffsets[key + 1] = boffsets[key] + 2 * count
            hoffsets[key + 1] = hoffsets[key]


@njit(cache=True, nogil=True)
def densify(
    offsets, sp_docs, sp_wbits, doffsets, woffsets, boffsets, hoffsets, qtab, out_ids, out_hdir, out_hend,
    out_wbits, out_quant,
):  # fmt: skip
    """Copy sparse runs into the final arrays in the layout ``choose_layout`` chose.

    A dense run's quantized bounds live at ``woffsets[key] - doffsets[key]`` in ``out_quant``
    (the number of dense weights before it), so no further offsets array is needed.
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
            continue
        blo = boffsets[key]
        h = hoffsets[key]
        split = hoffsets[key + 1] > h
        for p in range(lo, hi):
            d = sp_docs[p]
            out_wbits[wlo + p - lo] = sp_wbits[p]
            if split:
                if p > lo and (d >> 8) != (sp_docs[p - 1] >> 8):
                    out_hend[h] = p - lo
                    h += 1
                out_hdir[h] = d >> 8
                out_ids[blo + p - lo] = d & 255
            else:
                out_ids[blo + 2 * (p - lo)] = d & 255
                out_ids[blo + 2 * (p - lo) + 1] = d >> 8
        if split:
            out_hend[h] = hi - lo


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
def gather_weights(
    qterms, doffsets, woffsets, boffsets, hoffsets, ids, hdir, hend, wbits, n_terms, n_blocks, block_shift,
    locals_,
):  # fmt: skip
    """Half-float bits of each query term in each candidate document (0 = term absent).

    Dense runs are read directly. Sparse runs need a binary search each, mostly cache misses
    on a large index: all searches advance one step per pass, so their memory loads are
    independent and overlap (about 3x faster than one search after another). A split run's
    directory (a few hundred bytes) is searched first, one lookup at a time.
    """
    nc = locals_.shape[0]
    m = qterms.shape[0]
    out = np.zeros((nc, m), dtype=np.uint16)
    mask = (1 << block_shift) - 1
    los = np.empty(nc * m, dtype=np.int64)  # search range, in postings of the run
    his = np.empty(nc * m, dtype=np.int64)
    ends = np.empty(nc * m, dtype=np.int64)
    bases = np.empty(nc * m, dtype=np.int64)  # byte offset of the run's ids
    wide = np.empty(nc * m, dtype=np.bool_)  # flat (2-byte ids) or split (low bytes)
    targets = np.empty(nc * m, dtype=np.int64)
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
            wlo = woffsets[key]
            if doffsets[key] == doffsets[key + 1]:
                if local < woffsets[key + 1] - wlo:
                    out[i, j] = wbits[wlo + local]
                continue
            bases[n] = boffsets[key]
            which[n] = i * m + j
            if hoffsets[key] == hoffsets[key + 1]:
                los[n] = 0
                his[n] = doffsets[key + 1] - doffsets[key]
                wide[n] = True
                targets[n] = local
            else:
                start, end = _split_range(hoffsets, hdir, hend, key, local)
                if start == end:
                    continue
                los[n] = start
                his[n] = end
                wide[n] = False
                targets[n] = local & 255
            ends[n] = his[n]
            n += 1
    active = n
    while active > 0:
        active = 0
        for r in range(n):
            lo = los[r]
            hi = his[r]
            if lo < hi:
                mid = (lo + hi) >> 1
                v = _u16(ids, bases[r] + 2 * mid) if wide[r] else np.int64(ids[bases[r] + mid])
                if v < targets[r]:
                    los[r] = mid + 1
                else:
                    his[r] = mid
                active += 1
    for r in range(n):
        pos = los[r]
        if pos >= ends[r]:
            continue
        v = _u16(ids, bases[r] + 2 * pos) if wide[r] else np.int64(ids[bases[r] + pos])
        if v == targets[r]:
            i = which[r] // m
            j = which[r] % m
            key = qterms[j] * n_blocks + (locals_[i] >> block_shift)
            out[i, j] = wbits[woffsets[key] + pos]
    return out


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


@njit(cache=True, nogil=True)
def _kth_largest(scores, n, k):
    return np.partition(scores[:n], n - k)[n - k]


@njit(cache=True, nogil=True)
def _accumulate_flat(acc, ids, wbits, qlut, blo, wlo, c, qb):
    """Flat sparse run: scatter-add quantized bounds (uint8 table: 64 KiB, stays in cache; slice
    views let LLVM keep the bounds in registers: ~2x the indexed loop)."""
    d = ids[blo : blo + 2 * c]
    w = wbits[wlo : wlo + c]
    for p in range(c):
        acc[np.int64(d[2 * p]) | (np.int64(d[2 * p + 1]) << 8)] += qb * np.float32(qlut[w[p]])


@njit(cache=True, nogil=True)
def _accumulate_split(acc, ids, hdir, hend, wbits, qlut, blo, wlo, c, hlo, hhi, qb):
    """Split sparse run: the same, one 256-document sub-block at a time."""
    d = ids[blo : blo + c]
    w = wbits[wlo : wlo + c]
    start = 0
    for h in range(hlo, hhi):
        base = np.int64(hdir[h]) << 8
        end = np.int64(hend[h])
        for p in range(start, end):
            acc[base + np.int64(d[p])] += qb * np.float32(qlut[w[p]])
        start = end


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
    boffsets,
    hoffsets,
    ids,
    hdir,
    hend,
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
            elif hoffsets[key] == hoffsets[key + 1]:
                _accumulate_flat(acc, ids, wbits, qlut, boffsets[key], wlo, dhi - dlo, qboosts[j])
            else:
                _accumulate_split(
                    acc, ids, hdir, hend, wbits, qlut, boffsets[key], wlo, dhi - dlo, hoffsets[key],
                    hoffsets[key + 1], qboosts[j],
                )  # fmt: skip
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
