"""VisualSparta (Lu et al., 2021), paper Eq. 1-12, as a Hugging Face ``PreTrainedModel``.

Query side: tokens embedded with E_tok only (no context, no position) -> ``ŵ`` (Eq. 1).
Image side: regions ``[v_j; l_j]`` projected with W, b (Eq. 2-5, 8), label tokens embedded with
token + position + segment embeddings (Eq. 6-7), concatenated and encoded by T_image -> H (Eq. 9).
Score: ``y_i = max_j ŵ_iᵀ H_j`` (Eq. 10), ``φ = ReLU(y + b)`` (Eq. 11),
``f = Σ_i log(φ(y_i) + 1)`` (Eq. 12). Indexing caches φ for every vocabulary id (Eq. 14).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel

from vsparta.model.config_parts import DEFAULT_TOP_N
from vsparta.model.configuration import DEFAULT_TEXT_MODEL, VisualSpartaConfig
from vsparta.model.layers import Encoder, TextEmbeddings
from vsparta.model.regions import RegionBatch
from vsparta.model.resolve import resolve_model_path
from vsparta.model.stems.base import box_locations
from vsparta.model.stems.registry import build_stem, stem_class
from vsparta.model.text_init import copy_prefix, load_bert_state, reduced_word_embeddings
from vsparta.model.tokenization import load_tokenizer, non_query_ids, query_tokenizer_for, resolve_text_model
from vsparta.model.topn import csr_to_dicts, select_top_terms, to_csr
from vsparta.termindex.scoring import saturate_tensor

try:  # transformers >= 5 tracks which tensors were initialized through its own init helpers
    from transformers import initialization as _init
except ImportError:  # pragma: no cover - transformers 4.x
    _init = nn.init  # type: ignore[assignment]

log = logging.getLogger(__name__)


def masked_max(scores: torch.Tensor, mask: torch.Tensor, dim: int) -> torch.Tensor:
    """Max over ``dim`` ignoring masked-out positions (a fully masked row gives a very low value)."""
    return scores.masked_fill(~mask, torch.finfo(scores.dtype).min).amax(dim=dim)


class ImageEncoder(nn.Module):
    """Regions (+ labels) -> contextualized H (Eq. 2-9). Shared by VisualSparta and the dense baseline."""

    def __init__(self, config: VisualSpartaConfig, cls_token: bool = False) -> None:
        super().__init__()
        self.config = config
        self.embeddings = TextEmbeddings(config)
        self.stem = build_stem(config)  # None: precomputed regions only (stem 'none')
        widen = 2 if config.region_norm == "both" else 1  # the features beside their normalised copy
        self.region_proj = nn.Linear(
            widen * config.region_feature_dim + config.location_dim, config.hidden_size
        )  # W, b
        self.region_dropout = nn.Dropout(config.hidden_dropout_prob)
        self.cls = nn.Parameter(torch.zeros(1, 1, config.hidden_size)) if cls_token else None
        self.encoder = Encoder(config)

    def forward(
        self, pixel_values: torch.Tensor | None = None, regions: RegionBatch | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Returns H ``[B, L, H]`` and its mask ``[B, L]`` (True = a real region or label token)."""
        if (pixel_values is None) == (regions is None):
            raise ValueError("give exactly one of pixel_values or regions")
        if pixel_values is not None:
            if self.stem is None:
                raise ValueError("this model has stem='none': it only accepts precomputed regions")
            feats, boxes = self.stem(pixel_values)  # [B, n, d], [n, 4]
            locs = (
                box_locations(boxes).unsqueeze(0).expand(feats.shape[0], -1, -1).to(feats.dtype)
            )  # [B, n, 6]
            region_mask = torch.ones(feats.shape[:2], dtype=torch.bool, device=feats.device)  # [B, n]
            feats = self._normalized(feats, region_mask)
            parts = [
                self.region_dropout(self.region_proj(torch.cat([feats, locs], dim=-1)))
            ]  # Eq. 8, [B, n, H]
            masks = [region_mask]
        else:
            assert regions is not None
            e_image = torch.cat(
                [self._normalized(regions.features, regions.region_mask), regions.locations], dim=-1
            )  # E_image, Eq. 4-5: [B, n, d+6]
            parts = [self.region_dropout(self.region_proj(e_image))]  # [B, n, H]
            masks = [regions.region_mask]
            if regions.label_mask.any():
                parts.append(
                    self.embeddings(regions.label_ids, token_type=self.config.label_segment_id)
                )  # [B, k, H]
                masks.append(regions.label_mask)
        if self.cls is not None:
            b = parts[0].shape[0]
            parts.insert(0, self.cls.expand(b, -1, -1))
            masks.insert(0, torch.ones(b, 1, dtype=torch.bool, device=masks[0].device))
        a = torch.cat(parts, dim=1)  # Eq. 8: [B, L, H]
        mask = torch.cat(masks, dim=1)  # [B, L]
        return self.encoder(a, mask), mask  # Eq. 9

    def _normalized(self, feats: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``region_norm``: each channel centred (and scaled) over the image's real regions ``[B, n, d]``
        (``both``: ``[B, n, 2d]``, the features as given beside that copy)."""
        if self.config.region_norm == "none":
            return feats
        weights = mask.unsqueeze(-1).to(feats.dtype)  # [B, n, 1]
        count = weights.sum(dim=1, keepdim=True).clamp(min=1.0)  # [B, 1, 1]
        centred = (feats - (feats * weights).sum(dim=1, keepdim=True) / count) * weights  # [B, n, d]
        if self.config.region_norm == "center":
            return centred
        scaled = centred * torch.rsqrt((centred**2).sum(dim=1, keepdim=True) / count + 1e-5)
        return torch.cat([feats, scaled], dim=-1) if self.config.region_norm == "both" else scaled


class VisualSpartaPreTrainedModel(PreTrainedModel):
    """Shared init, tokenizer handling and text-model initialization for both model kinds."""

    config_class = VisualSpartaConfig
    base_model_prefix = "visualsparta"
    main_input_name = "pixel_values"

    def __init__(self, config: VisualSpartaConfig) -> None:
        super().__init__(config)
        self.tokenizer: Any = None  # a fast HF tokenizer; saved next to the weights
        self._non_query_ids: torch.Tensor | None = None

    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)
        if isinstance(module, nn.Conv2d):
            _init.kaiming_normal_(module.weight, nonlinearity="relu")
        if isinstance(module, VisualSpartaModel):
            _init.constant_(module.phi_bias, float(self.config.phi_bias_init))
            if module.term_bias is not None:
                _init.zeros_(module.term_bias)
            # Near-zero E_tok rows: a token never seen in training keeps ŵ ≈ 0, so its φ ≈ ReLU(b) for
            # every image and it never outranks a term the model learned for that image (this keeps
            # the top-n cut meaningful for models trained from scratch); b > 0 keeps the ReLU open at
            # the start so gradients flow. A text-model init overwrites these rows anyway.
            std = self.config.word_init_std
            _init.normal_(module.word_embeddings.weight, mean=0.0, std=std)
        if isinstance(module, ImageEncoder) and module.cls is not None:
            _init.normal_(module.cls, mean=0.0, std=self.config.initializer_range)

    # ---- tokenizer -------------------------------------------------------------------------
    def set_tokenizer(self, tokenizer: Any) -> None:
        if len(tokenizer) > self.config.vocab_size:
            raise ValueError(
                f"tokenizer has {len(tokenizer)} tokens, the model only {self.config.vocab_size}"
            )
        self.tokenizer = tokenizer
        self._non_query_ids = None

    def query_tokenizer(self) -> Any:
        """The torch-free tokenizer the service uses (``vsparta.model.query_tokenizer.QueryTokenizer``)."""
        if self.tokenizer is None:
            raise ValueError("this model has no tokenizer attached (set_tokenizer)")
        return query_tokenizer_for(self.tokenizer, self.config.max_query_tokens)

    def non_query_ids(self) -> torch.Tensor:
        if self._non_query_ids is None:
            ids = non_query_ids(self.tokenizer) if self.tokenizer is not None else []
            self._non_query_ids = torch.tensor(
                [i for i in ids if i < self.config.vocab_size], dtype=torch.long
            )
        return self._non_query_ids

    def save_pretrained(self, save_directory: str | Path, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        """Weights + config + the tokenizer (``tokenizer.json``): everything to index and to query."""
        super().save_pretrained(save_directory, *args, **kwargs)
        if self.tokenizer is not None:
            self.tokenizer.save_pretrained(str(save_directory))

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path: str | Path, *args: Any, **kwargs: Any):  # type: ignore[override]
        model = super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)
        folder = Path(pretrained_model_name_or_path)
        if (folder / "tokenizer.json").exists():
            model.set_tokenizer(load_tokenizer(folder))
        else:
            log.warning("%s has no tokenizer.json: queries cannot be tokenized with this checkpoint", folder)
        return model

    # ---- initialization from a text model ----------------------------------------------------
    def _text_targets(self) -> list[tuple[TextEmbeddings, nn.Module]]:
        """(embeddings, encoder) pairs that a BERT-family checkpoint initializes."""
        raise NotImplementedError

    def freeze_word_embeddings(self) -> int:
        """Stop training every word-embedding table (query and label tokens); returns how many."""
        tables = [m.word_embeddings for m in self.modules() if isinstance(m, TextEmbeddings)]
        for table in tables:
            table.weight.requires_grad_(False)
        return len(tables)

    def init_word_embeddings(self, path_or_hub_id: str) -> int:
        """Every word-embedding table from a text model's, reduced to ``hidden_size`` by PCA
        (``config.word_embeddings_from``); returns how many tables."""
        location = resolve_model_path(resolve_text_model(path_or_hub_id), option="word_embeddings_from")
        table = reduced_word_embeddings(location, self.config.vocab_size, self.config.hidden_size)
        targets = [embeddings.word_embeddings for embeddings, _ in self._text_targets()]
        with torch.no_grad():
            for target in targets:
                target.weight.copy_(table.to(target.weight.dtype))
        log.info("word embeddings from %s (PCA to %d dimensions)", path_or_hub_id, self.config.hidden_size)
        return len(targets)

    def init_from_text_model(self, path_or_hub_id: str | Path | None = DEFAULT_TEXT_MODEL) -> int:
        """Copy word/position/segment embeddings and the first L encoder layers of a BERT-family model.

        Also attaches its tokenizer. Returns how many tensors were copied.
        """
        location = resolve_text_model(path_or_hub_id)
        state = load_bert_state(location)
        copied = 0
        for embeddings, encoder in self._text_targets():
            copied += copy_prefix(state, "embeddings.", embeddings)
            n_src = 1 + max(
                (int(k.split(".")[2]) for k in state if k.startswith("encoder.layer.")), default=-1
            )
            if n_src < len(encoder.layer):  # type: ignore[arg-type]
                raise ValueError(f"{location} has {n_src} layers; the config asks for {len(encoder.layer)}")  # type: ignore[arg-type]
            copied += copy_prefix(state, "encoder.", encoder)
        self.set_tokenizer(load_tokenizer(location))
        self.config.text_model = str(path_or_hub_id or DEFAULT_TEXT_MODEL)
        log.info("initialized %d tensors from %s", copied, location)
        return copied


class VisualSpartaModel(VisualSpartaPreTrainedModel):
    """Images -> contextual H; queries -> independent token embeddings; fragment-level scoring."""

    def __init__(self, config: VisualSpartaConfig) -> None:
        super().__init__(config)
        self.image = ImageEncoder(config)
        self.phi_bias = nn.Parameter(torch.tensor(float(config.phi_bias_init)))  # b of Eq. 11 (scalar)
        # Optional per-term bias b_v added to b: lets the sparsity regularizer switch a term off for
        # every image at once (config.phi_term_bias; not in the paper).
        self.term_bias = nn.Parameter(torch.zeros(config.vocab_size)) if config.phi_term_bias else None
        self.post_init()

    def _text_targets(self) -> list[tuple[TextEmbeddings, nn.Module]]:
        return [(self.image.embeddings, self.image.encoder)]

    @property
    def word_embeddings(self) -> nn.Embedding:
        """E_tok: shared by the query (Eq. 1) and the label tokens (Eq. 6)."""
        return self.image.embeddings.word_embeddings

    def encode_images(
        self, pixel_values: torch.Tensor | None = None, regions: RegionBatch | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """H ``[B, L, H]`` and mask ``[B, L]`` from pixels ``[B, 3, S, S]`` or a ``RegionBatch``."""
        return self.image(pixel_values=pixel_values, regions=regions)

    def query_embeddings(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Eq. 1: ``ŵ_i = E_tok(w_i)``; ``[Bq, m]`` -> ``[Bq, m, H]``. No position, no context."""
        return self.word_embeddings(input_ids)

    def fragment_scores(self, query_emb: torch.Tensor, h: torch.Tensor, h_mask: torch.Tensor) -> torch.Tensor:
        """Eq. 10: ``y[q, i, b] = max_j ŵ_{q,i}ᵀ H_{b,j}`` over valid j; -> ``[Bq, m, Bi]`` (float32)."""
        with torch.autocast(device_type=h.device.type, enabled=False):
            dots = torch.einsum("qmh,bnh->qmbn", query_emb.float(), h.float())  # [Bq, m, Bi, L]
            return masked_max(dots, h_mask[None, None], dim=-1)  # [Bq, m, Bi]

    def phi(self, y: torch.Tensor, term_bias: torch.Tensor | None = None) -> torch.Tensor:
        """Eq. 11: ``φ(y) = ReLU(y + b)``, plus ``term_bias`` (b_v, broadcast to ``y``) if there is one."""
        b = self.phi_bias.float()
        if term_bias is not None:
            b = b + term_bias.float()
        return torch.relu(y + b)

    def score(
        self, query_ids: torch.Tensor, query_mask: torch.Tensor, h: torch.Tensor, h_mask: torch.Tensor
    ) -> torch.Tensor:
        """Eq. 12 for every (query, image) pair: ``[Bq, m]`` x ``[Bi, L, H]`` -> ``[Bq, Bi]``.

        Each query position counts, so a repeated token counts once per occurrence.
        """
        y = self.fragment_scores(self.query_embeddings(query_ids), h, h_mask)  # [Bq, m, Bi]
        tb = None if self.term_bias is None else self.term_bias[query_ids][:, :, None]  # [Bq, m, 1]
        terms = saturate_tensor(self.phi(y, tb)) * query_mask[:, :, None].float()  # [Bq, m, Bi]
        return terms.sum(dim=1)  # [Bq, Bi]

    def forward(
        self,
        query_ids: torch.Tensor,
        query_mask: torch.Tensor,
        pixel_values: torch.Tensor | None = None,
        regions: RegionBatch | None = None,
    ) -> torch.Tensor:
        """In-batch score matrix ``[Bq, Bi]`` (training)."""
        h, h_mask = self.encode_images(pixel_values=pixel_values, regions=regions)
        return self.score(query_ids, query_mask, h, h_mask)

    def vocab_phi(
        self, h: torch.Tensor, h_mask: torch.Tensor, chunk_size: int = 8192, ids: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Eq. 14 with gradients: ``φ`` of every vocabulary id (or of ``ids``), ``[B, V]`` float32 (the
        sparsity regularizer needs the ids no caption contains); chunked: each ``[B, L, chunk]`` stays small.

        Always float32, also inside an enclosing autocast: ``b`` cancels most of ``y``, so the bf16
        rounding of ``y`` would flip the sign of small weights and reorder the top-n.
        """
        with torch.autocast(device_type=h.device.type, enabled=False):
            h32 = h.float()
            emb = self.word_embeddings.weight  # [V, H]
            bias = self.term_bias
            if ids is not None:
                emb = emb[ids]
                bias = None if bias is None else bias[ids]
            emb = emb.float()
            mask = h_mask[:, :, None]  # [B, L, 1]
            parts = []
            for start in range(0, emb.shape[0], chunk_size):
                e = emb[start : start + chunk_size]  # [c, H]
                y = masked_max(torch.einsum("blh,ch->blc", h32, e), mask, dim=1)  # [B, c]
                tb = None if bias is None else bias[start : start + e.shape[0]]
                parts.append(self.phi(y, tb))
            return torch.cat(parts, dim=1)

    @torch.no_grad()
    def image_term_weights(
        self, pixel_values: torch.Tensor | None = None, regions: RegionBatch | None = None
    ) -> torch.Tensor:
        """φ ``[B, V]`` of a batch of images as an index holds them: pixels ``[B, 3, S, S]`` at
        ``image_size`` are read at each of the config's ``index_scales`` (resized here, bicubic
        with antialiasing) and their φ averaged; regions, or no scales, once as they are."""
        scales = list(self.config.index_scales or ()) if pixel_values is not None else []
        if not scales:
            return self.term_weights(*self.encode_images(pixel_values=pixel_values, regions=regions))
        total = None
        for size in scales:
            x = pixel_values
            if size != x.shape[-1]:
                x = F.interpolate(x.float(), (size, size), mode="bicubic", antialias=True)
            phi = self.term_weights(*self.encode_images(pixel_values=x))
            total = phi if total is None else total + phi
        return total / len(scales)

    @torch.no_grad()
    def term_weights(self, h: torch.Tensor, h_mask: torch.Tensor, chunk_size: int = 8192) -> torch.Tensor:
        """Eq. 14 for indexing and evaluation: ``vocab_phi`` without gradients, float32 whatever the
        caller's autocast (the indexer runs the image encoder under bf16 autocast on GPU)."""
        return self.vocab_phi(h, h_mask, chunk_size)

    def top_terms(self, phi: torch.Tensor, n: int | None = DEFAULT_TOP_N) -> list[dict[int, float]]:
        """Per image ``{vocab id: φ}``: the ``n`` largest (None = all), values <= 0 dropped.

        Ids no query can contain ([CLS], [unused..]) are left out: they would only waste slots.
        The cut itself is ``vsparta.model.topn.select_top_terms``, shared with evaluation and indexing.
        """
        return csr_to_dicts(*to_csr(*select_top_terms(phi, n, self.non_query_ids())))


def build_model(config: VisualSpartaConfig, init: str | None = None, model_class: type | None = None) -> Any:
    """A fresh model: the stem's pretrained weights (``VisionStem.prepare``), text-model init
    (``init``) and a tokenizer."""
    prepared = stem_class(config.stem).prepare(config)
    cls = model_class or VisualSpartaModel
    model = cls(config)
    if prepared is not None:
        model.image.stem.load_pretrained(prepared)
    if init and init.lower() != "none":
        model.init_from_text_model(init)
    else:
        model.set_tokenizer(load_tokenizer(config.text_model))
    if config.word_embeddings_from:
        model.init_word_embeddings(config.word_embeddings_from)
    return model
