"""A weight that means "the image shows this word": the presence penalty (not in the paper).

The ranking loss (Eq. 13) only orders a batch's images for each caption, so it never asks the
weight of "mouse" on a picture of a bird to be small, only smaller than on the mouse in the same
batch. Search that says "no image has *mouse*" (``service/matching.py``) needs more: a weight that
is near zero where the image lacks the word. So, beside the ranking loss, each image's ``φ`` of
every word the batch's captions use but none of *its own* captions does is pushed towards zero
(the words an image's captions use are its positives; its captions name all of its objects), and
the weights of the words they do use are held up to a margin.

Its weight is the config field ``presence_weight`` (0: the paper's recipe, no penalty), the margin
``presence_margin``.
"""

from __future__ import annotations

from typing import Any

import torch


def presence_labels(
    query_ids: torch.Tensor, query_mask: torch.Tensor, targets: torch.Tensor, images: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The batch's distinct caption token ids ``[U]`` and, per image, whether one of its own
    captions uses each ``[B, U]`` (bool)."""
    vocab = torch.unique(query_ids[query_mask])
    position = torch.searchsorted(vocab, query_ids)
    used = torch.zeros(query_ids.shape[0], vocab.shape[0], dtype=torch.float32, device=query_ids.device)
    used.scatter_add_(1, position.clamp(max=vocab.shape[0] - 1), query_mask.float())  # pads add 0
    per_image = torch.zeros(images, vocab.shape[0], dtype=torch.float32, device=query_ids.device)
    per_image.index_add_(0, targets, used)
    return vocab, per_image > 0


def presence_penalty(model: Any, h: torch.Tensor, h_mask: torch.Tensor, batch: Any) -> torch.Tensor:
    """Over the batch's caption words: the mean ``φ`` on images none of whose captions use the word,
    plus the mean shortfall below the config's ``presence_margin`` on images whose captions do
    (without this side, a heavy penalty sets every weight to zero: docs/no-match.md)."""
    vocab, present = presence_labels(batch.query_ids, batch.query_mask, batch.targets, h.shape[0])
    absent = ~present
    phi = model.vocab_phi(h, h_mask, ids=vocab)  # [B, U]
    too_high = (phi * absent).sum() / absent.sum().clamp(min=1)
    margin = float(model.config.presence_margin)
    if not margin:
        return too_high
    too_low = (torch.relu(margin - phi) * present).sum() / present.sum().clamp(min=1)
    return too_high + too_low
