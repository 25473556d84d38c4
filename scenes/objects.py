"""The object scene benchmark: 1-5 everyday objects per image, five captions each, five splits.

Splits: ``train``, ``val`` and ``test`` draw from the *seen* objects and never use a held-out word;
``heldout_words`` shows seen objects but every caption names one of them with a held-out word (an
alias or category word no training caption uses); ``heldout_objects`` shows in every image an
object that no other split contains; ``shift`` shows seen objects named by seen words, drawn and
captioned in a style no other split has (``scenes/object_shift.py``). Scenes are drawn from
generators seeded by (seed, split, image), so the same arguments give the same bytes and splits
are independent.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vsparta.core.manifest import ManifestRecord, write_manifest
from vsparta.core.progress import progress_bar
from vsparta.scenes.emoji_catalog import EmojiObject, select
from vsparta.scenes.object_captions import Kind, make_captions, template_words
from vsparta.scenes.object_render import (
    MAX_OBJECTS,
    MIN_IMAGE_SIZE,
    SEEN,
    SIZES,
    Placed,
    Style,
    render_objects,
)
from vsparta.scenes.object_shift import SHIFT, ShiftStyle
from vsparta.scenes.object_words import Vocabulary, choose_vocabulary

log = logging.getLogger(__name__)

SPLITS = ("train", "val", "test", "heldout_words", "heldout_objects", "shift")  # order fixes the seeds
_MODES = {"heldout_words": "heldout_words", "heldout_objects": "heldout_objects"}
MAX_KINDS = 3
CHUNK = 500  # scenes a worker process draws at a time


def check_numbers(min_objects: int, max_objects: int, image_size: int, counts: dict[str, int]) -> None:
    """Impossible requests fail before anything is written, in one sentence."""
    if min_objects < 1:
        raise ValueError(f"a scene needs at least 1 object, got --min-objects {min_objects}")
    if max_objects > MAX_OBJECTS:
        raise ValueError(
            f"at most {MAX_OBJECTS} objects fit in a scene (a {MAX_OBJECTS}-cell grid), "
            f"got --max-objects {max_objects}"
        )
    if max_objects < min_objects:
        raise ValueError(f"--max-objects {max_objects} is below --min-objects {min_objects}")
    if not MIN_IMAGE_SIZE <= image_size <= 1024:
        raise ValueError(f"image size must be in [{MIN_IMAGE_SIZE}, 1024] pixels, got {image_size}")
    for split, n in counts.items():
        if n < 0:
            raise ValueError(f"the {split} split needs a non-negative number of images, got {n}")


def _focus_pool(objects: tuple[EmojiObject, ...], vocab: Vocabulary, split: str) -> list[int]:
    if split == "heldout_objects":
        return list(vocab.unseen)
    if split == "heldout_words":
        return [i for i in vocab.seen if vocab.names(objects[i], True) or vocab.categories(objects[i], True)]
    return []


def _scene(
    rng: np.random.Generator,
    objects: tuple[EmojiObject, ...],
    vocab: Vocabulary,
    split: str,
    n_range: tuple[int, int],
) -> list[Kind]:
    n = int(rng.integers(n_range[0], n_range[1] + 1))
    n_kinds = int(rng.integers(1, min(n, MAX_KINDS) + 1))
    counts = [1] * n_kinds
    for _ in range(n - n_kinds):
        counts[int(rng.integers(n_kinds))] += 1
    focus = _focus_pool(objects, vocab, split)
    chosen: list[int] = [int(rng.choice(focus))] if focus else []
    while len(chosen) < n_kinds:
        candidate = int(rng.choice(vocab.seen))
        if candidate not in chosen:
            chosen.append(candidate)
    cells = [int(c) for c in rng.permutation(MAX_OBJECTS)[:n]]
    kinds, at = [], 0
    for k, (index, count) in enumerate(zip(chosen, counts, strict=True)):
        size = str(rng.choice(list(SIZES)))
        placed = tuple(Placed(index, cells[at + c], size) for c in range(count))
        kinds.append(Kind(objects[index], placed, focus=bool(focus) and k == 0))
        at += count
    return kinds


@dataclass(frozen=True)
class _Draw:
    """What every scene of one split is drawn from (sent whole to each worker process)."""

    out: Path
    split: str
    size: int
    seed: int
    objects: tuple[EmojiObject, ...]
    vocab: Vocabulary
    n_range: tuple[int, int]
    shift: ShiftStyle
    train_look: Style


def _record(d: _Draw, i: int) -> ManifestRecord:
    """Scene ``i`` of the split: drawn from its own generator, written as a JPEG."""
    style = d.shift if d.split == "shift" else d.train_look if d.split == "train" else SEEN
    mode = "shift" if d.split == "shift" and d.shift.templates else _MODES.get(d.split, "seen")
    rng = np.random.default_rng([d.seed, SPLITS.index(d.split), i])
    kinds = _scene(rng, d.objects, d.vocab, d.split, d.n_range)
    order = [(p, k.obj.char) for k in kinds for p in k.placed]
    rng.shuffle(order)  # draw order mixes kinds, so any of them may be the one partly hidden
    placed, chars = [p for p, _ in order], [c for _, c in order]
    image, background, drawn = render_objects(rng, placed, chars, d.size, style)
    captions, mentions = make_captions(rng, kinds, d.vocab, mode, background["texture"])
    image_id = f"{d.split}-{i:05d}"
    path = d.out / "images" / d.split / f"{image_id}.jpg"
    image.save(path, format="JPEG", quality=90)
    metadata = {
        "split": d.split,
        "kind": "objects",
        "size": d.size,
        "background": background,
        "objects": [
            {
                "emoji": d.objects[p.index].char,
                "name": d.objects[p.index].name,
                "position": p.position(),
                "size": p.size,
                **drawn_object,
            }
            for (p, _), drawn_object in zip(order, drawn, strict=True)
        ],
        "focus": next((k.obj.name for k in kinds if k.focus), None),
        "style": style.name,
        "mentions": mentions,  # per caption: the objects it names, with counts
    }
    return ManifestRecord(id=image_id, image=path, captions=captions, metadata=metadata)


def _chunk(d: _Draw, start: int, stop: int) -> list[ManifestRecord]:
    return [_record(d, i) for i in range(start, stop)]


def scene_workers(n: int, workers: int | None) -> int:
    """Processes for ``n`` scenes: ``workers``, or by default one per core but never fewer than
    ``CHUNK`` scenes each (a process costs about a second to start)."""
    if workers is not None:
        if workers < 1:
            raise ValueError(f"scene workers must be >= 1, got {workers}")
        return workers
    return max(1, min(os.cpu_count() or 1, n // CHUNK))


def _records(d: _Draw, n: int, progress: bool, workers: int) -> list[ManifestRecord]:
    """The split's ``n`` scenes in order. Each scene has its own generator, so the bytes do not
    depend on how many processes draw them."""
    (d.out / "images" / d.split).mkdir(parents=True, exist_ok=True)
    bar = progress_bar(total=n, desc=f"scenes {d.split}", unit="img", enabled=progress and n > 0)
    if workers == 1 or n <= CHUNK:
        records = []
        for i in range(n):
            records.append(_record(d, i))
            bar.update(1)
        bar.close()
        return records
    bounds = [(start, min(start + CHUNK, n)) for start in range(0, n, CHUNK)]
    records = []
    # spawn, not fork: a caller may hold threads or a CUDA context that a forked child must not copy
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        for chunk in pool.map(_chunk, [d] * len(bounds), *zip(*bounds, strict=True)):
            records += chunk
            bar.update(len(chunk))
    bar.close()
    return records


def held_out(
    seed: int, groups: tuple[str, ...] = (), held_word_share: float = 0.12, held_object_share: float = 0.08
) -> tuple[tuple[EmojiObject, ...], Vocabulary]:
    """The catalog of ``groups`` and which of its objects and words the scenes of ``seed`` hold
    out: what ``generate_object_scenes`` draws, for readers of its splits (``bench.heldout_alone``)."""
    objects = select(groups)
    return objects, choose_vocabulary(objects, seed, template_words(), held_object_share, held_word_share)


def generate_object_scenes(
    out_dir: str | Path,
    counts: dict[str, int],
    *,
    image_size: int = 96,
    seed: int = 0,
    min_objects: int = 1,
    max_objects: int = 5,
    held_word_share: float = 0.12,
    held_object_share: float = 0.08,
    groups: tuple[str, ...] = (),
    progress: bool = True,
    shift: ShiftStyle = SHIFT,
    train_look: Style = SEEN,
    workers: int | None = 1,
) -> dict[str, Path]:
    """Write ``out_dir/images/<split>/`` and ``out_dir/<split>.jsonl`` for each split in ``counts``
    (any of :data:`SPLITS`); returns split -> manifest path. Same arguments, same bytes. The shares
    are of the catalog's objects and of its alias/category words held out (0: none, as the demo).
    ``groups`` restricts the catalog to those Unicode emoji groups/subgroups (empty: all); ``shift``
    is how the shift split is drawn (by default every change at once, ``scenes.object_shift``),
    ``train_look`` how the training split is (by default as every other, ``scenes.object_varied``);
    ``workers``: processes that draw a split; None: ``scene_workers`` chooses. Worker processes are
    started by spawning, which imports the caller's main module again: only a caller whose script
    keeps its work under ``if __name__ == "__main__"`` (every ``vsparta`` command does) asks for more
    than one."""
    unknown = set(counts) - set(SPLITS)
    if unknown:
        raise ValueError(f"unknown split(s) {sorted(unknown)}; the object scenes have {list(SPLITS)}")
    check_numbers(min_objects, max_objects, image_size, counts)
    for name, share in (("held-out word", held_word_share), ("held-out object", held_object_share)):
        if not 0.0 <= share < 1.0:
            raise ValueError(f"the {name} share must be in [0, 1), got {share}")
    objects, vocab = held_out(seed, groups, held_word_share, held_object_share)
    for split in ("heldout_words", "heldout_objects"):
        if counts.get(split) and not _focus_pool(objects, vocab, split):
            raise ValueError(f"the {split} split is empty when nothing is held out; ask for 0 images")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    manifests: dict[str, Path] = {}
    for split, n in counts.items():
        n_range = (min_objects, max_objects)
        draw = _Draw(out, split, image_size, seed, objects, vocab, n_range, shift, train_look)
        records = _records(draw, n, progress, scene_workers(n, workers))
        manifests[split] = write_manifest(out / f"{split}.jsonl", records)
        log.info("scenes: %s: %d images -> %s", split, len(records), manifests[split])
    return manifests
