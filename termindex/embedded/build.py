"""Numba kernels that write the embedded engine's segments: build from a batch, merge, lay out.

A build is two passes over the batch's postings (count per (term, block) run, then scatter);
a merge remaps each source segment's live postings to new local ids the same way. Both produce
the sparse layout, which ``choose_layout`` and ``densify`` turn into the final one (see
``embedded.postings`` for the layout).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from vsparta.termindex.embedded.postings import _decode_sparse


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
    per block document) when more than half of the block has the term, so it costs < 6 bytes per
    posting against ~3.3 sparse, and a query adds it as one vectorized pass at 1 byte per
    document instead of a scatter-add per posting (~10x less time per posting). At 3/4 instead,
    the object benchmark's model at 1M images (terms such as "a", "and", "large" in 30-75 % of
    the images) answered in 1.6x the time for 3 % less space (docs/objects-engines.md).
    Otherwise sparse: 2 weight bytes per posting plus its id, split-encoded when that is smaller
    than 2 bytes per id.
    """
    block = 1 << block_shift
    for key in range(offsets.shape[0] - 1):
        b = key % n_blocks
        nloc = min(block, n_docs - b * block)
        lo = offsets[key]
        count = offsets[key + 1] - lo
        if nloc < 2 * count:  # dense
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


@njit(cache=True, nogil=True)
def merge_sorted_runs(keys, values, bounds, out_keys, out_values):
    """k-way merge of the runs ``keys[bounds[r]:bounds[r + 1]]`` (each ascending), carrying
    ``values`` along; equal keys come out in run order (run r before run r + 1), so runs sorted
    by (key, value) whose values grow from run to run give an output sorted by (key, value).
    Picks the smallest head by a scan of the k heads: merges have a few dozen runs at most."""
    k = bounds.shape[0] - 1
    pos = bounds[:-1].copy()
    for i in range(out_keys.shape[0]):
        best = -1
        for r in range(k):
            p = pos[r]
            if p < bounds[r + 1] and (best < 0 or keys[p] < keys[pos[best]]):
                best = r
        out_keys[i] = keys[pos[best]]
        out_values[i] = values[pos[best]]
        pos[best] += 1


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
