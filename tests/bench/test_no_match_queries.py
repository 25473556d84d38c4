"""``vsparta bench no-match``'s **out** queries: captions naming only objects the index's captions
never name, a word's singular and plural counting as the same word."""

from __future__ import annotations

import json
from pathlib import Path

from vsparta.bench.no_match import absent_object_captions


def test_a_word_the_index_captions_in_the_other_number_is_not_absent(tmp_path: Path) -> None:
    index = tmp_path / "index.jsonl"
    records = [
        {"id": "a", "image": "a.png", "captions": ["two pizzas on a striped background", "a dog"]},
        {"id": "b", "image": "b.png", "captions": ["three motorcycles"]},
    ]
    index.write_text("".join(json.dumps(r) + "\n" for r in records))
    queries = tmp_path / "queries.txt"
    queries.write_text("# everyday objects\na pizza\ntwo dogs\na photo of a motorcycle\na sofa\ntwo sofas\n")
    kept = [c.text for c in absent_object_captions([queries], [index])]
    # "pizzas" and "motorcycles" hold "a pizza" and "a motorcycle"; "a dog" holds "two dogs"
    assert kept == ["a sofa", "two sofas"]
