"""Mapper stage: decoded batches -> term documents as CSR arrays (the only stage on the device).

The encoder scores every vocabulary term for each image and keeps the top-n (paper section 3.3,
docs/architecture.md section 2) on the device; here we only batch, call it, keep positive finite weights
and attach ids and metadata. Nothing here makes a Python object per term. Term-document input
skips the model: tokens are mapped back to vocabulary ids.

With a device that runs asynchronously (CUDA), one pixel batch stays in flight: batch k+1 is
queued before the results of batch k are fetched, so the GPU computes while the host stacks,
hands results to the writer and waits for decoded images. Pictures arrive decoded (host arrays,
or device tensors when the decode stage used the GPU); the mapper never decodes.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from vsparta.indexer.batch import Csr, TermBatch, canonical_csr
from vsparta.indexer.decoder import Decoded, stack_pictures
from vsparta.indexer.items import Failure
from vsparta.indexer.termdocs import TermDocError, terms_from_tokens
from vsparta.model.config_parts import DEFAULT_TOP_N


class ImageTermEncoder(Protocol):
    """What the indexer needs from a model (``model.encode.TermEncoder``, ``indexer.fake.FakeEncoder``).

    Not ``model.layers.Encoder`` (a transformer layer stack): this is the whole image -> terms step.
    """

    preprocessor: Any

    def start_pixels(self, pixels: np.ndarray, top_n: int | None = DEFAULT_TOP_N) -> Any: ...

    def finish(self, pending: Any) -> Csr: ...

    def encode_regions_csr(self, regions: list[Any], top_n: int | None = DEFAULT_TOP_N) -> Csr: ...

    def id_to_token(self, i: int) -> str: ...

    @property
    def device_busy_seconds(self) -> float | None: ...


def parse_top_n(value: str | int | None) -> int | None:
    """``all`` (or None) keeps every positive term; otherwise a positive integer."""
    if value is None or (isinstance(value, str) and value.strip().lower() == "all"):
        return None
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"--top-n must be a positive integer or 'all', got {value!r}") from None
    if n < 1:
        raise ValueError(f"--top-n must be a positive integer or 'all', got {value!r}")
    return n


Emit = Callable[[TermBatch | None, list[Failure]], None]


class EncoderMapper:
    """Runs the encoder on batches of decoded items; times itself for the per-stage summary.

    ``map(batch)`` returns what is ready: on CUDA the previous pixel batch's documents, so one
    batch is always queued on the device; ``drain()`` returns the last one.
    """

    def __init__(
        self,
        encoder: ImageTermEncoder,
        top_n: int | None,
        min_weight: float = 0.0,
    ) -> None:
        self.encoder = encoder
        self.id_to_token = encoder.id_to_token
        self.top_n = top_n
        self.min_weight = min_weight
        self.seconds = 0.0
        self.images = 0
        self._in_flight: tuple[list[Decoded], Any] | None = None

    @property
    def device_busy_seconds(self) -> float | None:
        return self.encoder.device_busy_seconds

    def map(self, batch: Sequence[Decoded]) -> tuple[list[TermBatch], list[Failure]]:
        start = time.perf_counter()
        out: list[TermBatch] = []
        failures: list[Failure] = []
        pixels = [d for d in batch if d.item.kind == "pixels"]
        regions, bad = self._usable_regions([d for d in batch if d.item.kind == "regions"])
        failures += bad
        if pixels:
            stacked = stack_pictures([d.payload for d in pixels])  # uint8 [B, S, S, 3]: one copy
            pending = self.encoder.start_pixels(stacked, top_n=self.top_n)
            self._collect(out, failures)
            self._in_flight = (pixels, pending)
        if regions:
            csr = self.encoder.encode_regions_csr([d.payload for d in regions], top_n=self.top_n)
            self._emit(regions, csr, out, failures)
        self.seconds += time.perf_counter() - start
        self.images += len(batch)
        return out, failures

    def drain(self) -> tuple[list[TermBatch], list[Failure]]:
        start = time.perf_counter()
        out: list[TermBatch] = []
        failures: list[Failure] = []
        self._collect(out, failures)
        self.seconds += time.perf_counter() - start
        return out, failures

    def _collect(self, out: list[TermBatch], failures: list[Failure]) -> None:
        if self._in_flight is not None:
            decoded, pending = self._in_flight
            self._in_flight = None
            self._emit(decoded, self.encoder.finish(pending), out, failures)

    def _emit(
        self, decoded: Sequence[Decoded], csr: Csr, out: list[TermBatch], failures: list[Failure]
    ) -> None:
        batch, empty = documents(decoded, csr, self.top_n, self.min_weight)
        failures += empty
        if batch is not None:
            out.append(batch)

    def _usable_regions(self, decoded: list[Decoded]) -> tuple[list[Decoded], list[Failure]]:
        """Region files whose feature size the model cannot take fail alone, not the whole batch."""
        dim = getattr(getattr(self.encoder, "config", None), "region_feature_dim", None)
        ok, failures = [], []
        for d in decoded:
            got = d.payload.features.shape[1]
            if dim is not None and got != dim:
                msg = f"region features have {got} dimensions, the model takes {dim}"
                failures.append(Failure(d.item.id, d.item.location, "bad_regions", msg))
            else:
                ok.append(d)
        return ok, failures


class TermsMapper:
    """Term-document input: token strings -> vocabulary ids, no model (and nothing to decode)."""

    encoder = None

    def __init__(
        self,
        token_to_id: Callable[[str], int | None],
        id_to_token: Callable[[int], str],
        top_n: int | None,
        min_weight: float = 0.0,
    ) -> None:
        self.token_to_id = token_to_id
        self.id_to_token = id_to_token  # for the export
        self.top_n = top_n
        self.min_weight = min_weight
        self.seconds = 0.0
        self.images = 0
        self.device_busy_seconds = None

    def map(self, batch: Sequence[Decoded]) -> tuple[list[TermBatch], list[Failure]]:
        start = time.perf_counter()
        ok: list[Decoded] = []
        ids: list[list[int]] = []
        weights: list[list[float]] = []
        failures: list[Failure] = []
        for d in batch:
            assert d.item.terms is not None
            try:
                row_ids, row_weights = terms_from_tokens(d.item.terms, self.token_to_id, d.item.id)
            except TermDocError as exc:
                failures.append(Failure(d.item.id, d.item.location, "unknown_token", str(exc)))
                continue
            ids.append(row_ids)
            weights.append(row_weights)
            ok.append(d)
        indptr = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum([len(r) for r in ids], out=indptr[1:])
        flat = (
            np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int32, count=int(indptr[-1])),
            np.fromiter(itertools.chain.from_iterable(weights), dtype=np.float32, count=int(indptr[-1])),
        )
        out, empty = documents(ok, (indptr, *flat), self.top_n, self.min_weight)  # ordered there
        self.seconds += time.perf_counter() - start
        self.images += len(batch)
        return ([out] if out is not None else []), failures + empty

    def drain(self) -> tuple[list[TermBatch], list[Failure]]:
        return [], []


def documents(
    decoded: Sequence[Decoded], csr: Csr, top_n: int | None, min_weight: float = 0.0
) -> tuple[TermBatch | None, list[Failure]]:
    """Attach ids and metadata to CSR rows; an image left with no positive term is a failure
    (nothing could ever match it; say so rather than index an empty document)."""
    indptr, term_ids, weights = canonical_csr(*csr, top_n, min_weight)
    counts = np.diff(indptr)
    failures = [
        Failure(d.item.id, d.item.location, "no_terms", "no term with a positive weight")
        for d, c in zip(decoded, counts, strict=True)
        if c == 0
    ]
    if failures:
        nonempty = counts > 0
        indptr = np.zeros(int(nonempty.sum()) + 1, dtype=np.int64)
        np.cumsum(counts[nonempty], out=indptr[1:])
        decoded = [d for d, keep in zip(decoded, nonempty, strict=True) if keep]
    if not decoded:
        return None, failures
    batch = TermBatch(
        ids=[d.item.id for d in decoded],
        indptr=indptr,
        term_ids=term_ids,
        weights=weights,
        metadata=[d.item.metadata for d in decoded],
    )
    return batch, failures
