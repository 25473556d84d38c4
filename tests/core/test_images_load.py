"""load_image on real files written by Pillow: every mode converts correctly, every bad kind fails clearly."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from vsparta.core.images import ImageError, load_image

RED, GREEN, BLUE, WHITE = (255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 255)


def _px(im: Image.Image, x: int, y: int) -> tuple[int, int, int]:
    return tuple(int(v) for v in np.asarray(im)[y, x])


def _close(a: tuple[int, ...], b: tuple[int, ...], tol: int = 6) -> bool:
    return all(abs(x - y) <= tol for x, y in zip(a, b, strict=True))


def _halves(size: tuple[int, int], left: tuple[int, ...], right: tuple[int, ...], mode: str) -> Image.Image:
    w, h = size
    im = Image.new(mode, size, left)
    im.paste(Image.new(mode, (w - w // 2, h), right), (w // 2, 0))
    return im


def test_rgb_png_round_trips_exactly(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    arr = rng.integers(0, 256, (17, 23, 3), dtype=np.uint8)
    path = tmp_path / "x.png"
    Image.fromarray(arr).save(path)
    out = load_image(path)
    assert out.mode == "RGB" and out.size == (23, 17)
    np.testing.assert_array_equal(np.asarray(out), arr)
    # str paths and raw bytes give the same pixels
    np.testing.assert_array_equal(np.asarray(load_image(str(path))), arr)
    np.testing.assert_array_equal(np.asarray(load_image(path.read_bytes())), arr)


def test_grayscale_jpeg_becomes_three_equal_channels(tmp_path: Path) -> None:
    path = tmp_path / "grey.jpg"
    Image.new("L", (16, 16), 77).save(path, quality=95)
    out = load_image(path)
    assert out.mode == "RGB"
    r, g, b = _px(out, 8, 8)
    assert r == g == b and abs(r - 77) <= 2


def test_palette_png_keeps_colours_and_transparent_index_becomes_white(tmp_path: Path) -> None:
    im = _halves((20, 10), RED, BLUE, "RGB").convert("P", palette=Image.Palette.ADAPTIVE, colors=4)
    path = tmp_path / "pal.png"
    im.save(path)
    out = load_image(path)
    assert _px(out, 2, 5) == RED and _px(out, 17, 5) == BLUE

    # mark the palette index of red as transparent: it must come out white, not black or red
    red_index = im.getpixel((2, 5))
    path_t = tmp_path / "pal_t.png"
    im.save(path_t, transparency=red_index)
    assert Image.open(path_t).mode == "P"
    out_t = load_image(path_t)
    assert _px(out_t, 2, 5) == WHITE and _px(out_t, 17, 5) == BLUE


def test_alpha_png_is_composited_onto_white(tmp_path: Path) -> None:
    im = Image.new("RGBA", (30, 10), (255, 0, 0, 0))  # fully transparent red
    im.paste(Image.new("RGBA", (10, 10), (255, 0, 0, 128)), (10, 0))  # half-transparent red
    im.paste(Image.new("RGBA", (10, 10), (0, 0, 255, 255)), (20, 0))  # opaque blue
    path = tmp_path / "alpha.png"
    im.save(path)
    out = load_image(path)
    assert _px(out, 5, 5) == WHITE
    assert _close(_px(out, 15, 5), (255, 127, 127), tol=2)
    assert _px(out, 25, 5) == BLUE


def test_la_png_is_composited_onto_white(tmp_path: Path) -> None:
    im = Image.new("LA", (10, 10), (0, 0))
    im.paste(Image.new("LA", (5, 10), (0, 255)), (5, 0))
    path = tmp_path / "la.png"
    im.save(path)
    out = load_image(path)
    assert _px(out, 1, 1) == WHITE and _px(out, 8, 1) == (0, 0, 0)


def test_cmyk_jpeg_converts_to_rgb(tmp_path: Path) -> None:
    im = _halves((32, 16), (0, 255, 255, 0), (255, 255, 0, 0), "CMYK")  # red | blue in CMYK
    path = tmp_path / "cmyk.jpg"
    im.save(path, quality=95)
    assert Image.open(path).mode == "CMYK"
    out = load_image(path)
    assert out.mode == "RGB"
    assert _close(_px(out, 4, 8), RED, tol=12) and _close(_px(out, 28, 8), BLUE, tol=12)


@pytest.mark.parametrize(
    ("orientation", "size", "top_left", "bottom_right"),
    [
        (1, (40, 20), RED, BLUE),  # as stored: red left, blue right
        (3, (40, 20), BLUE, RED),  # rotated 180: blue left
        (6, (20, 40), RED, BLUE),  # rotate 90 CW to display: left half goes to the top
        (8, (20, 40), BLUE, RED),  # rotate 90 CCW to display: right half goes to the top
    ],
)
def test_exif_orientation_is_applied(
    tmp_path: Path,
    orientation: int,
    size: tuple[int, int],
    top_left: tuple[int, int, int],
    bottom_right: tuple[int, int, int],
) -> None:
    im = _halves((40, 20), RED, BLUE, "RGB")
    exif = Image.Exif()
    exif[0x0112] = orientation
    path = tmp_path / f"rot{orientation}.jpg"
    im.save(path, quality=95, exif=exif)
    raw = Image.open(path)
    assert raw.size == (40, 20) and raw.getexif().get(0x0112) == orientation
    out = load_image(path)
    assert out.size == size
    w, h = size
    assert _close(_px(out, 2, 2), top_left, tol=12)
    assert _close(_px(out, w - 3, h - 3), bottom_right, tol=12)


def test_16bit_png_is_scaled_not_clipped(tmp_path: Path) -> None:
    arr = np.tile(np.linspace(0, 65535, 64).astype(np.uint16), (8, 1))
    path = tmp_path / "deep.png"
    Image.fromarray(arr).save(path)
    assert Image.open(path).mode.startswith("I")
    out = np.asarray(load_image(path))
    row = out[0, :, 0].astype(int)
    assert row[0] == 0 and row[-1] == 255
    assert abs(row[32] - round(32 / 63 * 255)) <= 1  # mid-grey stays mid-grey (clipping gives 255)
    assert np.all(np.diff(row) >= 0)
    assert np.array_equal(out[..., 0], out[..., 1]) and np.array_equal(out[..., 1], out[..., 2])


def test_one_bit_image(tmp_path: Path) -> None:
    arr = np.zeros((8, 8), dtype=bool)
    arr[:, 4:] = True
    path = tmp_path / "bits.png"
    Image.fromarray(arr).save(path)
    assert Image.open(path).mode == "1"
    out = load_image(path)
    assert _px(out, 0, 0) == (0, 0, 0) and _px(out, 7, 7) == WHITE


@pytest.mark.parametrize("fmt", ["GIF", "WEBP"])
def test_animation_gives_first_frame(tmp_path: Path, fmt: str) -> None:
    frames = [Image.new("RGB", (12, 12), c) for c in (RED, GREEN, BLUE)]
    path = tmp_path / f"anim.{fmt.lower()}"
    extra = {"lossless": True} if fmt == "WEBP" else {}
    frames[0].save(path, format=fmt, save_all=True, append_images=frames[1:], duration=50, loop=0, **extra)
    assert getattr(Image.open(path), "n_frames", 1) == 3
    out = load_image(path)
    assert out.mode == "RGB" and out.size == (12, 12)
    assert _close(_px(out, 6, 6), RED, tol=2)


def test_webp_and_bmp_still_images(tmp_path: Path) -> None:
    im = _halves((20, 10), GREEN, BLUE, "RGB")
    for name, kwargs in [("a.webp", {"lossless": True}), ("a.bmp", {})]:
        path = tmp_path / name
        im.save(path, **kwargs)
        out = load_image(path)
        assert _px(out, 1, 1) == GREEN and _px(out, 18, 8) == BLUE


@pytest.mark.parametrize(
    ("fmt", "suffix"), [("JPEG", "jpg"), ("PNG", "png"), ("WEBP", "webp"), ("GIF", "gif")]
)
def test_truncated_files_are_rejected(tmp_path: Path, fmt: str, suffix: str) -> None:
    rng = np.random.default_rng(1)
    full = tmp_path / f"full.{suffix}"
    Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)).save(full, format=fmt)
    data = full.read_bytes()
    cut = tmp_path / f"cut.{suffix}"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ImageError) as exc:
        load_image(cut)
    assert exc.value.reason == "truncated"
    assert str(cut) in str(exc.value)


def test_zero_byte_file_is_empty(tmp_path: Path) -> None:
    path = tmp_path / "zero.jpg"
    path.write_bytes(b"")
    with pytest.raises(ImageError) as exc:
        load_image(path)
    assert exc.value.reason == "empty" and "zero.jpg" in str(exc.value)
    with pytest.raises(ImageError) as exc_b:
        load_image(b"")
    assert exc_b.value.reason == "empty"


def test_text_file_named_jpg_is_not_an_image(tmp_path: Path) -> None:
    path = tmp_path / "notes.jpg"
    path.write_text("this is not a picture\n")
    with pytest.raises(ImageError) as exc:
        load_image(path)
    assert exc.value.reason == "not_an_image" and "notes.jpg" in str(exc.value)
    assert isinstance(exc.value, ValueError)


def test_missing_file_is_unreadable(tmp_path: Path) -> None:
    with pytest.raises(ImageError) as exc:
        load_image(tmp_path / "nope.png")
    assert exc.value.reason == "unreadable" and "nope.png" in str(exc.value)


def test_too_large_is_checked_from_header_before_decoding(tmp_path: Path) -> None:
    path = tmp_path / "big.png"
    Image.new("RGB", (200, 100), RED).save(path)
    with pytest.raises(ImageError) as exc:
        load_image(path, max_pixels=19_999)
    assert exc.value.reason == "too_large" and "200x100" in str(exc.value)
    assert load_image(path, max_pixels=20_000).size == (200, 100)

    # only the header survives: a decoder would say "truncated", the guard answers first
    head = tmp_path / "head.png"
    head.write_bytes(path.read_bytes()[:60])
    with pytest.raises(ImageError) as exc_h:
        load_image(head, max_pixels=1000)
    assert exc_h.value.reason == "too_large"


def _png_claiming(width: int, height: int) -> bytes:
    """A tiny PNG whose header claims a huge size: the classic decompression bomb shape."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64))


