"""The one top-n cut: heaviest positive terms, query-impossible ids never kept, CSR on the host."""

from __future__ import annotations

import torch

from vsparta.model.topn import csr_to_dicts, drop_mask, select_top_terms, to_csr
from vsparta.termindex.base import heaviest_terms


def test_top_terms_keep_heaviest_positive_and_skip_dropped_ids() -> None:
    phi = torch.tensor([[0.0, 3.0, 1.0, 2.0, -1.0], [5.0, 0.0, 0.0, 0.0, 0.5]])
    ids, weights, counts = select_top_terms(phi, n=3, drop_ids=torch.tensor([3]))
    assert counts.tolist() == [2, 2]
    indptr, term_ids, w = to_csr(ids, weights, counts)
    assert indptr.tolist() == [0, 2, 4]
    assert csr_to_dicts(indptr, term_ids, w) == [{1: 3.0, 2: 1.0}, {0: 5.0, 4: 0.5}]
    # the indexer's form: the ids as a mask made once, the same cut
    masked = select_top_terms(phi, n=3, drop_ids=drop_mask(torch.tensor([3]), 5, "cpu"))
    assert all(torch.equal(a, b) for a, b in zip(masked, (ids, weights, counts), strict=True))


def test_all_terms_when_n_is_none_match_heaviest_terms_order() -> None:
    torch.manual_seed(0)
    phi = torch.randn(4, 50)
    ids, weights, counts = select_top_terms(phi, n=None)
    docs = csr_to_dicts(*to_csr(ids, weights, counts))
    for row, doc in zip(phi.tolist(), docs, strict=True):
        positive = {i: v for i, v in enumerate(row) if v > 0}
        assert list(doc) == [i for i, _ in heaviest_terms(positive)]
        assert doc == positive


def test_csr_of_images_without_terms_and_of_an_empty_batch() -> None:
    phi = torch.tensor([[-1.0, -2.0, 0.0], [0.5, -1.0, 2.0], [0.0, 0.0, 0.0]])
    indptr, term_ids, w = to_csr(*select_top_terms(phi, n=2))
    assert indptr.tolist() == [0, 0, 2, 2] and term_ids.tolist() == [2, 0] and w.tolist() == [2.0, 0.5]
    assert (indptr.dtype, term_ids.dtype, w.dtype) == ("int64", "int32", "float32")
    indptr, term_ids, w = to_csr(*select_top_terms(torch.zeros(0, 5), n=3))
    assert indptr.tolist() == [0] and len(term_ids) == 0 and len(w) == 0
