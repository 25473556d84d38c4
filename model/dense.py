"""Dense dual-encoder baseline (LightningDOT / CLIP style), trained and evaluated like VisualSparta.

Text: [CLS] of a transformer over the query (token + position + segment embeddings). Image: a
learned [CLS] slot prepended to the same image input VisualSparta sees (regions or stem patches,
plus labels), through the same kind of transformer. ``pooling="mean"`` averages every output
token instead of taking [CLS]: all-MiniLM-L6-v2 was trained with mean pooling, and with its
weights on both towers the image [CLS] vectors came out alike for every image (mean cosine 0.996
between different images after 3 epochs; in-batch loss stuck at ln(batch), chance recall;
docs/quality-objects-full/quality.md). Score: LightningDOT's plain dot product of
the two [CLS] vectors (default; it did better on the generated benchmark), or CLIP's cosine
similarity times a learned temperature (``similarity="cosine"``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Literal, get_args

import torch
import torch.nn.functional as F
from torch import nn

from vsparta.model.configuration import VisualSpartaConfig
from vsparta.model.layers import Encoder, TextEmbeddings
from vsparta.model.modeling import ImageEncoder, VisualSpartaModel, VisualSpartaPreTrainedModel
from vsparta.model.regions import RegionBatch

Similarity = Literal["cosine", "dot"]
Pooling = Literal["cls", "mean"]


class DenseConfig(VisualSpartaConfig):
    model_type = "visualsparta_dense"

    def __init__(
        self, cls_token_id: int = 101, similarity: Similarity = "dot", pooling: Pooling = "cls", **kwargs: Any
    ) -> None:
        if similarity not in get_args(Similarity):
            raise ValueError(f"similarity must be one of {get_args(Similarity)}, got {similarity!r}")
        if pooling not in get_args(Pooling):
            raise ValueError(f"pooling must be one of {get_args(Pooling)}, got {pooling!r}")
        self.cls_token_id = cls_token_id
        self.similarity = similarity
        self.pooling = pooling
        super().__init__(**kwargs)


class DenseDualEncoder(VisualSpartaPreTrainedModel):
    config_class = DenseConfig

    def __init__(self, config: DenseConfig) -> None:
        super().__init__(config)
        self.text_embeddings = TextEmbeddings(config)
        self.text_encoder = Encoder(config)
        self.image = ImageEncoder(config, cls_token=True)
        self.logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))  # CLIP's init; used for cosine
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)
        if module is self:
            with torch.no_grad():
                self.logit_scale.fill_(math.log(1 / 0.07))

    def _text_targets(self) -> list[tuple[TextEmbeddings, nn.Module]]:
        return [(self.text_embeddings, self.text_encoder), (self.image.embeddings, self.image.encoder)]

    def _pool(self, h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``[B, L, H]`` -> ``[B, H]``: the [CLS] slot, or the mean of the real tokens."""
        if self.config.pooling == "cls":
            return h[:, 0]
        weights = mask.to(h.dtype).unsqueeze(-1)
        return (h * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)

    def encode_text(self, query_ids: torch.Tensor, query_mask: torch.Tensor) -> torch.Tensor:
        """``[Bq, m]`` -> ``[Bq, H]``: the pooled output of the text transformer (unit length for cosine,
        times the temperature, so that a plain dot product with image vectors is the score)."""
        cls = torch.full_like(query_ids[:, :1], self.config.cls_token_id)
        ids = torch.cat([cls, query_ids], dim=1)  # [Bq, 1+m]
        mask = torch.cat([torch.ones_like(query_mask[:, :1]), query_mask], dim=1)
        q = self._pool(self.text_encoder(self.text_embeddings(ids), mask), mask)
        if self.config.similarity == "cosine":
            q = F.normalize(q.float(), dim=-1) * self.logit_scale.clamp(max=math.log(100)).exp()
        return q

    def encode_image_vectors(
        self, pixel_values: torch.Tensor | None = None, regions: RegionBatch | None = None
    ) -> torch.Tensor:
        """``[Bi, H]``: the pooled output of the image transformer (unit length for cosine)."""
        h, mask = self.image(pixel_values=pixel_values, regions=regions)
        v = self._pool(h, mask)
        return F.normalize(v.float(), dim=-1) if self.config.similarity == "cosine" else v

    def forward(
        self,
        query_ids: torch.Tensor,
        query_mask: torch.Tensor,
        pixel_values: torch.Tensor | None = None,
        regions: RegionBatch | None = None,
    ) -> torch.Tensor:
        """In-batch score matrix ``[Bq, Bi]`` = text vectors · image vectors."""
        q = self.encode_text(query_ids, query_mask).float()
        v = self.encode_image_vectors(pixel_values=pixel_values, regions=regions).float()
        return q @ v.T


MODEL_CLASSES: dict[str, tuple[type[VisualSpartaConfig], type[VisualSpartaPreTrainedModel]]] = {
    "visualsparta": (VisualSpartaConfig, VisualSpartaModel),
    "dense": (DenseConfig, DenseDualEncoder),
}


def load_model(path: str | Path) -> VisualSpartaPreTrainedModel:
    """Open a saved checkpoint of either kind (picked by ``model_type`` in its config.json)."""
    config_file = Path(path) / "config.json"
    if not config_file.exists():
        raise FileNotFoundError(f"{path} is not a saved model folder (no config.json)")
    model_type = json.loads(config_file.read_text(encoding="utf-8")).get("model_type")
    for config_cls, model_cls in MODEL_CLASSES.values():
        if config_cls.model_type == model_type:
            return model_cls.from_pretrained(str(path))
    raise ValueError(f"{path}: unknown model_type {model_type!r}")