def test_decompression_bomb_with_default_limit() -> None:
    # > 2 x Pillow's limit: Pillow itself raises at open; we turn it into "too_large"
    with pytest.raises(ImageError) as exc:
        load_image(_png_claiming(20_000, 20_000))
    assert exc.value.reason == "too_large"
    # between 1x and 2x: Pillow only warns; our own check stops it
    with pytest.raises(ImageError) as exc2:
        load_image(_png_claiming(10_000, 10_000))
    assert exc2.value.reason == "too_large"


def test_bad_max_pixels_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_pixels"):
        load_image(b"x", max_pixels=0)


def test_image_error_reason_is_validated() -> None:
    with pytest.raises(ValueError):
        ImageError("bogus", "f", "d")  # type: ignore[arg-type]


# ---- draft mode (the indexer's fast decode): same image, fewer pixels decoded -------------------


def _photo(size: tuple[int, int], seed: int = 0) -> Image.Image:
    """Smooth colours plus shapes: what a photo's low frequencies look like to a resize."""
    w, h = size
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    arr = np.stack([xx / w * 255, yy / h * 255, (xx + yy) / (w + h) * 255], -1).astype(np.uint8)
    im = Image.fromarray(arr)
    rng = np.random.default_rng(seed)
    for _ in range(5):
        x0, y0 = int(rng.integers(0, w // 2)), int(rng.integers(0, h // 2))
        im.paste(tuple(int(c) for c in rng.integers(0, 256, 3)), (x0, y0, x0 + w // 4, y0 + h // 4))
    return im


def _write_jpeg_kinds(tmp_path: Path, size: tuple[int, int]) -> dict[str, Path]:
    photo = _photo(size)
    paths = {k: tmp_path / f"{k}.jpg" for k in ("baseline", "progressive", "cmyk", "grey", "exif")}
    photo.save(paths["baseline"], quality=92)
    photo.save(paths["progressive"], quality=92, progressive=True)
    photo.convert("CMYK").save(paths["cmyk"], quality=92)
    photo.convert("L").save(paths["grey"], quality=92)
    exif = Image.Exif()
    exif[0x0112] = 6  # shown rotated by 90 degrees
    photo.save(paths["exif"], quality=92, exif=exif.tobytes())
    return paths


@pytest.mark.parametrize("kind", ["baseline", "progressive", "cmyk", "grey", "exif"])
def test_draft_decode_is_the_same_picture_within_a_stated_bound(tmp_path: Path, kind: str) -> None:
    """Draft + reducing_gap vs full decode + bicubic, both at the model's 64 px: orientation and
    mode handling identical, pixels within a mean of 2 and a 99th percentile of 10 levels of 255."""
    from vsparta.model.preprocess import ImagePreprocessor

    path = _write_jpeg_kinds(tmp_path, (640, 480))[kind]
    full, draft = load_image(path), load_image(path, draft_size=64)
    assert draft.mode == full.mode == "RGB"
    assert draft.size[0] < full.size[0] and min(draft.size) >= 64  # decoded at reduced scale
    assert (draft.size[0] > draft.size[1]) == (full.size[0] > full.size[1])  # same orientation
    pre = ImagePreprocessor(image_size=64)
    a = pre.pixels(full).astype(int)
    b = pre.pixels(draft, reducing_gap=3.0).astype(int)
    diff = np.abs(a - b)
    assert diff.mean() <= 2.0 and np.percentile(diff, 99) <= 10, (diff.mean(), np.percentile(diff, 99))


def test_draft_size_leaves_other_formats_and_small_jpegs_untouched(tmp_path: Path) -> None:
    photo = _photo((300, 200))
    for name, kw in (("a.png", {}), ("a.webp", {"lossless": True}), ("small.jpg", {"quality": 95})):
        photo.save(tmp_path / name, **kw)
        exact = np.asarray(load_image(tmp_path / name))
        big = 200 if name == "small.jpg" else 64  # a JPEG under 2x the size is decoded in full
        np.testing.assert_array_equal(np.asarray(load_image(tmp_path / name, draft_size=big)), exact)


def test_draft_mode_keeps_failures_and_the_bomb_guard(tmp_path: Path) -> None:
    path = _write_jpeg_kinds(tmp_path, (640, 480))["baseline"]
    data = path.read_bytes()
    (tmp_path / "cut.jpg").write_bytes(data[: len(data) // 2])
    with pytest.raises(ImageError) as exc:
        load_image(tmp_path / "cut.jpg", draft_size=64)
    assert exc.value.reason == "truncated"
    with pytest.raises(ImageError) as exc:
        load_image(path, max_pixels=640 * 480 - 1, draft_size=64)  # checked on the full size
    assert exc.value.reason == "too_large"
