"""Configuration of VisualSparta (and of the dense baseline, which shares the image side).

The fields, their types and defaults live in ``model/config_parts.py`` in three parts; this is the
Hugging Face ``PretrainedConfig`` over them (saving, loading, presets, validation).

Text/transformer dimensions follow BERT's names so that a BERT-family checkpoint (default
``sentence-transformers/all-MiniLM-L6-v2``) can initialize the token embeddings and the image
transformer. ``stem`` picks how raw pixels become regions (docs/architecture.md section 2).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from transformers import PretrainedConfig

from vsparta.model.config_parts import (
    LOCATION_DIM,
    REGION_NORMS,
    SCALE_REGIONS,
    SPARSITY_LOSSES,
    ArchitectureConfig,
    IndexingConfig,
    TrainingConfig,
    defaults,
    part_of,
)
from vsparta.model.stems.registry import stem_class

ACTIVATIONS = ("gelu", "relu", "gelu_new")
DEFAULT_TEXT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"

# Learned sparsity of the CPU-sized preset (docs/quality.experiments.md): FLOPS over a 4,096-id sample
# of the vocabulary for 8 images per step; a training step costs ~1.2x the paper recipe's on CPU.
# Weight 3e-4: on the demo (2,000 scenes, 10 epochs) 26 terms/img and R@1/5/10 13.8/54.5/69.7,
# against 72 terms and 14.3/55.1/69.4 unregularized; 3e-3 over-prunes there (8 terms, R@1 10.9).
_SPARSE_TINY: dict[str, Any] = {
    "sparsity_loss": "flops",
    "sparsity_weight": 3e-4,
    "sparsity_images": 8,
    "sparsity_vocab": 4096,
}

# The tiny transformer over a frozen, cached EfficientNet-Lite0 (ImageNet) at 224 px; the presets
# "lite0", "lite0-320" and "lite0-128" differ only in the picture's size and the grid.
_LITE0: dict[str, Any] = {
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 128,
    "stem": "efficientnet_lite0",
    "image_size": 224,
    "grid_size": 7,
    **_SPARSE_TINY,
    "sparsity_weight": 5e-4,
}

# Named presets for `vsparta train --config`. "base" matches MiniLM-L6 so it can be initialized from it.
PRESETS: dict[str, dict[str, Any]] = {
    "tiny": {
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 128,
        "image_size": 64,
        "grid_size": 8,
        "stem_channels": [32, 64],
        "region_feature_dim": 64,
        **_SPARSE_TINY,
    },
    "small": {
        "hidden_size": 128,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "intermediate_size": 512,
        "image_size": 96,
        "grid_size": 8,
        "stem_channels": [32, 64, 128],
        "region_feature_dim": 128,
    },
    # the tiny transformer on EfficientNet-Lite0's ImageNet features (frozen, cached) at 224 px, the
    # size its weights were trained at (docs/quality.md)
    "lite0": _LITE0,
    # the same with the picture enlarged to 320 px: a 10 x 10 map, finer cells for small objects; the
    # best CPU-sized recipe on the object scenes (docs/quality-objects-1161/lite0-320: test R@1 56.0
    # against 50.3 at 224 px, shift 37.0 against 30.4) for twice the stem's work per picture
    "lite0-320": {**_LITE0, "image_size": 320, "grid_size": 10},
    # the same with the word table started from MiniLM's (reduced to 64 wide, trained at
    # --pretrained-lr 2e-3): test R@1 56.4; then `vsparta complete-words` gives the words no caption
    # used a near caption word's vector (docs/word-embeddings.md)
    "lite0-320-words": {
        **_LITE0,
        "image_size": 320,
        "grid_size": 10,
        "word_embeddings_from": DEFAULT_TEXT_MODEL,
    },
    # the same with the transformer 128 wide (4 heads): the best single reading on every pool
    # (docs/transformer-width.md: test R@1 60.5 against 56.4, shift 39.2 against 36.5, 76 terms
    # per image against 113) for ~1.45x the transformer's time per epoch
    "lite0-320-words-wide": {
        **_LITE0,
        "hidden_size": 128,
        "num_attention_heads": 4,
        "intermediate_size": 256,
        "image_size": 320,
        "grid_size": 10,
        "word_embeddings_from": DEFAULT_TEXT_MODEL,
    },
    # the same at 128 px: a third of the stem's work per picture, the demo's (fits its 5 minutes)
    "lite0-128": {**_LITE0, "image_size": 128, "grid_size": 4},
    "base": {
        "hidden_size": 384,
        "num_hidden_layers": 6,
        "num_attention_heads": 12,
        "intermediate_size": 1536,
        "image_size": 224,
        "grid_size": 14,
        "stem_channels": [64, 128, 256],
        "region_feature_dim": 256,
    },
}


class VisualSpartaConfig(PretrainedConfig):
    """All sizes and choices of a VisualSparta model; saved as ``config.json`` with each checkpoint.

    The fields and their defaults are the three parts of ``model/config_parts.py`` (architecture,
    training, indexing), flat on this object and in the file; ``architecture``, ``training`` and
    ``indexing`` read one part back. Keyword arguments this class does not know go to
    ``PretrainedConfig`` (as Hugging Face's own keys in a saved file do).
    """

    model_type = "visualsparta"

    def __init__(self, **kwargs: Any) -> None:
        values = {name: kwargs.pop(name, default) for name, default in defaults().items()}
        super().__init__(pad_token_id=values.pop("pad_token_id"), **kwargs)
        for name, value in values.items():
            setattr(self, name, list(value) if isinstance(value, tuple) else value)
        self.validate_options()

    @property
    def architecture(self) -> ArchitectureConfig:
        return part_of(ArchitectureConfig, self)

    @property
    def training(self) -> TrainingConfig:
        return part_of(TrainingConfig, self)

    @property
    def indexing(self) -> IndexingConfig:
        return part_of(IndexingConfig, self)

    def validate_options(self) -> None:
        """Fail early with a message that names the bad option (not deep inside a forward pass)."""
        stem = stem_class(self.stem)  # UnknownChoice (a ValueError) names the registered stems
        if self.hidden_act not in ACTIVATIONS:
            raise ValueError(f"hidden_act must be one of {ACTIVATIONS}, got {self.hidden_act!r}")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size ({self.hidden_size}) must be a multiple of "
                f"num_attention_heads ({self.num_attention_heads})"
            )
        if self.location_dim != LOCATION_DIM:
            raise ValueError(f"location_dim must be {LOCATION_DIM} ([xmin,xmax,ymin,ymax,w,h])")
        if not 0 <= self.label_segment_id < self.type_vocab_size:
            raise ValueError(f"label_segment_id must be in [0, type_vocab_size={self.type_vocab_size})")
        if self.max_label_tokens > self.max_position_embeddings:
            raise ValueError("max_label_tokens cannot exceed max_position_embeddings")
        if self.top_n is not None and self.top_n <= 0:
            raise ValueError(f"top_n must be positive or None (all), got {self.top_n}")
        if self.sparsity_loss not in SPARSITY_LOSSES:
            raise ValueError(f"sparsity_loss must be one of {SPARSITY_LOSSES}, got {self.sparsity_loss!r}")
        if self.region_norm not in REGION_NORMS:
            raise ValueError(f"region_norm must be one of {REGION_NORMS}, got {self.region_norm!r}")
        if self.index_scale_regions not in SCALE_REGIONS:
            raise ValueError(
                f"index_scale_regions must be one of {SCALE_REGIONS}, got {self.index_scale_regions!r}"
            )
        if self.sparsity_weight < 0 or not 0 <= self.sparsity_warmup <= 1:
            raise ValueError("sparsity_weight must be >= 0 and sparsity_warmup a fraction in [0, 1]")
        if not (self.presence_weight >= 0 and self.presence_margin >= 0):
            raise ValueError("presence_weight and presence_margin must be >= 0")
        if self.sparsity_target is not None and self.sparsity_target <= 0:
            raise ValueError(f"sparsity_target (terms per image) must be > 0, got {self.sparsity_target}")
        if self.sparsity_images is not None and self.sparsity_images < 1:
            raise ValueError(f"sparsity_images must be >= 1 or None (all), got {self.sparsity_images}")
        if self.sparsity_vocab is not None and self.sparsity_vocab < 1:
            raise ValueError(f"sparsity_vocab must be >= 1 or None (all), got {self.sparsity_vocab}")
        stem.check_config(self)
        for size in self.index_scales or ():
            stem.check_scale(self, size)
        if len(self.image_mean) != 3 or len(self.image_std) != 3:
            raise ValueError("image_mean and image_std need 3 values (RGB)")

    @property
    def num_patches(self) -> int:
        return self.grid_size * self.grid_size


def config_from_spec(spec: str | None, **overrides: Any) -> VisualSpartaConfig:
    """``tiny`` / ``small`` / ``base``, a JSON file path, or an inline JSON object, plus overrides."""
    spec = spec or "tiny"
    if spec in PRESETS:
        values: dict[str, Any] = dict(PRESETS[spec])
    elif spec.lstrip().startswith("{"):
        values = json.loads(spec)
    elif Path(spec).is_file():
        values = json.loads(Path(spec).read_text(encoding="utf-8"))
    else:
        raise ValueError(
            f"--config must be one of {sorted(PRESETS)}, a JSON file or a JSON object; got {spec!r}"
        )
    if not isinstance(values, dict):
        raise ValueError("a JSON config must be an object")
    values.pop("model_type", None)
    values.update(overrides)
    return VisualSpartaConfig(**values)
