"""Vectors for the words no training caption used, given after training: each takes the trained
vector of its nearest caption word, nearest in the text model the vocabulary comes from (MiniLM's
table by default; the one the word table started from, ``word_embeddings_from``, if any).

Why: training moves only the ids the captions contain toward images, and the sparsity loss pushes
every other id down, so "bike" finds nothing although the text model puts it beside "bicycle", and
"motorcycle" nothing where captions only said "motorcycles". Such a word takes the trained vector
(and bias) of its nearest caption word, when that word is near enough (cosine at least a floor):
a far word's copy would fire on another object's images. ``choose_floor`` picks the floor on
validation images, with caption words held out standing in for the unseen ones: the lowest floor
from which, bin by bin, held-out words find one of their images in the first five at least half
as often as their own trained vectors do. (Measured on the 1,161-object
scenes, copying the nearest caption word's vector kept 2 to 3 times the hits of a ridge map from
the text model's vectors to the trained table: docs/word-embeddings.md.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

FLOORS = tuple(round(0.3 + 0.1 * k, 1) for k in range(7))  # 0.3 ... 0.9: the bins' lower edges
MIN_BIN_WORDS = 8  # a bin with fewer held-out words merges upward (too few to judge)
RECOVERED = 0.5  # held-out words must keep this share of their trained vectors' hits@5
FOLDS = 5
HIT_AT = 5


def nearest_ids(
    source: torch.Tensor, ids: Sequence[int], among: Sequence[int], chunk: int = 4096
) -> tuple[np.ndarray, np.ndarray]:
    """Per id of ``ids``: its nearest id of ``among`` other than itself, by cosine in the text
    model's table ``source``, and that cosine."""
    unit = torch.nn.functional.normalize(source.float(), dim=1)
    pool = torch.as_tensor(list(among))
    cosines, nearest = [], []
    for start in range(0, len(ids), chunk):
        part = torch.as_tensor(list(ids[start : start + chunk]))
        cos = unit[part] @ unit[pool].T  # [c, A]
        cos[part[:, None] == pool[None, :]] = -1.0
        best = cos.max(dim=1)
        cosines.append(best.values)
        nearest.append(pool[best.indices])
    if not cosines:
        return np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.int64)
    return torch.cat(cosines).numpy(), torch.cat(nearest).numpy()


@dataclass
class HeldOutWords:
    """Caption words held out, each with its validation images: how often its nearest other
    caption word's vector and its own trained vector put one of them in the first five, and how
    near that word is."""

    ids: list[int] = field(default_factory=list)
    cosine: list[float] = field(default_factory=list)
    hit_copied: list[bool] = field(default_factory=list)
    hit_trained: list[bool] = field(default_factory=list)

    def bins(self) -> list[dict[str, float]]:
        """From the top down, a bin per edge of ``FLOORS`` (merged upward until ``MIN_BIN_WORDS``)."""
        cos = np.asarray(self.cosine)
        copied, trained = np.asarray(self.hit_copied), np.asarray(self.hit_trained)
        rows, upper = [], 1.0 + 1e-9
        for low in sorted(FLOORS, reverse=True):
            inside = (cos >= low) & (cos < upper)
            if inside.sum() < MIN_BIN_WORDS and low != FLOORS[0]:
                continue
            rows.append({"from": low, "to": round(min(upper, 1.0), 2), "words": int(inside.sum()),
                         "hit5_copied": float(copied[inside].mean()) if inside.any() else 0.0,
                         "hit5_trained": float(trained[inside].mean()) if inside.any() else 0.0})  # fmt: skip
            upper = low
        return rows


def choose_floor(held: HeldOutWords) -> float | None:
    """The lowest floor from which every bin keeps ``RECOVERED`` of the trained hits@5 (None:
    not even the nearest bin does, nothing is completed)."""
    floor = None
    for row in held.bins():  # from the top down
        if row["words"] == 0 or row["hit5_trained"] == 0:
            continue
        if row["hit5_copied"] < RECOVERED * row["hit5_trained"]:
            break
        floor = row["from"]
    return floor


def word_hits(
    vectors: torch.Tensor,
    bias: torch.Tensor,
    h: torch.Tensor,
    h_mask: torch.Tensor,
    relevant: list[np.ndarray],
) -> list[bool]:
    """Per word vector ``[W, H]`` over encoded images ``h [B, L, H]``: is one of its ``relevant``
    images among the first ``HIT_AT`` by its weight (``max_j e·h_j + b``, positive only)?"""
    dots = torch.einsum("wh,blh->wbl", vectors.float(), h.float())
    dots = dots.masked_fill(~h_mask.bool()[None], float("-inf")).max(dim=2).values + bias.float()[:, None]
    out = []
    for row, rel in zip(dots, relevant, strict=True):
        top = torch.topk(row, min(HIT_AT, row.numel())).indices.numpy()
        out.append(bool(np.isin(top[row[top].numpy() > 0], rel).any()))
    return out


def held_out_words(
    source: torch.Tensor,
    table: torch.Tensor,
    bias: torch.Tensor,
    seen: Sequence[int],
    h: torch.Tensor,
    h_mask: torch.Tensor,
    relevant: dict[int, np.ndarray],
    seed: int = 0,
) -> HeldOutWords:
    """``FOLDS``-fold over the caption words that name validation images: each fold's words
    copied from their nearest caption word outside the fold. ``bias``: per id, what φ adds to
    ``max_j e·h_j`` (the global bias, plus the id's own where the model has one)."""
    seen_set = set(seen)
    words = [w for w in sorted(relevant) if w in seen_set]
    order = np.random.default_rng(seed).permutation(len(words))
    held = HeldOutWords()
    for k in range(FOLDS):
        fold = [words[i] for i in order[k::FOLDS]]
        if not fold:
            continue
        cosine, nearest = nearest_ids(source, fold, sorted(seen_set - set(fold)))
        rel = [relevant[w] for w in fold]
        held.ids += fold
        held.cosine += cosine.tolist()
        held.hit_copied += word_hits(table[nearest], bias[nearest], h, h_mask, rel)
        held.hit_trained += word_hits(table[fold], bias[fold], h, h_mask, rel)
    return held


def completion(
    source: torch.Tensor, seen: Sequence[int], candidates: Sequence[int], floor: float
) -> tuple[list[int], list[int]]:
    """The ids of ``candidates`` (not seen) within ``floor`` of a caption word, and that word's id
    for each (whose trained vector and bias they take)."""
    cosine, nearest = nearest_ids(source, candidates, seen)
    keep = cosine >= floor
    return [int(c) for c in np.asarray(candidates)[keep]], [int(n) for n in nearest[keep]]
