"""A floor per word for the match rule, calibrated on captioned images the index does not hold.

Why: one floor for every word cannot tell "mouse" written weakly onto a bird from "sparrow" written
onto a sparrow, when a model writes some words with large weights everywhere. Measured on the
half-catalog test (docs/no-match.md), a floor per word answers 3 to 8 times as many queries for
objects the index lacks "no match" at the same cost in recall.

A word's floor comes from the weights the model gives its first piece on **calibration images**
(captioned images outside the index, encoded by the same model): the ``quantile`` q of its weights
on the images whose captions use the word (positives), and the (1 - ``negative_quantile``) quantile
on the others (negatives), combined as their larger (``max``) or their mean (``mid``). A word on
fewer than ``min_positives`` positive images gets no floor of its own (the rule's ``min_weight``).

The floors belong to the model (its weights' scale), so they are saved in the model's folder
(``FILE``, written by ``vsparta calibrate``) and read by the service and ``vsparta search`` from
there (``ServiceSettings.match_rule``); keyed by token, so the file reads without the model.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from vsparta.core.errors import UsageError
from vsparta.model.query_tokenizer import QueryTokenizer
from vsparta.service.matching import words_of
from vsparta.termindex.base import TermIndex

FILE = "term-floors.json"
FORMAT = 1


@dataclass(frozen=True)
class FloorRule:
    """How a word's floor is made from its calibration weights (module docstring); the defaults
    are the rule ``vsparta bench no-match-floors --positives captions`` chose on each of three
    models of the half-catalog test (docs/no-match.md): the median where captions use the word,
    halfway to the 99th percentile where they do not."""

    quantile: float = 0.5
    negative_quantile: float | None = 0.01
    combine: Literal["max", "mid"] = "mid"
    min_positives: int = 3


def floors(
    weights: Mapping[int, np.ndarray], positive: Mapping[int, np.ndarray], rule: FloorRule
) -> dict[int, float]:
    """Each id's floor from its weight on every calibration image (0 where the image lacks it) and
    whether that image is a positive; ids with fewer than ``rule.min_positives`` are left out."""
    out = {}
    for term, w in weights.items():
        pos, neg = w[positive[term]], w[~positive[term]]
        if len(pos) < rule.min_positives:
            continue
        low = float(np.quantile(pos, rule.quantile))
        if rule.negative_quantile is None:
            out[term] = low
            continue
        high = float(np.quantile(neg, 1 - rule.negative_quantile)) if len(neg) else 0.0
        out[term] = max(low, high) if rule.combine == "max" else 0.5 * (low + high)
    return out


def caption_word_ids(tokenizer: QueryTokenizer, captions: Iterable[str]) -> set[int]:
    """The first needed piece of each word the captions use (the id the rule's floor is looked up
    by: ``service.matching``), punctuation left out."""
    ids: set[int] = set()
    for caption in captions:
        tokens = [tokenizer.id_to_token(i) for i in tokenizer.tokenize(caption)]
        ids.update(tokenizer.token_to_id(word.tokens[0]) for word in words_of(tokens))
    return ids - {None}  # type: ignore[arg-type]


def weight_table(
    shows: Sequence[set[int]], documents: Sequence[Mapping[int, float]]
) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray]]:
    """Per id an image shows: its weight on every calibration image and whether the image shows it
    (``shows[i]``: the ids image i is a positive for; ``documents[i]``: its term weights)."""
    terms = set().union(*shows) if shows else set()
    weights = {t: np.array([d.get(t, 0.0) for d in documents], dtype=np.float64) for t in terms}
    positive = {t: np.array([t in s for s in shows]) for t in terms}
    return weights, positive


def documents_of(index: TermIndex, ids: Sequence[str]) -> list[dict[int, float]]:
    """The term weights of each calibration image, in ``ids``' order; ``UsageError`` naming how
    many the index lacks (they must be indexed by the same model first)."""
    missing = set(ids) - index.existing_ids(ids)
    if missing:
        raise UsageError(
            f"{len(missing):,} of the {len(ids):,} calibration images are not in the index "
            f"(e.g. {sorted(missing)[0]!r}): index them with the same model first (`vsparta index`)"
        )
    return [dict(index.get(i).weights) for i in ids]


def save(
    folder: Path, table: Mapping[int, float], tokenizer: QueryTokenizer, rule: FloorRule, images: int
) -> Path:
    """Write the floors into the model ``folder``; the path written."""
    path = folder / FILE
    body = {
        "format": FORMAT,
        "rule": asdict(rule),
        "calibration_images": images,
        "floors": {tokenizer.id_to_token(t): round(v, 6) for t, v in sorted(table.items())},
    }
    path.write_text(json.dumps(body, indent=1) + "\n")
    return path


def floors_path(model_path: Path) -> Path:
    """Where a model's floors are: its folder, or the folder of its ``tokenizer.json``."""
    return (model_path if model_path.is_dir() else model_path.parent) / FILE


def load(model_path: Path, tokenizer: QueryTokenizer) -> dict[int, float]:
    """The model's floors by vocabulary id; none when it has no ``FILE``. A file this version
    cannot read raises ``UsageError`` naming it (a floor silently dropped would change answers)."""
    path = floors_path(model_path)
    if not path.is_file():
        return {}
    try:
        body: Any = json.loads(path.read_text())
        if body.get("format") != FORMAT:
            raise ValueError(f"format {body.get('format')!r}, this version reads {FORMAT}")
        table = {str(k): float(v) for k, v in body["floors"].items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UsageError(f"{path} is not a term-floors file this version reads: {exc}") from exc
    ids = {token: tokenizer.token_to_id(token) for token in table}
    unknown = sorted(t for t, i in ids.items() if i is None)
    if unknown:
        raise UsageError(f"{path} has floors for tokens the model's vocabulary lacks, e.g. {unknown[0]!r}")
    return {ids[token]: value for token, value in table.items()}  # type: ignore[misc]
