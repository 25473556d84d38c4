"""``--fake-encoder``: instant, deterministic terms and no model, to measure the job's plumbing.

Decoding, the hand-over between processes, batching, the writer and the engine all run as in
a real job; only the transformer is replaced by a few vector operations. On a machine without
a GPU this shows whether the pipeline keeps up with its decode workers (the encoder on a GPU is
far faster than decoding), and lets anyone load millions of documents into an engine quickly.
"""

from __future__ import annotations

import numpy as np

from vsparta.indexer.batch import Csr
from vsparta.model.config_parts import DEFAULT_TOP_N
from vsparta.model.preprocess import ImagePreprocessor

FAKE_VOCAB_SIZE = 30522  # MiniLM's WordPiece vocabulary size
FAKE_TERMS = 1000  # terms per image (the paper's n, as DEFAULT_TOP_N)
_STRIDE = 101  # coprime with FAKE_VOCAB_SIZE: a row's ids are distinct


class FakeEncoder:
    """Terms from a checksum of the pixels: same image, same document; ``FAKE_TERMS`` per image."""

    def __init__(self, image_size: int = 224) -> None:
        self.preprocessor = ImagePreprocessor(image_size=image_size)
        self.device_busy_seconds: float | None = None

    def start_pixels(self, pixels: np.ndarray, top_n: int | None = DEFAULT_TOP_N) -> Csr:
        flat = np.asarray(pixels).reshape(len(pixels), -1)
        return _terms(flat[:, :: max(1, flat.shape[1] // 4096)].sum(axis=1, dtype=np.int64), top_n)

    def finish(self, pending: Csr) -> Csr:
        return pending

    def encode_regions_csr(self, regions: list, top_n: int | None = DEFAULT_TOP_N) -> Csr:
        return _terms(
            np.array([int(abs(float(r.features.sum())) * 1000) for r in regions], dtype=np.int64), top_n
        )

    def id_to_token(self, i: int) -> str:
        return f"[fake{i}]"


def _terms(seed: np.ndarray, top_n: int | None) -> Csr:
    n = len(seed)
    k = FAKE_TERMS if top_n is None else min(top_n, FAKE_TERMS)
    ids = (seed[:, None] * 7919 + np.arange(k, dtype=np.int64)[None, :] * _STRIDE) % FAKE_VOCAB_SIZE
    weights = np.broadcast_to(4.0 / (1.0 + np.arange(k, dtype=np.float32)), (n, k))  # strictly decreasing
    indptr = np.arange(n + 1, dtype=np.int64) * k
    return indptr, ids.astype(np.int32).ravel(), np.ascontiguousarray(weights).ravel()
