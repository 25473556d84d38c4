"""The everyday objects of the object scenes: single-glyph emoji with their names and categories.

Nothing here is typed by hand. The pictures come from the Noto Color Emoji font (Debian
``fonts-noto-color-emoji``); the groups and subgroups ("Animals & Nature", "animal-mammal") from
Unicode's ``emoji-test.txt`` (Debian ``unicode-data``); the names and aliases from the PyPI package
``emoji`` (CLDR short names and GitHub/Slack aliases) and Python's ``unicodedata``. Symbols, flags
and skin-tone/hair components are left out: they are not things one photographs. Glyphs that the
font cannot draw, or that draw the same picture as an earlier one, are dropped.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

FONT_PACKAGE = "fonts-noto-color-emoji"
GROUPS_PACKAGE = "unicode-data"
FONT_PATHS = (
    "/usr/share/fonts/truetype/noto/NotoColorEmoji.ttf",
    "/usr/share/fonts/noto/NotoColorEmoji.ttf",
    "/usr/local/share/fonts/NotoColorEmoji.ttf",
)
EMOJI_TEST_PATHS = ("/usr/share/unicode/emoji/emoji-test.txt", "/usr/share/unicode-data/emoji/emoji-test.txt")
FONT_ENV, EMOJI_TEST_ENV = "VSPARTA_EMOJI_FONT", "VSPARTA_EMOJI_TEST"
GLYPH_PX = 109  # the only size of the font's colour bitmaps
KEPT_GROUPS = (
    "Smileys & Emotion",
    "People & Body",
    "Animals & Nature",
    "Food & Drink",
    "Travel & Places",
    "Activities",
    "Objects",
)
# parts of a subgroup name that qualify rather than name a category ("hand-fingers-open")
_QUALIFIERS = {"other", "open", "partial", "closed", "single", "finger", "fingers", "prop", "role", "ground"}


class SceneResourceMissing(ValueError):
    """A system file the object scenes need is not installed; the message names the package."""


@dataclass(frozen=True)
class EmojiObject:
    char: str
    name: str  # CLDR short name: "automobile"
    aliases: tuple[str, ...]  # other names of the same picture: "car", "red car" ...
    group: str  # "Travel & Places"
    subgroup: str  # "transport-ground"
    categories: tuple[str, ...]  # category words: ("transport",)

    @property
    def phrases(self) -> tuple[str, ...]:
        """Every name a caption may use for this object, the canonical one first."""
        return (self.name, *self.aliases)


def _first_existing(env: str, candidates: tuple[str, ...]) -> Path | None:
    chosen = os.environ.get(env)
    for path in [chosen] if chosen else candidates:
        if Path(path).is_file():
            return Path(path)
    return None


def _installed(env: str, candidates: tuple[str, ...], what: str, package: str) -> Path:
    """The file a Debian package installs (or ``env`` names), else one sentence saying how to get it."""
    path = _first_existing(env, candidates)
    if path is None:
        raise SceneResourceMissing(
            f"the object scenes {what}, which is not installed: install the Debian package {package} "
            f"(apt-get install {package}) or set {env}"
        )
    return path


def font_path() -> Path:
    return _installed(FONT_ENV, FONT_PATHS, "draw the Noto Color Emoji font", FONT_PACKAGE)


def emoji_test_path() -> Path:
    what = "read emoji categories from Unicode's emoji-test.txt"
    return _installed(EMOJI_TEST_ENV, EMOJI_TEST_PATHS, what, GROUPS_PACKAGE)


def normalise(text: str) -> str:
    """':red_apple:' / 'RED APPLE' / "woman’s hat" -> 'red apple' / "woman's hat"; digits at a word's
    end dropped ('dog2' -> 'dog'), brackets and punctuation to spaces."""
    text = text.strip(":").replace("_", " ").replace("’", "'").lower()
    text = re.sub(r"(?<=[a-z])\d+\b", "", text)
    text = re.sub(r"[^a-z0-9' ]+", " ", text)
    return " ".join(w.strip("'") for w in text.split() if w.strip("'"))


def _categories(subgroup: str) -> tuple[str, ...]:
    parts = re.split(r"-| & ", subgroup)
    return tuple(dict.fromkeys(normalise(p) for p in parts if p and p not in _QUALIFIERS))


def _single_glyphs(path: Path) -> list[tuple[str, str, str]]:
    """(character, group, subgroup) of every fully-qualified one-code-point emoji of a kept group."""
    out: list[tuple[str, str, str]] = []
    group = subgroup = ""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# group:"):
            group = line.split(":", 1)[1].strip()
        elif line.startswith("# subgroup:"):
            subgroup = line.split(":", 1)[1].strip()
        elif "; fully-qualified" in line and group in KEPT_GROUPS:
            points = [p for p in line.split(";")[0].split() if p != "FE0F"]
            if len(points) == 1:
                out.append((chr(int(points[0], 16)), group, subgroup))
    return out


def _names(char: str) -> tuple[str, tuple[str, ...]] | None:
    import emoji

    data = emoji.EMOJI_DATA.get(char) or emoji.EMOJI_DATA.get(char + "\ufe0f")
    if data is None:
        return None
    name = normalise(data["en"])
    others = [normalise(a) for a in data.get("alias", [])]
    try:
        others.append(normalise(unicodedata.name(char)))
    except ValueError:
        pass
    aliases = tuple(a for a in dict.fromkeys(others) if a and a != name)
    return (name, aliases) if name else None


@functools.lru_cache(maxsize=2)
def _font(path: str) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(path, GLYPH_PX)


@functools.lru_cache(maxsize=4096)
def glyph(char: str) -> Image.Image:
    """The emoji's picture, RGBA, cropped to its opaque pixels (empty if the font lacks it)."""
    canvas = Image.new("RGBA", (GLYPH_PX + 40, GLYPH_PX + 40), (0, 0, 0, 0))
    ImageDraw.Draw(canvas).text((4, 4), char, font=_font(str(font_path())), embedded_color=True)
    box = canvas.getchannel("A").getbbox()
    return canvas.crop(box) if box else Image.new("RGBA", (1, 1), (0, 0, 0, 0))


