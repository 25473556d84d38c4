"""`vsparta scenes`: write a generated benchmark (images + one manifest per split).

``--kind shapes`` (default): coloured shapes with hard-negative variants, the fast test fixture.
``--kind objects``: everyday objects from the Noto Color Emoji font, with held-out-words and
held-out-objects splits, and a report of the captions' word-pieces (``vocabulary.json``).
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def _at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least ``minimum``, else the parser's one-line error."""

    def parse(text: str) -> int:
        value = int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    parse.__name__ = "int"  # argparse names it in "invalid int value: 'x'"
    return parse


_non_negative, _positive = _at_least(0), _at_least(1)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from vsparta.scenes.object_varied import TRAIN_LOOKS

    parser.add_argument("--out", type=Path, required=True, help="output folder (created if missing)")
    parser.add_argument(
        "--kind", choices=["shapes", "objects"], default="shapes", help="coloured shapes or everyday objects"
    )
    parser.add_argument("--train", type=_non_negative, default=2000, help="training images (default 2000)")
    parser.add_argument("--val", type=_non_negative, default=200, help="validation images (default 200)")
    parser.add_argument("--test", type=_non_negative, default=500, help="test images (default 500)")
    parser.add_argument("--size", type=int, default=96, help="image side in pixels, 32-1024 (default 96)")
    parser.add_argument("--seed", type=_non_negative, default=0, help="same seed, same bytes (default 0)")
    objects = parser.add_argument_group("--kind objects")
    objects.add_argument("--heldout-words", type=int, default=300, help="held-out-words test images (300)")
    objects.add_argument(
        "--heldout-objects", type=int, default=300, help="held-out-objects test images (300)"
    )
    objects.add_argument(
        "--shift",
        type=int,
        default=0,
        help="shift test images: seen objects and words, drawn and captioned as no other split (default 0)",
    )
    objects.add_argument(
        "--train-look",
        choices=sorted(TRAIN_LOOKS),
        default="seen",
        help="the training split's look: seen (as every other split, default) or varied (half of its "
        "backgrounds vivid, in colours and contrasts no other split has; scenes/object_varied.py)",
    )
    objects.add_argument(
        "--workers",
        type=_positive,
        help="processes that draw a split (default: one per core, at most one per 500 scenes); "
        "the images do not depend on it",
    )
    objects.add_argument("--min-objects", type=int, default=1, help="fewest objects in a scene (default 1)")
    objects.add_argument("--max-objects", type=int, default=5, help="most objects in a scene (default 5)")
    objects.add_argument(
        "--held-word-share", type=float, default=0.12, help="share of alias/category words held out (0.12)"
    )
    objects.add_argument(
        "--held-object-share", type=float, default=0.08, help="share of the objects held out (0.08)"
    )
    objects.add_argument(
        "--vocabulary",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="write vocabulary.json: the captions' word-pieces and document frequencies (default: on)",
    )
    objects.add_argument(
        "--groups",
        default="",
        help="comma-separated Unicode emoji groups/subgroups to draw objects from, as emoji-test.txt "
        "names them ('food-fruit,animal-bird' or 'Food & Drink'; default: all seven)",
    )
    objects.add_argument("--df-plot", type=Path, help="also plot the word-pieces' document-frequency curve")
    parser.add_argument(
        "--progress", action=argparse.BooleanOptionalAction, default=True, help="progress bar (default: on)"
    )


def _generate(args: argparse.Namespace) -> dict[str, Path]:
    if args.kind == "shapes":
        from vsparta.scenes.shapes import generate_scenes

        return generate_scenes(
            args.out, n_train=args.train, n_val=args.val, n_test=args.test, image_size=args.size,
            seed=args.seed, progress=args.progress,
        )  # fmt: skip
    from vsparta.scenes.object_varied import TRAIN_LOOKS
    from vsparta.scenes.objects import generate_object_scenes

    counts = {"train": args.train, "val": args.val, "test": args.test}
    counts |= {"heldout_words": args.heldout_words, "heldout_objects": args.heldout_objects}
    counts |= {"shift": args.shift} if args.shift else {}
    return generate_object_scenes(
        args.out, counts, image_size=args.size, seed=args.seed, min_objects=args.min_objects,
        max_objects=args.max_objects, held_word_share=args.held_word_share,
        held_object_share=args.held_object_share, progress=args.progress, workers=args.workers,
        train_look=TRAIN_LOOKS[args.train_look],
        groups=tuple(g.strip() for g in args.groups.split(",") if g.strip()),
    )  # fmt: skip


def _report_vocabulary(out: Path, manifests: dict[str, Path], df_plot: Path | None) -> dict[str, Any]:
    from tokenizers import Tokenizer

    from vsparta.model.tokenization import resolve_text_model
    from vsparta.scenes.vocabulary import caption_vocabulary, plot_df_curve, write_vocabulary

    tokenizer = Tokenizer.from_file(str(Path(resolve_text_model()) / "tokenizer.json"))
    tokenizer.no_padding()  # the saved tokenizer pads and truncates to 128: neither is a caption word
    tokenizer.no_truncation()
    report = caption_vocabulary(manifests, tokenizer)
    path = write_vocabulary(out, report)
    total = report["all"]
    log.info(
        "captions: %d distinct words, %d distinct word-pieces; share of images holding the word-piece "
        "of rank 1/10/100/1000: %s -> %s",
        total["distinct_words"], total["distinct_word_pieces"],
        "/".join(str(total["df_curve"].get(r, "-")) for r in ("1", "10", "100", "1000")), path,
    )  # fmt: skip
    if df_plot is not None:
        log.info("wrote %s", plot_df_curve(report, df_plot))
    return report


def run(args: argparse.Namespace) -> int:
    from vsparta.scenes.emoji_catalog import SceneResourceMissing

    start = time.perf_counter()
    try:
        manifests = _generate(args)
    except SceneResourceMissing as exc:
        log.error("%s", exc)
        return 2
    except ValueError as exc:
        log.error("%s", exc)
        return 2
    took = time.perf_counter() - start
    total = sum(len(path.read_text(encoding="utf-8").splitlines()) for path in manifests.values())
    rate = total / took if took > 0 else float("inf")
    log.info("wrote %d images in %.1f s (%.0f images/s) under %s", total, took, rate, args.out)
    for split, path in manifests.items():
        log.info("  %s: %s", split, path)
    if args.kind == "objects" and args.vocabulary:
        _report_vocabulary(args.out, manifests, args.df_plot)
    return 0
