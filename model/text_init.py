"""Initialising from a BERT-family text model (MiniLM by default): its weights and dimensions.

Why: a model whose token embeddings start from a pretrained text model already places unseen
query words near related ones; ``VisualSpartaPreTrainedModel.init_from_text_model`` copies them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from vsparta.model.configuration import VisualSpartaConfig
from vsparta.model.tokenization import resolve_text_model


def load_bert_state(location: str) -> dict[str, torch.Tensor]:
    """State dict of a BERT-family model with the ``bert.``/``model.`` prefix removed."""
    folder = Path(location)
    if (folder / "model.safetensors").exists():
        from safetensors.torch import load_file

        raw = load_file(str(folder / "model.safetensors"))
    else:
        from transformers import AutoModel

        raw = AutoModel.from_pretrained(location).state_dict()
    state: dict[str, torch.Tensor] = {}
    for key, value in raw.items():
        for prefix in ("bert.", "model.", "roberta."):
            if key.startswith(prefix):
                key = key[len(prefix) :]
        state[key] = value
    if "embeddings.word_embeddings.weight" not in state:
        raise ValueError(f"{location} does not look like a BERT-family model (no embeddings.word_embeddings)")
    return state


def copy_prefix(
    state: dict[str, torch.Tensor], prefix: str, module: nn.Module, allow_extra: bool = False
) -> int:
    """Copy ``state[prefix + name]`` into each parameter of ``module``; shapes must match exactly."""
    copied = 0
    targets = dict(module.named_parameters())
    for name, param in targets.items():
        key = prefix + name
        if key not in state:
            raise ValueError(f"the text model has no tensor {key!r}")
        src = state[key]
        if tuple(src.shape) != tuple(param.shape):
            raise ValueError(
                f"{key}: text model shape {tuple(src.shape)} != model shape {tuple(param.shape)}; "
                "make the config's text dimensions match the text model (see config_for_text_model)"
            )
        with torch.no_grad():
            param.copy_(src.to(param.dtype))
        copied += 1
    return copied


def text_model_dimensions(path_or_hub_id: str | Path | None = None) -> dict[str, Any]:
    """The transformer dimensions of a BERT-family model, as config fields (so weights can be copied)."""
    from transformers import AutoConfig

    text = AutoConfig.from_pretrained(resolve_text_model(path_or_hub_id))
    keys = (
        "vocab_size",
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "intermediate_size",
        "hidden_act",
        "max_position_embeddings",
        "type_vocab_size",
        "layer_norm_eps",
        "pad_token_id",
    )
    return {k: getattr(text, k) for k in keys if getattr(text, k, None) is not None}


def config_for_text_model(path_or_hub_id: str | Path | None = None, **overrides: Any) -> VisualSpartaConfig:
    """A config whose transformer dimensions match a BERT-family model (so it can be initialized from it)."""
    return VisualSpartaConfig(**{**text_model_dimensions(path_or_hub_id), **overrides})


def reduced_word_embeddings(location: str, vocab_size: int, width: int) -> torch.Tensor:
    """A text model's word embeddings on their ``width`` principal axes (centred; the first axes
    keep the most variance, so near words stay near): ``[vocab_size, width]``."""
    table = load_bert_state(location)["embeddings.word_embeddings.weight"].float()
    if table.shape[0] != vocab_size:
        raise ValueError(
            f"{location} has {table.shape[0]:,} word embeddings; the config's vocab_size is {vocab_size:,}"
        )
    if width > table.shape[1]:
        raise ValueError(
            f"{location}'s word embeddings have {table.shape[1]} dimensions; hidden_size is {width}"
        )
    centred = table - table.mean(dim=0, keepdim=True)
    _, _, axes = torch.linalg.svd(centred, full_matrices=False)
    return centred @ axes[:width].T
