"""Building blocks with BERT's parameter names, so BERT-family checkpoints load by name.

Written out here (instead of importing ``transformers``' BertEncoder) because that class's call
signature and mask conventions change between transformers releases; this math does not.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from vsparta.model.configuration import VisualSpartaConfig


def activation(name: str) -> nn.Module:
    if name == "gelu":
        return nn.GELU()
    if name == "gelu_new":
        return nn.GELU(approximate="tanh")
    if name == "relu":
        return nn.ReLU()
    raise ValueError(f"unknown activation {name!r}")


class TextEmbeddings(nn.Module):
    """E_tok + E_pos + E_seg, LayerNorm, dropout (paper Eq. 6, BERT's embedding block)."""

    def __init__(self, config: VisualSpartaConfig) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(
            config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id
        )
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids: torch.Tensor, token_type: int = 0) -> torch.Tensor:
        # input_ids [B, k] -> [B, k, H]
        positions = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)  # [1, k]
        types = torch.full_like(input_ids, token_type)
        x = (
            self.word_embeddings(input_ids)
            + self.position_embeddings(positions)
            + self.token_type_embeddings(types)
        )
        return self.dropout(self.LayerNorm(x))


class _SelfAttention(nn.Module):
    def __init__(self, config: VisualSpartaConfig) -> None:
        super().__init__()
        h = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.query = nn.Linear(h, h)
        self.key = nn.Linear(h, h)
        self.value = nn.Linear(h, h)
        self.dropout_p = config.attention_probs_dropout_prob

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        # x [B, L, H], mask [B, L] bool (True = attend) -> [B, L, H]
        b, n, h = x.shape
        d = h // self.num_heads

        def split(t: torch.Tensor) -> torch.Tensor:  # [B, L, H] -> [B, heads, L, d]
            return t.view(b, n, self.num_heads, d).transpose(1, 2)

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(d)  # [B, heads, L, L]
        scores = scores.masked_fill(~mask[:, None, None, :], torch.finfo(scores.dtype).min)
        probs = F.dropout(scores.softmax(dim=-1), p=self.dropout_p, training=self.training)
        return (probs @ v).transpose(1, 2).reshape(b, n, h)


class _DenseLayerNorm(nn.Module):
    """``dense`` -> dropout -> residual -> ``LayerNorm`` (BERT's post-LN output blocks)."""

    def __init__(self, config: VisualSpartaConfig, d_in: int) -> None:
        super().__init__()
        self.dense = nn.Linear(d_in, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dropout(self.dense(x)) + residual)


class _Attention(nn.Module):
    def __init__(self, config: VisualSpartaConfig) -> None:
        super().__init__()
        self.self = _SelfAttention(config)
        self.output = _DenseLayerNorm(config, config.hidden_size)


class _Intermediate(nn.Module):
    def __init__(self, config: VisualSpartaConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.act = activation(config.hidden_act)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.dense(x))


class EncoderLayer(nn.Module):
    def __init__(self, config: VisualSpartaConfig) -> None:
        super().__init__()
        self.attention = _Attention(config)
        self.intermediate = _Intermediate(config)
        self.output = _DenseLayerNorm(config, config.intermediate_size)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        a = self.attention.output(self.attention.self(x, mask), x)
        return self.output(self.intermediate(a), a)


class Encoder(nn.Module):
    """T_image (paper Eq. 9): a stack of post-LN transformer layers over the masked sequence."""

    def __init__(self, config: VisualSpartaConfig) -> None:
        super().__init__()
        self.layer = nn.ModuleList(EncoderLayer(config) for _ in range(config.num_hidden_layers))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        # x [B, L, H], mask [B, L] -> [B, L, H]
        for layer in self.layer:
            x = layer(x, mask)
        return x
