"""Top-n selection of an image's term weights: the one place that decides which terms an index keeps.

Evaluation, ``VisualSpartaModel.top_terms`` and the indexer's encoder all cut φ here, so the
index a user builds holds exactly the terms the evaluation measured. The cut runs where φ lives
(on the GPU when there is one) and hands back fixed-shape tensors, so a batch crosses to the
host in one copy instead of one Python object per term.
"""

from __future__ import annotations

import numpy as np
import torch

from vsparta.model.config_parts import DEFAULT_TOP_N


def drop_mask(drop_ids: torch.Tensor, vocab_size: int, device: torch.device | str) -> torch.Tensor:
    """``[V]`` bool, True at ``drop_ids``: made once per model and device, so that each batch's cut
    is elementwise and queues on the GPU without waiting for it (``select_top_terms``)."""
    mask = torch.zeros(vocab_size, dtype=torch.bool)
    mask[drop_ids.cpu().long()] = True
    return mask.to(device)


def select_top_terms(
    phi: torch.Tensor, n: int | None = DEFAULT_TOP_N, drop_ids: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each image's ``n`` heaviest positive terms (None = every positive term).

    ``phi``: ``[B, V]``. Returns ``ids [B, k]`` int32, ``weights [B, k]`` float32 (heaviest first,
    zero after the last positive one) and ``counts [B]`` int32 (positive terms kept per image).
    ``drop_ids`` are vocabulary ids no query can contain (or their ``drop_mask``, the indexer's
    form): they never take a slot.
    """
    if n is not None and n <= 0:
        raise ValueError(f"n must be positive or None (all), got {n}")
    phi = phi.float()
    if drop_ids is not None and drop_ids.numel():
        if drop_ids.dtype != torch.bool:
            drop_ids = drop_mask(drop_ids, phi.shape[1], phi.device)
        phi = torch.where(drop_ids.to(phi.device), 0.0, phi)
    if n is None or n >= phi.shape[1]:
        values, ids = phi.sort(dim=1, descending=True, stable=True)
    else:
        values, ids = phi.topk(n, dim=1)
    positive = values > 0.0
    values = torch.where(positive, values, torch.zeros_like(values))
    counts = positive.sum(dim=1, dtype=torch.int32)
    return ids.to(torch.int32), values, counts


def to_csr(
    ids: torch.Tensor, weights: torch.Tensor, counts: torch.Tensor
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``select_top_terms`` output as host CSR arrays ``(indptr int64, term_ids int32, weights float32)``.

    Image i's terms are ``term_ids[indptr[i]:indptr[i+1]]``, heaviest first. The kept slots are
    gathered where the tensors live and cross to the host in one copy (counts, ids and weight
    bits packed as one int32 tensor): a sparse model fills ~30 of 1,000 slots, so this moves ~30x
    fewer bytes than copying the fixed-shape tensors. (Selecting by mask waits for the device
    to know the sizes, as the copy would.)
    """
    n, k = ids.shape
    keep = torch.arange(k, device=ids.device)[None, :] < counts[:, None]
    packed = torch.cat(
        [counts.to(torch.int32), ids[keep].to(torch.int32), weights[keep].float().view(torch.int32)]
    )
    host = packed.cpu().numpy()
    counts_h = host[:n]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts_h, out=indptr[1:])
    total = int(indptr[-1])
    return indptr, host[n : n + total], host[n + total : n + 2 * total].view(np.float32)


def csr_to_dicts(indptr: np.ndarray, term_ids: np.ndarray, weights: np.ndarray) -> list[dict[int, float]]:
    """Per-image ``{vocab id: weight}`` for callers that want Python mappings (tests, small jobs)."""
    return [
        dict(zip(term_ids[a:b].tolist(), weights[a:b].tolist(), strict=True))
        for a, b in zip(indptr[:-1], indptr[1:], strict=True)
    ]
