"""`vsparta calibrate MANIFEST --model M --index SPEC`: a floor per word for the match rule, from
captioned images outside the searched index (``service.term_floors``), saved in the model folder.

The images are encoded by the same model: given ``--index``, an index that already holds them
(any engine; an index of their own, so that none of them is ever an answer; torch-free); without
it, ``vsparta index`` encodes them into a temporary embedded index first (the ``model`` extra),
skipping and reporting the files it cannot read. The service and ``vsparta search`` then use the
floors whenever they serve that model (``match_term_floors``).
"""

from __future__ import annotations

import argparse
import logging
import tempfile
from pathlib import Path

from vsparta.core.errors import UsageError
from vsparta.core.manifest import ManifestRecord, read_manifest
from vsparta.model.query_tokenizer import QueryTokenizer
from vsparta.model.resolve import resolve_model_path
from vsparta.service.term_floors import (
    FloorRule,
    calibration_table,
    caption_words,
    documents_of,
    save,
    unseen_floors,
    word_floors,
)
from vsparta.termindex import open_index

log = logging.getLogger(__name__)
DEFAULT = FloorRule()


def _share(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text} is not a share between 0 and 1")
    return value


def _share_or_none(text: str) -> float | None:
    return None if text == "none" else _share(text)


def _listed(values: tuple[float, ...]) -> str:
    return ",".join(f"{v:g}" for v in values)


def _shares(text: str) -> tuple[float, ...]:
    return () if text == "none" else tuple(_share(t) for t in text.split(","))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("manifest", type=Path, help="JSONL of captioned images outside the searched index")
    parser.add_argument("--model", required=True, help="the saved model folder the floors are for")
    parser.add_argument(
        "--index",
        help="backend spec already holding the manifest's images, indexed by that model (e.g. "
        "embedded:DIR); default: encode them into a temporary index first",
    )  # fmt: skip
    options = (
        ("--quantile", _share, DEFAULT.quantile,
         "a floor is this quantile of the word's weights where captions use it"),
        ("--negative-quantile", _share, DEFAULT.negative_quantile,
         "p: the floor is also held against the (1 - p) quantile of its weights where captions do not"),
        ("--min-positives", int, DEFAULT.min_positives,
         "a word used by fewer captioned images keeps the one floor"),
        ("--piece-share", _share, DEFAULT.piece_share,
         "a word's piece counts when the model writes it on this share of the images captions use it for"),
    )  # fmt: skip
    for flag, kind, default, text in options:
        parser.add_argument(flag, type=kind, default=default, help=f"{text} (default: %(default)s)")
    parser.add_argument(
        "--presence-quantile", type=_share_or_none, default=DEFAULT.presence_quantile,
        help="a word's strong weight for the presence test (service/presence.py): this quantile of its "
        "weights where captions use it; none: no presence test (default: %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--presence-scan", type=_shares, default=DEFAULT.presence_scan,
        help="comma list of other quantiles the presence test also tries, each at alpha / their count "
        f"(docs/no-match.md); none: the one strong weight (default: {_listed(DEFAULT.presence_scan)})",
    )  # fmt: skip
    parser.add_argument(
        "--related-share", type=_share_or_none, default=DEFAULT.related_share,
        help="images whose captions use a word that captions call w too on this share of its images (an "
        "alias or a kind of w) are no negatives of w; none: every image whose captions lack w is one "
        "(default: %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--unseen-quantile", type=_share_or_none, default=DEFAULT.unseen_quantile,
        help="p: a word no caption here uses needs its key piece's (1 - p) quantile over every image "
        "(its unseen floor); none: the rule's one floor (default: %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--combine", choices=("mid", "max"), default=DEFAULT.combine,
        help="the two quantiles' mean or their larger (default: %(default)s)",
    )  # fmt: skip


def _encode(args: argparse.Namespace, model: Path, folder: Path) -> str:
    """``vsparta index`` the manifest into an embedded index in ``folder``; its spec."""
    spec = f"embedded:{folder / 'index'}"
    argv = ["index", str(args.manifest), "--backend", spec, "--model", str(model),
            "--failures", str(folder / "failures.jsonl"), "--no-progress"]  # fmt: skip
    if args.run_command(argv) != 0:
        raise UsageError(f"the calibration images of {args.manifest} could not be encoded (see above)")
    return spec


def _encoded(records: list[ManifestRecord], indexed: set[str]) -> list[ManifestRecord]:
    kept = [r for r in records if r.id in indexed]
    if not kept:
        raise UsageError("none of the calibration images could be read")
    if len(kept) < len(records):
        log.warning(
            "%d of %d calibration images could not be read: left out", len(records) - len(kept), len(records)
        )
    return kept


def run(args: argparse.Namespace) -> int:
    model = Path(resolve_model_path(args.model, needs="tokenizer.json", hub=False))
    if args.min_positives < 1:
        raise UsageError(f"--min-positives must be 1 or more, not {args.min_positives}")
    rule = FloorRule(
        args.quantile, args.negative_quantile, args.combine, args.min_positives, args.piece_share,
        args.presence_quantile, args.related_share, args.unseen_quantile, args.presence_scan,
    )  # fmt: skip
    tokenizer = QueryTokenizer.from_pretrained(model)
    records = read_manifest(args.manifest)
    if not records:
        raise UsageError(f"{args.manifest} lists no images")
    with tempfile.TemporaryDirectory(prefix="vsparta-calibrate-") as scratch:
        spec = args.index or _encode(args, model, Path(scratch))
        with open_index(spec) as index:
            if args.index is None:  # the files `vsparta index` could not read are skipped, reported
                records = _encoded(records, index.existing_ids([r.id for r in records]))
            documents = documents_of(index, records)
    shows = [caption_words(tokenizer, r.captions) for r in records]
    calibration = calibration_table(tokenizer, shows, documents)
    table, unseen = word_floors(calibration, rule), unseen_floors(calibration, rule.unseen_quantile)
    path = save(model, table, tokenizer, rule, len(records), unseen)
    log.info(
        "%d words have a floor of their own and %d word-pieces an unseen floor, from %d images: %s",
        len(table), len(unseen), len(records), path,
    )  # fmt: skip
    return 0
