"""A floor per word for the match rule, calibrated on captioned images the index does not hold.

Why: one floor for every word cannot tell "mouse" written weakly onto a bird from "sparrow" written
onto a sparrow, when a model writes some words with large weights everywhere. Measured on the
half-catalog test (docs/no-match.md), a floor per word answers 3 to 8 times as many queries for
objects the index lacks "no match" at the same cost in recall.

**Calibration images** are captioned images outside the index, encoded by the same model. For each
word their captions use (on at least ``min_positives`` images, its positives; the others are its
negatives), a ``WordFloor`` says:

- which of its pieces an image must hold: those the model writes on at least ``piece_share`` of
  the positives (a strong model writes ``##cake`` on a cupcake but not ``cup``, ``tang`` on a
  tangerine but not ``##erine``; a word none of whose pieces reach that share keeps them all);
- which of those is the **key** (the one with the largest median weight on the positives), and
  its floor: the ``quantile`` q of the key's weights on the positives and the
  (1 - ``negative_quantile``) quantile on the negatives, combined as their larger (``max``) or
  their mean (``mid``);
- its presence test (``service.presence.Presence``): the ``presence_quantile`` of the key's
  weights on the positives as a strong weight, and the share of negatives reaching it; the same
  at each of the ``presence_scan`` quantiles (the test's scan); and how many negatives those shares
  were counted on (how sure they are).

A word the calibration never saw (its captions use neither it nor its singular on ``min_positives``
images) keeps every piece, and its key the larger of the rule's ``min_weight`` and its **unseen
floor**: the (1 - ``unseen_quantile``) quantile of the key's weight over every calibration image.
No caption there says the word, so the images the model writes it on most strongly show the thing
under another name ("a duck" for the one-piece "ducks") or a look-alike ("label" on tags), and
without this floor such words matched queries for objects the index lacks (docs/no-match.md).

The floors belong to the model (its weights' scale), so they are saved in the model's folder
(``FILE``, written by ``vsparta calibrate``) and read by the service and ``vsparta search`` from there
(``ServiceSettings.match_rule``); keyed by word and token, so the file reads without the model.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from vsparta.core.errors import UsageError
from vsparta.core.manifest import ManifestRecord
from vsparta.model.query_tokenizer import QueryTokenizer
from vsparta.service.matching import Word, WordFloor, needed_pieces, words_of
from vsparta.service.presence import Presence, null_rate
from vsparta.termindex.base import TermIndex

FILE = "term-floors.json"
FORMAT = 2  # 1: a floor per first word-piece (before 2026-11-27); read no more
UNSEEN_QUANTILE = 0.001  # chosen in docs/no-match.md ("A word the calibration never saw")
SCAN = (0.2, 0.35, 0.5, 0.8, 0.9, 0.95)  # the presence test's other quantiles (docs/no-match.md)


@dataclass(frozen=True)
class FloorRule:
    """How a word's pieces and floor are made from its calibration weights (module docstring); the
    quantiles are the rule ``vsparta bench no-match-floors --positives captions`` chose on each of
    three models of the half-catalog test (docs/no-match.md): the median where captions use the
    word, halfway to the 99th percentile where they do not."""

    quantile: float = 0.5
    negative_quantile: float | None = 0.01
    combine: Literal["max", "mid"] = "mid"
    min_positives: int = 3
    piece_share: float = 0.5
    presence_quantile: float | None = 0.65  # None: no presence test (docs/no-match.md chose 0.65)
    related_share: float | None = None  # None: every image whose captions lack the word is a negative
    unseen_quantile: float | None = UNSEEN_QUANTILE  # None: a word never seen keeps the rule's floor
    presence_scan: tuple[float, ...] = SCAN  # (): the presence test at its one strong weight


@dataclass(frozen=True)
class Calibration:
    """The calibration images as the floors need them: per word, its needed pieces' ids and which
    images are its positives; per id, its weight on every image (0 where the image lacks it)."""

    pieces: dict[str, tuple[int, ...]]
    positive: dict[str, np.ndarray]
    weights: dict[int, np.ndarray]
    written: Mapping[int, np.ndarray] = field(default_factory=dict)  # per id, its weights > 0, sorted
    count: int | None = None  # the images (else: the length of a weights column)

    @property
    def images(self) -> int:
        if self.count is not None:
            return self.count
        return len(next(iter(self.weights.values()))) if self.weights else 0


def caption_words(tokenizer: QueryTokenizer, captions: Iterable[str]) -> set[Word]:
    """The words the captions use (as ``service.matching`` merges a query's pieces), punctuation left out."""
    words: set[Word] = set()
    for caption in captions:
        words.update(words_of([tokenizer.id_to_token(i) for i in tokenizer.tokenize(caption)]))
    return words


def calibration_table(
    tokenizer: QueryTokenizer, shows: Sequence[set[Word]], documents: Sequence[Mapping[int, float]]
) -> Calibration:
    """``shows[i]``: the words calibration image i is a positive for; ``documents[i]``: its term weights."""
    pieces: dict[str, tuple[int, ...]] = {}
    for word in set().union(*shows) if shows else set():
        ids = tuple(tokenizer.token_to_id(t) for t in needed_pieces(word.tokens))
        if None not in ids:
            pieces[word.text] = ids  # type: ignore[assignment]
    texts = [{w.text for w in s} for s in shows]
    positive = {w: np.array([w in t for t in texts]) for w in pieces}
    ids = {i for p in pieces.values() for i in p}
    weights = {i: np.array([d.get(i, 0.0) for d in documents], dtype=np.float64) for i in ids}
    written: dict[int, list[float]] = {}
    for doc in documents:
        for i, w in doc.items():
            if w > 0:
                written.setdefault(i, []).append(w)
    sorted_ = {i: np.sort(np.array(v, dtype=np.float64)) for i, v in written.items()}
    return Calibration(pieces, positive, weights, sorted_, len(documents))


def unseen_floors(table: Calibration, quantile: float | None) -> dict[int, float]:
    """Per vocabulary id the model writes on the calibration images, the (1 - ``quantile``) quantile
    of its weight over all of them (0 where an image lacks it, numpy's linear interpolation): the
    floor of a word the calibration never saw, keyed by that id (module docstring). Ids whose
    quantile is 0 are left out; none for ``quantile`` None."""
    if quantile is None or not table.images:
        return {}
    out = {}
    for i, values in table.written.items():
        column = np.concatenate([np.zeros(table.images - len(values)), values])  # every image's weight
        level = float(np.quantile(column, 1 - quantile))
        if level > 0:
            out[i] = level
    return out


def word_floors(table: Calibration, rule: FloorRule) -> dict[str, WordFloor]:
    """Each word's pieces, key and floor (module docstring); words on fewer than
    ``rule.min_positives`` positive images are left out."""
    out = {}
    named = related_images(table, rule.related_share, rule.min_positives) if rule.related_share else {}
    for word, ids in table.pieces.items():
        pos = table.positive[word]
        if pos.sum() < rule.min_positives:
            continue
        other = ~pos & ~named[word] if word in named else ~pos  # its negatives
        written = tuple(i for i in ids if (table.weights[i][pos] > 0).mean() >= rule.piece_share) or ids
        key = max(written, key=lambda i: float(np.median(table.weights[i][pos])))
        low = float(np.quantile(table.weights[key][pos], rule.quantile))
        if rule.negative_quantile is None:
            floor = low
        else:
            neg = table.weights[key][other]
            high = float(np.quantile(neg, 1 - rule.negative_quantile)) if len(neg) else 0.0
            floor = max(low, high) if rule.combine == "max" else 0.5 * (low + high)
        presence = None
        if rule.presence_quantile is not None:
            weights, negatives = table.weights[key][pos], table.weights[key][other]
            levels = [_level(weights, negatives, q) for q in (rule.presence_quantile, *rule.presence_scan)]
            presence = Presence(*levels[0], more=tuple(levels[1:]), negatives=len(negatives))
        out[word] = WordFloor(written, key, floor, presence)
    return out


def _level(positives: np.ndarray, negatives: np.ndarray, quantile: float) -> tuple[float, float]:
    """A strong weight (the ``quantile`` of the positives' weights) and its null rate."""
    strong = float(np.quantile(positives, quantile))
    return strong, null_rate(int((negatives >= strong).sum()), len(negatives))


def related_images(table: Calibration, share: float, min_positives: int) -> dict[str, np.ndarray]:
    """Per word w, the calibration images whose captions use a word v that the same images' captions
    call w too on at least ``share`` of v's images, and at least twice as often as on all images: an
    alias or a kind of w ("lipstick" for "clothing"; not for "photo", which the captions say of
    everything). They show w under another name, so they are no look-alikes: left out of w's
    negatives (``FloorRule.related_share``), they no longer raise its null rate."""
    words = [w for w in table.pieces if table.positive[w].sum() >= min_positives]
    if not words:
        return {}
    shows = np.stack([table.positive[w] for w in words])  # [words, images]
    together = np.zeros((len(words), len(words)), dtype=np.int64)
    for image in shows.T:
        present = np.flatnonzero(image)
        together[np.ix_(present, present)] += 1
    counts = np.diag(together).copy()
    given = together / counts[:, None]  # [v, w]: the share of v's images whose captions say w too
    base = counts / shows.shape[1]
    related = (given >= share) & (given >= 2 * base[None, :]) & ~np.eye(len(words), dtype=bool)
    return {w: (shows[related[:, k]].any(axis=0)) for k, w in enumerate(words) if related[:, k].any()}


def documents_of(index: TermIndex, records: Sequence[ManifestRecord]) -> list[dict[int, float]]:
    """The term weights of each calibration image, in ``records``' order; ``UsageError`` naming how
    many the index lacks (they must be indexed by the same model first), or an image the index holds
    under the same id with other captions: an index keeps one image per id, so floors read from
    another image's weights would be silently wrong."""
    ids = [r.id for r in records]
    missing = set(ids) - index.existing_ids(ids)
    if missing:
        raise UsageError(
            f"{len(missing):,} of the {len(ids):,} calibration images are not in the index "
            f"(e.g. {sorted(missing)[0]!r}): index them with the same model first (`vsparta index`)"
        )
    documents = [index.get(i) for i in ids]
    for record, doc in zip(records, documents, strict=True):
        stored = (doc.metadata or {}).get("captions")
        if stored is not None and record.captions and list(stored) != list(record.captions):
            raise UsageError(
                f"the index holds another image under the calibration image id {record.id!r} (its "
                f"captions: {stored[0]!r}, the manifest's: {record.captions[0]!r}): index the "
                "calibration images into an index of their own"
            )
    return [dict(d.weights) for d in documents]


def save(
    folder: Path,
    table: Mapping[str, WordFloor],
    tokenizer: QueryTokenizer,
    rule: FloorRule,
    images: int,
    unseen: Mapping[int, float] | None = None,
) -> Path:
    """Write the floors into the model ``folder`` (``unseen``: ``unseen_floors``); the path written."""
    path = folder / FILE
    words = {
        word: {
            "pieces": [tokenizer.id_to_token(i) for i in f.pieces],
            "key": tokenizer.id_to_token(f.key),
            "floor": round(f.floor, 6),
        }
        | _presence_entry(f)
        for word, f in sorted(table.items())
    }
    body = {"format": FORMAT, "rule": asdict(rule), "calibration_images": images, "words": words}
    body["unseen"] = {tokenizer.id_to_token(i): round(v, 6) for i, v in sorted((unseen or {}).items())}
    path.write_text(json.dumps(body, indent=1) + "\n")
    return path


def floors_path(model_path: Path) -> Path:
    """Where a model's floors are: its folder, or the folder of its ``tokenizer.json``."""
    return (model_path if model_path.is_dir() else model_path.parent) / FILE


def load(model_path: Path, tokenizer: QueryTokenizer) -> dict[str, WordFloor]:
    """The model's calibrated words; none when it has no ``FILE``. A file this version cannot read
    raises ``UsageError`` naming it (a floor silently dropped would change answers)."""
    path = floors_path(model_path)
    if not path.is_file():
        return {}
    body = _body(path)
    images = body.get("calibration_images")
    counted = images if isinstance(images, int) and not isinstance(images, bool) and images > 0 else 0
    try:
        entries = {
            str(word): (
                [str(t) for t in e["pieces"]],
                str(e["key"]),
                float(e["floor"]),
                _presence(e, counted),
            )
            for word, e in body["words"].items()
        }
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UsageError(f"{path} is not a term-floors file this version reads: {exc}") from exc
    out = {}
    for word, (pieces, key, floor, presence) in entries.items():
        ids = tuple(tokenizer.token_to_id(t) for t in pieces)
        key_id = tokenizer.token_to_id(key)
        if None in ids or key_id is None or key_id not in ids:
            raise UsageError(
                f"{path} gives {word!r} pieces the model's vocabulary lacks or a key not among them"
            )
        out[word] = WordFloor(ids, key_id, floor, presence)  # type: ignore[arg-type]
    return out


def load_unseen(model_path: Path, tokenizer: QueryTokenizer) -> dict[int, float]:
    """The model's unseen floors by vocabulary id (``unseen_floors``); none without ``FILE`` or in a
    file calibrated before there were any (it reads as before). Tokens the vocabulary lacks raise
    ``UsageError``."""
    path = floors_path(model_path)
    if not path.is_file():
        return {}
    try:
        entries = {str(t): float(v) for t, v in _body(path).get("unseen", {}).items()}
    except (ValueError, TypeError, AttributeError) as exc:
        raise UsageError(f"{path} is not a term-floors file this version reads: {exc}") from exc
    ids = {t: tokenizer.token_to_id(t) for t in entries}
    lacking = sorted(t for t, i in ids.items() if i is None)
    if lacking:
        raise UsageError(f"{path} gives unseen floors to tokens the model's vocabulary lacks: {lacking[0]!r}")
    return {ids[t]: v for t, v in entries.items()}  # type: ignore[misc]


def _body(path: Path) -> dict[str, Any]:
    """The file's JSON, of this version's format (``UsageError`` naming the file otherwise)."""
    try:
        body: Any = json.loads(path.read_text())
        if not isinstance(body, dict) or body.get("format") != FORMAT:
            found = body.get("format") if isinstance(body, dict) else None
            raise ValueError(f"format {found!r}, this version reads {FORMAT}: run `vsparta calibrate` again")
    except ValueError as exc:
        raise UsageError(f"{path} is not a term-floors file this version reads: {exc}") from exc
    return body


def _presence_entry(f: WordFloor) -> dict[str, Any]:
    if f.presence is None:
        return {}
    more = {"scan": [[round(w, 6), rate] for w, rate in f.presence.more]} if f.presence.more else {}
    counted = {"negatives": f.presence.negatives} if f.presence.negatives else {}
    return {"strong": round(f.presence.weight, 6), "null_rate": f.presence.null_rate} | more | counted


def _presence(entry: Mapping[str, Any], counted: int = 0) -> Presence | None:
    """A word's presence test; none in a file calibrated before there was one (it reads as before).
    Without ``negatives`` (calibrated before 2026-12-05) its rates count as counted on ``counted``
    images (the file's calibration images: a few more than the word's negatives, nearly the same
    spread), so an old file is not judged as if its rates were exact; with neither, they are."""
    if "strong" not in entry:
        return None
    levels = [(float(entry["strong"]), float(entry["null_rate"]))]
    levels += [(float(w), float(rate)) for w, rate in entry.get("scan", [])]  # none before 2026-12-04
    for _, rate in levels:
        if not 0 < rate <= 1:
            raise ValueError(f"null_rate {rate} is not a share in (0, 1]")
    negatives = entry.get("negatives", counted)
    if not isinstance(negatives, int) or isinstance(negatives, bool) or negatives < 0:
        raise ValueError(f"negatives {negatives!r} is not a count of images")
    return Presence(*levels[0], more=tuple(levels[1:]), negatives=negatives)
