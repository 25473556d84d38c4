"""Fixtures for the model tests: tiny configs and a handful of images drawn with PIL."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image, ImageDraw

from vsparta.core.manifest import ManifestRecord, write_manifest

COLORS = {"red": (220, 30, 30), "green": (30, 180, 40), "blue": (30, 60, 220), "yellow": (230, 210, 30)}
SHAPES = ("square", "circle")
SIDES = ("left", "right")

TINY = {
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "image_size": 32,
    "grid_size": 4,
    "stem_channels": [8, 16],
    "region_feature_dim": 16,
    "max_position_embeddings": 64,
}
# A tiny transformer on EfficientNet-Lite0 with random weights (the real architecture, nothing loaded)
LITE = {
    **TINY,
    "stem": "efficientnet_lite0",
    "stem_weights": "none",
    "image_size": 64,
    "grid_size": 2,
    "num_hidden_layers": 1,
}


def draw_scene(color: str, shape: str, side: str, size: int = 32) -> Image.Image:
    im = Image.new("RGB", (size, size), (245, 245, 245))
    d = ImageDraw.Draw(im)
    x0 = 2 if side == "left" else size // 2 + 2
    box = (x0, size // 4, x0 + size // 2 - 4, size // 4 + size // 2 - 4)
    (d.rectangle if shape == "square" else d.ellipse)(box, fill=COLORS[color])
    return im


def make_toy_dataset(root: Path, repeats: int = 1) -> Path:
    """16 distinct scenes (colour x shape x side), ``repeats`` copies each; 3 captions per image."""
    root.mkdir(parents=True, exist_ok=True)
    records = []
    for rep in range(repeats):
        for color in COLORS:
            for shape in SHAPES:
                for side in SIDES:
                    name = f"{color}-{shape}-{side}-{rep}"
                    path = root / f"{name}.png"
                    draw_scene(color, shape, side).save(path)
                    caps = [
                        f"a {color} {shape} on the {side}",
                        f"{color} {shape} {side}",
                        f"there is a {shape} that is {color} at the {side}",
                    ]
                    records.append(ManifestRecord(name, path, caps, {"color": color}))
    return write_manifest(root / "manifest.jsonl", records)


@pytest.fixture(scope="session")
def toy_manifest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_toy_dataset(tmp_path_factory.mktemp("toy"))


@pytest.fixture
def tiny_config():
    from vsparta.model.configuration import VisualSpartaConfig

    return VisualSpartaConfig(**TINY)


@pytest.fixture(scope="session")
def tiny_model():
    """A tiny random VisualSparta with the packaged MiniLM tokenizer, in eval mode."""
    import torch

    from vsparta.model.configuration import VisualSpartaConfig
    from vsparta.model.modeling import build_model

    torch.manual_seed(0)
    return build_model(VisualSpartaConfig(**TINY)).eval()
