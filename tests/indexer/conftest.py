"""Fixtures for the indexer tests: real image files (good ones in every format and mode the
loader must handle, and one of each bad kind), and a deterministic colour encoder for the fast
pipeline tests. The colour encoder is a test fixture only; the end-to-end tests use the real
tiny VisualSparta model."""

from __future__ import annotations

import contextlib
import io
import json
import struct
import uuid
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from vsparta.model.config_parts import DEFAULT_TOP_N

# Bad files and the failure reason the job must report for each (max_pixels = MAX_PIXELS).
MAX_PIXELS = 200_000
BAD_FILES = {
    "bad/corrupt.jpg": "not_an_image",  # random bytes
    "bad/truncated.jpg": "truncated",
    "bad/zero.png": "empty",
    "bad/notes.png": "not_an_image",  # a text file with an image extension
    "bad/huge.png": "too_large",  # header claims 20000 x 20000 (decompression bomb shape)
    "bad/big.png": "too_large",  # a real image above --max-pixels
}


def _png_claiming(width: int, height: int) -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64))


def _colour(i: int) -> tuple[int, int, int]:
    rng = np.random.default_rng(i)
    return tuple(int(x) for x in rng.integers(0, 256, 3))  # type: ignore[return-value]


def write_good_images(root: Path, n: int = 12, size: int = 24) -> list[str]:
    """``n`` small images cycling through formats and modes; returns their relative paths."""
    kinds = ["jpg", "png-p", "png-rgba", "png-l", "jpg-cmyk", "gif", "webp", "bmp", "jpg-exif"]
    rels = []
    for i in range(n):
        kind = kinds[i % len(kinds)]
        rgb = Image.new("RGB", (size + i % 5, size), _colour(i))
        rgb.paste(_colour(1000 + i), (0, 0, size // 2, size // 2))
        sub = "nested/deeper/" if i % 4 == 3 else ("nested/" if i % 4 == 2 else "")
        ext = kind.split("-")[0]
        rel = f"{sub}img{i:03d}.{ext}"
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if kind == "png-p":
            rgb.convert("P", palette=Image.Palette.ADAPTIVE).save(path)
        elif kind == "png-rgba":
            rgba = rgb.convert("RGBA")
            rgba.putalpha(200)
            rgba.save(path)
        elif kind == "png-l":
            rgb.convert("L").save(path)
        elif kind == "jpg-cmyk":
            rgb.convert("CMYK").save(path, format="JPEG")
        elif kind == "gif":
            frames = [rgb, Image.new("RGB", rgb.size, (0, 0, 0))]
            frames[0].save(path, save_all=True, append_images=frames[1:], duration=50)
        elif kind == "webp":
            rgb.save(path, lossless=True)
        elif kind == "jpg-exif":
            exif = Image.Exif()
            exif[0x0112] = 6  # rotate 90 degrees on display
            rgb.save(path, format="JPEG", exif=exif.tobytes())
        else:
            rgb.save(path, format="JPEG" if ext == "jpg" else None)
        rels.append(rel)
    return rels


def write_bad_images(root: Path) -> dict[str, str]:
    (root / "bad").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    (root / "bad/corrupt.jpg").write_bytes(rng.integers(0, 256, 2000, dtype=np.uint8).tobytes())
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)).save(buf, format="JPEG")
    (root / "bad/truncated.jpg").write_bytes(buf.getvalue()[: len(buf.getvalue()) // 2])
    (root / "bad/zero.png").write_bytes(b"")
    (root / "bad/notes.png").write_text("not a picture\n")
    (root / "bad/huge.png").write_bytes(_png_claiming(20_000, 20_000))
    Image.new("RGB", (600, 400), (1, 2, 3)).save(root / "bad/big.png")
    return dict(BAD_FILES)


@pytest.fixture(
    params=[
        "embedded",
        pytest.param("elasticsearch", marks=pytest.mark.elasticsearch),
        pytest.param("opensearch", marks=pytest.mark.elasticsearch),
    ]
)
def empty_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The spec of an empty index on each engine kind (embedded; a fresh alias on the real
    Elasticsearch 7.17 and OpenSearch 2.19 nodes, dropped after)."""
    from vsparta.termindex import IndexNotFound, open_index

    if request.param == "embedded":
        yield f"embedded:{tmp_path / 'idx'}"
        return
    if request.param == "elasticsearch":
        url = request.getfixturevalue("es_url")
    else:
        url = "opensearch+" + request.getfixturevalue("opensearch_url_of")("2.19")
    spec = f"{url}/indexer-test-{uuid.uuid4().hex[:10]}"
    yield spec
    with contextlib.suppress(IndexNotFound), open_index(spec) as index:
        index.drop()  # type: ignore[attr-defined]


@pytest.fixture
def write_images():
    """``write_images(root, n, size)``: ``n`` good images in mixed formats and modes."""
    return write_good_images


@pytest.fixture
def image_folder(tmp_path: Path) -> Path:
    root = tmp_path / "images"
    write_good_images(root)
    write_bad_images(root)
    return root


class ColourEncoder:
    """Test-only stand-in for the model in fast pipeline tests: terms from mean colours.

    Vocabulary ``tok0 .. tok299``: 0-99 red bins, 100-199 green, 200-299 blue, weighted by the
    channel's quantiles so different images give different, deterministic documents. It speaks
    the indexer's encoder protocol (``vsparta.indexer.mapper.ImageTermEncoder``): uint8 pictures in, CSR out.
    """

    vocab_size = 300
    device_busy_seconds = None

    def __init__(self, image_size: int = 8) -> None:
        from vsparta.model.preprocess import ImagePreprocessor

        self.preprocessor = ImagePreprocessor(image_size=image_size)
        self.calls = 0

    def terms(self, pixels: np.ndarray, top_n: int | None = DEFAULT_TOP_N) -> list[dict[int, float]]:
        out = []
        for arr in pixels:
            terms: dict[int, float] = {}
            for c in range(3):
                channel = arr[..., c].astype(np.float64) / 255.0
                for q in (0.25, 0.5, 0.75):
                    v = float(np.quantile(channel, q))
                    terms[100 * c + min(99, int(v * 100))] = round(0.1 + v, 6)
            out.append(dict(sorted(terms.items(), key=lambda kv: -kv[1])[:top_n]))
        return out

    def start_pixels(self, pixels: np.ndarray, top_n: int | None = DEFAULT_TOP_N):
        from vsparta.indexer.batch import csr_from_dicts

        self.calls += 1
        if not isinstance(pixels, np.ndarray):  # a device tensor (GPU JPEG decode path)
            pixels = pixels.cpu().numpy()
        return csr_from_dicts(self.terms(pixels, top_n))

    def finish(self, pending):
        return pending

    def encode_regions_csr(self, regions: list, top_n: int | None = DEFAULT_TOP_N):
        from vsparta.indexer.batch import csr_from_dicts

        return csr_from_dicts([{1 + int(abs(r.features.sum())) % 99: 1.0} for r in regions])

    def id_to_token(self, i: int) -> str:
        return f"tok{i}"


@pytest.fixture
def colour_encoder() -> ColourEncoder:
    return ColourEncoder()


@pytest.fixture
def colour_tokenizer(tmp_path: Path) -> Path:
    """A tokenizer.json with the colour encoder's vocabulary (for term-document input)."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    vocab = {f"tok{i}": i for i in range(ColourEncoder.vocab_size)}
    vocab["[UNK]"] = ColourEncoder.vocab_size
    tok = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    folder = tmp_path / "colour-tokenizer"
    folder.mkdir()
    tok.save(str(folder / "tokenizer.json"))
    return folder


def _read_export(folder: Path) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for file in sorted(folder.glob("*.jsonl")):
        for line in file.read_text().splitlines():
            rec = json.loads(line)
            assert rec["id"] not in out, f"duplicate id {rec['id']} in export"
            out[rec["id"]] = rec
    return out


@pytest.fixture
def read_export():
    """``read_export(folder)``: all exported term documents by id; fails on a duplicate id."""
    return _read_export


@pytest.fixture
def bad_files() -> dict[str, str]:
    """Relative path of each bad file in ``image_folder`` -> the reason the job must report."""
    return dict(BAD_FILES)


@pytest.fixture
def max_pixels() -> int:
    return MAX_PIXELS


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real VisualSparta model, tiny and randomly initialised, saved like a trained one."""
    from vsparta.model.configuration import config_from_spec
    from vsparta.model.modeling import build_model

    folder = tmp_path_factory.mktemp("tiny-model")
    build_model(config_from_spec("tiny")).save_pretrained(folder)
    return folder


def build_sharp_tiny_model(folder: Path) -> Path:
    """The tiny config with word embeddings scaled up, so φ depends on the picture (a fresh tiny
    model gives near-equal φ for every image, which would make any comparison pass)."""
    import torch

    from vsparta.model.configuration import config_from_spec
    from vsparta.model.modeling import build_model

    torch.manual_seed(0)
    model = build_model(config_from_spec("tiny"))
    torch.nn.init.normal_(model.word_embeddings.weight, std=0.5)
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def sharp_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``build_sharp_tiny_model`` saved once per session."""
    return build_sharp_tiny_model(tmp_path_factory.mktemp("sharp-model"))
