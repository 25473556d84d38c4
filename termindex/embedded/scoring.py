"""Numba kernels that answer a query on one segment: candidate bounds, then exact rescoring.

Scoring accumulates ``boost * q`` (q: quantized upper bound of saturate(w), streamed from
``quant`` for dense runs, looked up from the weight bits for sparse runs) into a float32 array
the size of one block, which stays in L2 cache. The caller turns the quantization step and
float32 rounding into a margin, keeps every document within it of the k-th bound sum, and
rescores those in float64 from the half-float weights.

Kernels compile at first use and are cached on disk (``cache=True``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from vsparta.termindex.embedded.postings import _split_range, _u16


@njit(cache=True, nogil=True)
def rescore(bits, boosts, sat64):
    """Exact float64 scores: sum of boost * saturate(w) in ascending term order, as the oracle adds
    (absent terms add boost * 0.0 there, which changes nothing)."""
    out = np.zeros(bits.shape[0], dtype=np.float64)
    for i in range(bits.shape[0]):
        total = 0.0
        for j in range(bits.shape[1]):
            total += boosts[j] * sat64[bits[i, j]]
        out[i] = total
    return out


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
    step_slack,
):
    """Candidates of one segment for an exact top-k: (bound sums, local ids, new threshold).

    Each document gets A = sum of boost * q (quantized upper bounds, see
    ``embedded.weights.quant_step``) in float32:
    dense runs stream 1 byte per document, sparse runs map weights through ``qlut``.
    ``theta`` is the k-th largest A so far (-inf at first, then carried across segments).
    Every matched document with A >= theta - ``margin`` is returned: the caller chose
    ``margin`` so that no document of the exact top k (in float64) is left out, and rescores
    them. ``step_slack`` = [step, slack]: step * theta - slack is a lower bound of the k-th true
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
    # Every block sets acc[:nloc] before adding (a first dense run or a zero fill), so no memset
    # here, and a small index does not allocate a whole block (256 KiB at 65,536 documents).
    acc = np.empty(max(1, min(block, n_docs)), dtype=np.float32)
    cap = 4 * k + 64
    cand_s = np.empty(cap, dtype=np.float32)
    cand_l = np.empty(cap, dtype=np.int64)
    n = 0
    step = step_slack[0]
    slack = step_slack[1]
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
def bound_range(a32, bounds):
    """Float64 (lower, upper) bounds of the true scores of candidates with bound sums ``a32``;
    ``bounds`` = [step, Q + eps_q, eps_q, s] (see ``embedded.search``)."""
    lo = np.empty(a32.shape[0], dtype=np.float64)
    hi = np.empty(a32.shape[0], dtype=np.float64)
    for i in range(a32.shape[0]):
        a = np.float64(a32[i])
        lo[i] = bounds[0] * (a - bounds[1]) - bounds[3]
        hi[i] = bounds[0] * (a + bounds[2]) + bounds[3]
    return lo, hi


@njit(cache=True, nogil=True)
def top_rows(scores, k):
    """Rows whose exact score reaches the k-th best (the top k and every tie with it)."""
    n = scores.shape[0]
    if n <= k:
        return np.arange(n)
    kth = np.partition(scores, n - k)[n - k]
    return np.flatnonzero(scores >= kth)


@njit(cache=True, nogil=True)
def search_one_segment(
    qterms, qboosts32, boosts, doffsets, woffsets, boffsets, hoffsets, ids, hdir, hend, wbits, quant,
    blockmax, lut, qlut, sat64, deleted, n_docs, n_terms, n_blocks, block_shift, k, margin,
    step_slack, bounds,
):  # fmt: skip
    """The whole search of a one-segment index in one call (a compacted index: the common case):
    candidates, the cut, exact rescoring and the top rows, with no Python between the steps
    (the fixed cost that dominated small indexes). ``qterms``/``qboosts32`` are the terms the
    segment has; ``boosts`` (float64) go with the full ``qterms`` list used to rescore.
    Returns (local ids, exact scores, weight bits) of the top k and its ties."""
    present = qterms < n_terms
    a32, locs, _ = search_segment(
        qterms[present], qboosts32[present], doffsets, woffsets, boffsets, hoffsets, ids, hdir, hend,
        wbits, quant, blockmax, lut, qlut, deleted, n_docs, n_blocks, block_shift, k, np.float32(-np.inf),
        margin, step_slack,
    )  # fmt: skip
    if a32.shape[0] > k:
        lo, hi = bound_range(a32, bounds)
        kth_lo = np.partition(lo, lo.shape[0] - k)[lo.shape[0] - k]
        locs = locs[hi >= kth_lo]
    bits = gather_weights(
        qterms, doffsets, woffsets, boffsets, hoffsets, ids, hdir, hend, wbits, n_terms, n_blocks,
        block_shift, locs,
    )  # fmt: skip
    scores = rescore(bits, boosts, sat64)
    rows = top_rows(scores, k)
    return locs[rows], scores[rows], bits[rows]
