"""Mapper stage: decoded batches -> weighted-term documents (the only stage on the device).

The encoder scores every vocabulary term for each image and keeps the top-n (paper section 3.3,
docs/architecture.md section 2); here we only batch, call it, drop non-positive weights and attach ids and
metadata. Term-document input skips the model: tokens are mapped back to vocabulary ids.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from indexer.decoder import Decoded
from indexer.items import Failure, WorkItem
from indexer.termdocs import TermDocError, terms_from_tokens
from termindex import TermDocument


class Encoder(Protocol):
    """What the indexer needs from ``model.encode.TermEncoder``."""

    def encode_pixels(self, batch: np.ndarray, top_n: int | None = 1000) -> list[dict[int, float]]: ...

    def encode_regions(self, regions: list[Any], top_n: int | None = 1000) -> list[dict[int, float]]: ...

    def id_to_token(self, i: int) -> str: ...


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


def clean_terms(terms: Mapping[int, float], top_n: int | None) -> dict[int, float]:
    """Positive finite weights only, at most ``top_n`` of them (heaviest; ties by id)."""
    kept = [(int(i), float(w)) for i, w in terms.items() if math.isfinite(w) and w > 0]
    kept.sort(key=lambda kv: (-kv[1], kv[0]))
    if top_n is not None:
        kept = kept[:top_n]
    return dict(kept)


class EncoderMapper:
    """Runs the encoder on a batch of decoded items; times itself for the per-stage summary."""

    def __init__(self, encoder: Encoder, top_n: int | None) -> None:
        self.encoder = encoder
        self.top_n = top_n
        self.seconds = 0.0
        self.images = 0

    def map(self, batch: Sequence[Decoded]) -> tuple[list[TermDocument], list[Failure]]:
        start = time.perf_counter()
        pixels = [d for d in batch if d.item.kind == "pixels"]
        regions, failures = self._usable_regions([d for d in batch if d.item.kind == "regions"])
        results: dict[str, dict[int, float]] = {}
        if pixels:
            stacked = np.stack([d.payload for d in pixels])
            for d, terms in zip(pixels, self.encoder.encode_pixels(stacked, top_n=self.top_n), strict=True):
                results[d.item.id] = terms
        if regions:
            encoded = self.encoder.encode_regions([d.payload for d in regions], top_n=self.top_n)
            for d, terms in zip(regions, encoded, strict=True):
                results[d.item.id] = terms
        self.seconds += time.perf_counter() - start
        self.images += len(batch)
        docs, empty = _documents([d.item for d in batch if d.item.id in results], results, self.top_n)
        return docs, failures + empty

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
    """Term-document input: token strings -> vocabulary ids, no model."""

    def __init__(self, token_to_id: Callable[[str], int | None], top_n: int | None) -> None:
        self.token_to_id = token_to_id
        self.top_n = top_n
        self.seconds = 0.0
        self.images = 0

    def map(self, batch: Sequence[Decoded]) -> tuple[list[TermDocument], list[Failure]]:
        start = time.perf_counter()
        results: dict[str, dict[int, float]] = {}
        failures: list[Failure] = []
        for d in batch:
            assert d.item.terms is not None
            try:
                results[d.item.id] = terms_from_tokens(d.item.terms, self.token_to_id, d.item.id)
            except TermDocError as exc:
                failures.append(Failure(d.item.id, d.item.location, "unknown_token", str(exc)))
        self.seconds += time.perf_counter() - start
        self.images += len(batch)
        ok = [d.item for d in batch if d.item.id in results]
        docs, empty = _documents(ok, results, self.top_n)
        return docs, failures + empty


def _documents(
    items: Sequence[WorkItem], results: Mapping[str, Mapping[int, float]], top_n: int | None
) -> tuple[list[TermDocument], list[Failure]]:
    docs: list[TermDocument] = []
    failures: list[Failure] = []
    for item in items:
        terms = clean_terms(results[item.id], top_n)
        if not terms:  # nothing could ever match it; say so rather than index an empty doc
            failures.append(Failure(item.id, item.location, "no_terms", "no term with a positive weight"))
            continue
        docs.append(TermDocument(id=item.id, terms=terms, metadata=item.metadata))
    return docs, failures
