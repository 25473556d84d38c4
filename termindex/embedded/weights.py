"""How the embedded engine stores a weight and bounds its contribution: one home for the rule.

A weight is stored as an IEEE half float (``round_like_embedded``; the test oracle imports it
from here to score what the engine stores). A query adds ``boost * saturate(w)``
(``termindex.scoring``); the tables below give that contribution for every half-float bit
pattern (float32 for upper bounds, float64 = ``saturate_array`` itself for exact rescoring) and
its 8-bit quantized upper bound.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from vsparta.termindex.scoring import saturate, saturate_array

FLOAT16_MAX = float(np.finfo(np.float16).max)  # 65504
FLOAT16_MIN_POSITIVE = float(np.float16(2.0**-24))  # smallest subnormal half float


def round_like_embedded(weights: np.ndarray | float) -> np.ndarray:
    """The value the embedded engine stores for each weight: an IEEE half float.

    Round to nearest even from float64 (11 significant bits for normal values, relative error
    <= 2**-12). Weights above 65504 are clamped to 65504 (saturate(65504) = 11.1, far beyond any
    trained model's output) and positive weights below the smallest half float are raised to it,
    so a stored term always keeps a positive contribution.
    """
    w = np.asarray(weights, dtype=np.float64)
    h = np.clip(w, FLOAT16_MIN_POSITIVE, FLOAT16_MAX).astype(np.float16)
    return h.astype(np.float64)


def half_bits(weights: np.ndarray) -> np.ndarray:
    """``round_like_embedded`` as the uint16 bit patterns the postings hold."""
    return round_like_embedded(weights).astype(np.float16).view(np.uint16)


def _half_values() -> tuple[np.ndarray, np.ndarray]:
    """Every half-float bit pattern as float64, and which ones are storable (finite, > 0)."""
    values = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float64)
    return values, np.isfinite(values) & (values > 0)


@lru_cache(maxsize=1)
def saturation_table() -> np.ndarray:
    """float32 saturate(w) of every half-float bit pattern; 0 for patterns never stored (<= 0, inf, NaN)."""
    values, ok = _half_values()
    table = np.zeros(65536, dtype=np.float32)
    table[ok] = saturate_array(values[ok]).astype(np.float32)
    table.setflags(write=False)
    return table


@lru_cache(maxsize=1)
def saturation_table64() -> np.ndarray:
    """float64 ``saturate_array`` of every half float: the oracle's exact function, as a table.

    numpy's (SIMD) log1p and libm's differ in the last bit for ~5% of inputs; rescoring with
    this table in numba gives the same bits as the oracle's ``saturate_array`` on float64 arrays.
    """
    values, ok = _half_values()
    table = np.zeros(65536, dtype=np.float64)
    table[ok] = saturate_array(values[ok])
    table.setflags(write=False)
    return table


@lru_cache(maxsize=1)
def stored_saturation_table() -> np.ndarray:
    """float64 ``saturate`` (libm's log1p) of every half float: what a segment's bounds are made of.

    numpy's log1p takes a SIMD path on CPUs with AVX-512 and libm's elsewhere (a last-bit
    difference for ~5% of inputs), so bounds made with it gave a segment other bytes on another
    machine. A last-bit difference from the float64 rescoring is within the search's ``slack``.
    """
    values, ok = _half_values()
    table = np.zeros(65536, dtype=np.float64)
    table[ok] = [saturate(v) for v in values[ok].tolist()]
    table.setflags(write=False)
    return table


# Upper-bound quantization of a contribution c = saturate(w): q = floor(c / step) + 1 for a stored
# weight, 0 for an absent one, so (q - 1) * step <= c < q * step and q > 0 marks a match. The
# step is per segment, from its largest stored weight (``quant_step``): trained weights stay
# under ~5, and a step spanning the whole half-float range (``QUANT_STEP``, what segments written
# before the per-segment step use) left ~40 of the 255 levels in use and twice the documents to
# rescore. q <= 255 either way.
# Segments store q (quant.u8) and their step: a different saturation needs a new FORMAT_VERSION.
QUANT_STEP = saturate(65504.0) / 254.0


def quant_step(max_bits: int) -> float:
    """The step for a segment whose largest stored weight has half-float bits ``max_bits``
    (slightly above c_max / 254, so every stored weight gets q <= 255)."""
    if max_bits <= 0 or max_bits >= 0x7C00:  # empty, or not a finite positive half float
        return QUANT_STEP
    c_max = float(stored_saturation_table()[max_bits])
    return float(np.nextafter(c_max / 254.0, np.inf))


@lru_cache(maxsize=64)
def quant_tables(step: float = QUANT_STEP) -> np.ndarray:
    """uint8 quantized upper bound of saturate(w) for every half-float bit pattern (see above)."""
    values, ok = _half_values()
    q = np.zeros(65536, dtype=np.int64)
    q[ok] = np.floor(stored_saturation_table()[ok] / step).astype(np.int64) + 1
    q8 = np.minimum(q, 255).astype(np.uint8)  # only weights above the segment's maximum are cut
    q8.setflags(write=False)
    return q8
