"""Shapes and the score formula (paper Eq. 10-12, 14-15) against independent computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from vsparta.model.data import pad_queries
from vsparta.model.regions import Regions, collate_regions


def _loop_score(q_emb: np.ndarray, q_len: int, h: np.ndarray, h_len: int, bias: float) -> float:
    """Eq. 10-12 with plain Python loops over tokens and positions."""
    total = 0.0
    for i in range(q_len):
        y = max(float(np.dot(q_emb[i], h[j])) for j in range(h_len))
        total += math.log(max(y + bias, 0.0) + 1.0)
    return total


def test_shapes(tiny_model) -> None:
    pixels = torch.randn(3, 3, 32, 32)
    h, mask = tiny_model.encode_images(pixel_values=pixels)
    assert h.shape == (3, 16, 32) and mask.shape == (3, 16) and mask.all()
    ids, qmask = pad_queries([[2417, 14291], [2630], [2417, 2417, 3608, 2187]])
    assert tiny_model.query_embeddings(ids).shape == (3, 4, 32)
    assert tiny_model.score(ids, qmask, h, mask).shape == (3, 3)
    assert tiny_model.term_weights(h, mask).shape == (3, tiny_model.config.vocab_size)


def test_score_matches_loops_with_masks_and_bias(tiny_model) -> None:
    torch.manual_seed(1)
    regs = [
        Regions(np.random.rand(5, 16), np.array([[0.1, 0.1, 0.5, 0.5]] * 5), ["red cube"]),
        Regions(np.random.rand(2, 16), np.array([[0.0, 0.0, 1.0, 1.0]] * 2), []),
    ]
    batch = collate_regions(regs, tiny_model.query_tokenizer().tokenize, 16, 100, 8)
    with torch.no_grad():
        tiny_model.phi_bias.fill_(0.3)
        h, mask = tiny_model.encode_images(regions=batch)
        token_lists = [[2417, 14291, 2417], [2630]]  # a repeated token counts twice
        ids, qmask = pad_queries(token_lists)
        got = tiny_model.score(ids, qmask, h, mask).numpy()
        emb = tiny_model.word_embeddings.weight.numpy()
        tiny_model.phi_bias.fill_(0.0)
    assert mask.tolist()[1][2:5] == [False, False, False]  # padding of the 2nd image is masked
    for qi, toks in enumerate(token_lists):
        for bi in range(2):
            valid = h[bi][mask[bi]].numpy()
            want = _loop_score(emb[toks], len(toks), valid, len(valid), 0.3)
            assert got[qi, bi] == pytest.approx(want, rel=1e-5, abs=1e-5)


def test_sparse_index_score_equals_model_score(tiny_model) -> None:
    """Σ count · log(1 + φ[w]) over the n=all term weights == the model's f(q, v)."""
    torch.manual_seed(2)
    with torch.no_grad():
        tiny_model.phi_bias.fill_(0.5)  # many positive φ, so the test is not trivially zero
        h, mask = tiny_model.encode_images(pixel_values=torch.randn(4, 3, 32, 32))
        phi = tiny_model.term_weights(h, mask, chunk_size=1000)  # chunking must not change anything
        qtok = tiny_model.query_tokenizer()
        texts = ["a red red cube left of a blue ball", "green", "the yellow circle on the right"]
        ids, qmask = pad_queries([qtok.tokenize(t) for t in texts])
        model_scores = tiny_model.score(ids, qmask, h, mask).numpy()
        terms = tiny_model.top_terms(phi, None)
        tiny_model.phi_bias.fill_(0.0)
    for qi, text in enumerate(texts):
        for bi in range(4):
            index_score = sum(
                c * math.log1p(terms[bi].get(i, 0.0)) for i, c in qtok.query_weights(text).items()
            )
            assert index_score == pytest.approx(float(model_scores[qi, bi]), rel=1e-5)
    assert phi.shape == (4, tiny_model.config.vocab_size)


def test_term_weights_chunking_is_exact(tiny_model) -> None:
    with torch.no_grad():
        h, mask = tiny_model.encode_images(pixel_values=torch.randn(2, 3, 32, 32))
        a = tiny_model.term_weights(h, mask, chunk_size=777)
        b = tiny_model.term_weights(h, mask, chunk_size=100000)
        emb = tiny_model.word_embeddings.weight
        direct = torch.relu((h @ emb.T).amax(dim=1) + tiny_model.phi_bias)
    assert torch.allclose(a, b) and torch.allclose(a, direct, atol=1e-5)


def test_top_terms_semantics(tiny_model) -> None:
    v = tiny_model.config.vocab_size
    phi = torch.zeros(2, v)
    phi[0, [2417, 2630, 3608]] = torch.tensor([0.5, 2.0, 1.0])
    phi[0, 101] = 9.0  # [CLS]: no query contains it, so it is not indexed
    phi[1, 2417] = -1.0
    top2 = tiny_model.top_terms(phi, 2)
    assert top2[0] == {2630: 2.0, 3608: 1.0}
    assert top2[1] == {}  # values <= 0 are dropped
    assert tiny_model.top_terms(phi, None)[0] == {2630: 2.0, 3608: 1.0, 2417: 0.5}
    with pytest.raises(ValueError, match="positive"):
        tiny_model.top_terms(phi, 0)


def test_query_embeddings_have_no_context(tiny_model) -> None:
    """Eq. 1: the same token gets the same vector wherever it stands."""
    ids = torch.tensor([[2417, 2630, 3608], [3608, 2630, 2417]])
    e = tiny_model.query_embeddings(ids)
    assert torch.equal(e[0, 0], e[1, 2]) and torch.equal(e[0, 1], e[1, 1])
