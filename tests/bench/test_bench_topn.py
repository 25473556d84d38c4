"""Top-n truncation keeps each image's heaviest terms, as indexing with a smaller n would."""

from __future__ import annotations

import numpy as np
import pytest

from bench.synthetic import SyntheticSpec, load_or_generate
from bench.topn import truncate_top_n


def test_truncation_keeps_heaviest_terms(tmp_path):
    full = load_or_generate(SyntheticSpec(20, n_terms=100, seed=2), tmp_path)
    cut = truncate_top_n(full, 10)
    assert cut.n_docs == 20 and cut.nnz == 200
    for row in range(20):
        idx, w = full.row(row)
        cidx, cw = cut.row(row)
        assert (np.diff(cidx.astype(np.int64)) > 0).all()
        expected = set(idx[np.argsort(-w, kind="stable")[:10]].tolist())
        assert set(cidx.tolist()) == expected
        assert np.array_equal(cw, w[np.isin(idx, cidx)])
    assert truncate_top_n(full, 500).nnz == full.nnz
    with pytest.raises(ValueError, match="top-n"):
        truncate_top_n(full, 0)
