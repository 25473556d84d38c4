"""The ``terms`` object of a bulk body, as short as Elasticsearch allows, built without per-term Python.

Elasticsearch keeps 9 significant bits of a feature value: Lucene's FeatureField indexes
``floatToIntBits(v) >>> 15`` (the *code*). Every float32 whose code is the same scores the
same, so each weight is sent as the shortest decimal whose float32 has the weight's code
(``0.37`` instead of ``0.36787945``): 3-5 characters instead of ~10 for typical weights. That
makes the request and the stored ``_source`` ~25% smaller and Elasticsearch parses fewer digits;
the source then holds exactly what the index scores with, and re-indexing it gives the same
index. (Measured on 1,000-term documents, docs/elasticsearch.md.)

The text of each distinct code is computed once per process; a numba kernel copies key and
value bytes into one buffer per batch, so a 1,000-term document costs microseconds, not the
~350 µs of joining 1,000 Python byte strings.
"""

from __future__ import annotations

import threading
from functools import lru_cache

import numpy as np
from numba import njit

CODE_SHIFT = 15  # FeatureField: floatToIntBits(value) >>> 15
N_CODES = 1 << 16  # positive floats: sign bit 0, so codes fit in 16 bits
TEXT_WIDTH = 16  # longest text of a normal positive float32 code ("1.23456789e-38" is 14)


def stored_codes(weights: np.ndarray) -> np.ndarray:
    """The code Elasticsearch indexes for each (positive, normal float32) weight."""
    return (np.asarray(weights, dtype=np.float32).view(np.uint32) >> CODE_SHIFT).astype(np.int64)


def round_like_elasticsearch(weights: np.ndarray | float) -> np.ndarray:
    """The value Elasticsearch's ``rank_feature(s)`` stores for each weight (float64 array).

    Lucene's ``FeatureField`` parses the value as a float32 and keeps ``floatToIntBits(v) >>> 15``
    as the term frequency, decoding with ``intBitsToFloat(tf << 15)``: the low 15 mantissa bits
    are truncated (toward zero), leaving 8 stored + 1 implicit = 9 significant bits.
    """
    shift = np.uint32(CODE_SHIFT)
    bits = np.asarray(weights, dtype=np.float32).view(np.uint32) >> shift << shift
    return bits.view(np.float32).astype(np.float64)


def code_value(code: int) -> float:
    """The float32 value Elasticsearch scores with for ``code`` (low 15 mantissa bits zero)."""
    return float(np.uint32(code << CODE_SHIFT).view(np.float32))


def _code_of(text: str) -> int:
    return int(np.float32(text).view(np.uint32)) >> CODE_SHIFT


def shortest_text(code: int) -> bytes:
    """The shortest decimal (JSON number) that Java's ``Float.parseFloat`` turns into a float32 of
    ``code``. Candidates are the middle of the code's range rounded to 1, 2, ... significant
    digits; one is accepted only if values a hair (1e-12 relative) to either side give the same
    code too, so no float32 rounding rule (Java rounds the decimal once, numpy through a double)
    can move it out of the range."""
    lo = code_value(code)
    hi = float(np.uint32((code + 1) << CODE_SHIFT).view(np.float32))
    mid = (lo + hi) / 2
    for digits in range(1, 10):
        text = f"{mid:.{digits}g}"
        x = float(text)
        if all(_code_of(t) == code for t in (text, repr(x * (1 + 1e-12)), repr(x * (1 - 1e-12)))):
            return text.encode()
    return repr(float(np.float32(lo))).encode()  # not reached for normal floats: 9 digits always fit


class _ValueTable:
    """Text of each code, filled on first use (a process meets a few thousand distinct codes)."""

    def __init__(self) -> None:
        self.text = np.zeros((N_CODES, TEXT_WIDTH), dtype=np.uint8)
        self.length = np.zeros(N_CODES, dtype=np.int64)  # 0 = not computed yet
        self._lock = threading.Lock()

    def fill(self, codes: np.ndarray) -> None:
        missing = np.unique(codes[self.length[codes] == 0])
        if not len(missing):
            return
        with self._lock:
            for code in missing.tolist():
                if self.length[code]:
                    continue
                text = shortest_text(code)
                self.text[code, : len(text)] = np.frombuffer(text, dtype=np.uint8)
                self.length[code] = len(text)  # set last: readers check it first


_VALUES = _ValueTable()


@lru_cache(maxsize=8)
def _key_table(size: int) -> tuple[np.ndarray, np.ndarray]:
    """``"<id>":`` for every vocabulary id below ``size``: (flat bytes, offsets)."""
    keys = [b'"%d":' % i for i in range(size)]
    offsets = np.zeros(size + 1, dtype=np.int64)
    np.cumsum([len(k) for k in keys], out=offsets[1:])
    return np.frombuffer(b"".join(keys), dtype=np.uint8), offsets


@njit(cache=True, nogil=True)
def _write_terms(term_ids, codes, key_flat, key_off, val_text, val_len, out):
    """``"id":value,`` for every term, back to back."""
    p = 0
    for i in range(term_ids.shape[0]):
        t = term_ids[i]
        for j in range(key_off[t], key_off[t + 1]):
            out[p] = key_flat[j]
            p += 1
        c = codes[i]
        for j in range(val_len[c]):
            out[p] = val_text[c, j]
            p += 1
        out[p] = 44  # ','
        p += 1


@njit(cache=True, nogil=True)
def _repeating_rows(indptr, term_ids, last_row):
    out = np.zeros(indptr.shape[0] - 1, dtype=np.bool_)
    for r in range(indptr.shape[0] - 1):
        for i in range(indptr[r], indptr[r + 1]):
            t = term_ids[i]
            if last_row[t] == r:
                out[r] = True
            last_row[t] = r
    return out


def rows_repeating_a_term(indptr: np.ndarray, term_ids: np.ndarray) -> np.ndarray:
    """Which rows list a term id twice (bool per row), in one pass whatever the order of the
    terms (the indexer's are heaviest first)."""
    term_ids = np.asarray(term_ids, dtype=np.int64)
    size = int(term_ids.max()) + 1 if len(term_ids) else 1
    return _repeating_rows(np.asarray(indptr, dtype=np.int64), term_ids, np.full(size, -1, dtype=np.int64))


def terms_texts(indptr: np.ndarray, term_ids: np.ndarray, weights: np.ndarray) -> list[bytes]:
    """The inside of each document's ``terms`` object (``"12":0.37,"40":1.2``), CSR input whose
    weights are already checked (positive, normal float32)."""
    term_ids = np.asarray(term_ids, dtype=np.int64)
    codes = stored_codes(weights)
    _VALUES.fill(codes)
    needed = int(term_ids.max()) + 1 if len(term_ids) else 1
    # A power of two, at least 32,768 (a BERT vocabulary): every batch reuses one cached table.
    key_flat, key_off = _key_table(1 << max(15, (needed - 1).bit_length()))
    sizes = (key_off[term_ids + 1] - key_off[term_ids]) + _VALUES.length[codes] + 1
    ends = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=ends[1:])
    out = np.empty(int(ends[-1]), dtype=np.uint8)
    _write_terms(term_ids, codes, key_flat, key_off, _VALUES.text, _VALUES.length, out)
    buf = out.tobytes()
    starts = ends[np.asarray(indptr[:-1], dtype=np.int64)].tolist()
    stops = (ends[np.asarray(indptr[1:], dtype=np.int64)] - 1).tolist()  # without the last comma
    return [buf[a:b] for a, b in zip(starts, stops, strict=True)]
