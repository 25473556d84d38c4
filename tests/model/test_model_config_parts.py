"""The configuration in parts (architecture, training, indexing): each default typed once, saved
files from before the split still load, and `vsparta index` takes the model's top_n by default."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

from vsparta.indexer.runner import MODEL_TOP_N, resolve_top_n
from vsparta.model.config_parts import (
    DEFAULT_TOP_N,
    PARTS,
    ArchitectureConfig,
    IndexingConfig,
    TrainingConfig,
    defaults,
)
from vsparta.model.configuration import VisualSpartaConfig

# A config.json as `vsparta train` saved it before the split (one flat object).
SAVED_BEFORE = {
    "architectures": ["VisualSpartaModel"],
    "attention_probs_dropout_prob": 0.1,
    "grid_size": 4,
    "hidden_act": "gelu",
    "hidden_size": 32,
    "image_size": 32,
    "intermediate_size": 64,
    "max_query_tokens": 64,
    "model_type": "visualsparta",
    "num_attention_heads": 2,
    "num_hidden_layers": 1,
    "pad_token_id": 0,
    "phi_bias_init": 0.1,
    "region_feature_dim": 32,
    "sparsity_weight": 0.0003,
    "stem": "patch",
    "stem_channels": [16, 32],
    "top_n": 300,
    "transformers_version": "4.46.0",
    "vocab_size": 30522,
}


def test_each_field_belongs_to_one_part() -> None:
    names = [f.name for part in PARTS for f in dataclasses.fields(part)]
    assert len(names) == len(set(names)) == len(defaults())
    assert DEFAULT_TOP_N == IndexingConfig().top_n == VisualSpartaConfig().top_n


def test_a_config_saved_before_the_split_loads(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(SAVED_BEFORE))
    cfg = VisualSpartaConfig.from_pretrained(tmp_path)
    assert cfg.hidden_size == 32 and cfg.stem_channels == [16, 32] and cfg.top_n == 300
    architecture = {f.name for f in dataclasses.fields(ArchitectureConfig)}
    assert cfg.architecture == dataclasses.replace(
        ArchitectureConfig(),
        **{k: tuple(v) if isinstance(v, list) else v for k, v in SAVED_BEFORE.items() if k in architecture},
    )
    assert cfg.training.sparsity_weight == 0.0003 and isinstance(cfg.training, TrainingConfig)
    assert cfg.indexing == IndexingConfig(top_n=300, max_query_tokens=64)
    cfg.save_pretrained(tmp_path / "again")
    saved = json.loads((tmp_path / "again" / "config.json").read_text())
    assert {k: saved[k] for k in SAVED_BEFORE if k not in {"transformers_version"}} == {
        k: v for k, v in SAVED_BEFORE.items() if k != "transformers_version"
    }


def test_index_takes_the_model_configs_top_n_unless_given() -> None:
    encoder = SimpleNamespace(config=VisualSpartaConfig(top_n=300))
    assert resolve_top_n(MODEL_TOP_N, encoder) == 300
    assert resolve_top_n(50, encoder) == 50 and resolve_top_n(None, encoder) is None  # None: all
    assert resolve_top_n(MODEL_TOP_N, None) == DEFAULT_TOP_N  # term documents, fake encoder


def test_vsparta_index_leaves_top_n_to_the_model_unless_given(tmp_path: Path) -> None:
    import argparse

    from vsparta.indexer.cli import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert parser.parse_args([str(tmp_path)]).top_n == MODEL_TOP_N
    assert parser.parse_args([str(tmp_path), "--top-n", "all"]).top_n is None