def _fingerprint(char: str) -> str | None:
    img = glyph(char)
    if img.width < 8 or img.height < 8:
        return None
    thumb = np.asarray(img.resize((24, 24), Image.Resampling.BOX), dtype=np.uint8) // 16
    return hashlib.blake2b(thumb.tobytes(), digest_size=12).hexdigest()


@functools.lru_cache(maxsize=1)
def catalog() -> tuple[EmojiObject, ...]:
    """Every object, in Unicode's order: distinct pictures with a name and at least one category."""
    font_path()  # fail on the font before reading anything else
    objects: list[EmojiObject] = []
    seen_pictures: set[str] = set()
    seen_names: set[str] = set()
    for char, group, subgroup in _single_glyphs(emoji_test_path()):
        names = _names(char)
        categories = _categories(subgroup)
        if names is None or not categories or names[0] in seen_names:
            continue
        picture = _fingerprint(char)
        if picture is None or picture in seen_pictures:
            continue
        seen_pictures.add(picture)
        seen_names.add(names[0])
        objects.append(EmojiObject(char, names[0], names[1], group, subgroup, categories))
    return tuple(objects)


def select(groups: tuple[str, ...] = ()) -> tuple[EmojiObject, ...]:
    """The catalog restricted to Unicode groups or subgroups ("Food & Drink", "food-fruit"), in
    the catalog's order; empty ``groups``: all of it. A small set (the demo's) lets a small model
    see each object dozens of times. An unknown name is a ValueError that lists the known ones."""
    objects = catalog()
    if not groups:
        return objects
    known = {o.group for o in objects} | {o.subgroup for o in objects}
    unknown = [g for g in groups if g not in known]
    if unknown:
        raise ValueError(
            f"unknown emoji group/subgroup {', '.join(map(repr, unknown))}; known: {', '.join(sorted(known))}"
        )
    wanted = set(groups)
    return tuple(o for o in objects if o.group in wanted or o.subgroup in wanted)
