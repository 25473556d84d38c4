"""What the half-of-the-whole-catalog studies beside it read (docs/no-match.md): plural-floors.sh's
model, its 10,000-image index and 8,000 calibration scenes under .cache/hc-whole, and the answers
of the index's own test captions (in) and of the captions naming only the other half (out)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vsparta.bench import no_match
from vsparta.bench.no_match_floors import calibration
from vsparta.bench.search_runs import Caption, caption_queries
from vsparta.model.query_tokenizer import QueryTokenizer

S = Path(".cache/hc-whole")
SPEC = f"embedded:{S / 'index-words-10k'}"
MANIFESTS = [S / "a/train.jsonl", S / "a/test.jsonl", S / "a2-more.jsonl"]  # the index's images


@dataclass
class Study:
    tokenizer: QueryTokenizer
    table: Any  # term_floors.Calibration of the 8,000 calibration scenes, positives from captions
    captions: list[Caption]  # the in queries
    inside: list[no_match.Answer]
    outside: list[no_match.Answer]


def study() -> Study:
    """Load the model and calibration, and search every in and out query once (a few minutes)."""
    tokenizer = QueryTokenizer.from_pretrained(S / "model-words/final")
    table = calibration(
        tokenizer, S / "calib2/test.jsonl", f"embedded:{S / 'calib-index-words-8k'}", "captions"
    )
    captions = caption_queries(S / "a/test.jsonl")
    inside = no_match.collect(tokenizer, SPEC, captions)
    outside = no_match.collect(
        tokenizer, SPEC, no_match.absent_object_captions([S / "b/test.jsonl"], MANIFESTS)
    )
    return Study(tokenizer, table, captions, inside, outside)
