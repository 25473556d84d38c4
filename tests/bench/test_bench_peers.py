"""Peer adapters index our documents faithfully (tiny sets; correctness only, nothing timed)."""

from __future__ import annotations

import numpy as np
import pytest

from vsparta.bench import exact
from vsparta.bench.engines.dense import DIM, FaissDenseAdapter, NumpyDenseAdapter
from vsparta.bench.engines.pisa import PisaAdapter
from vsparta.bench.engines.scipy_exact import ScipyAdapter
from vsparta.bench.engines.seismic import write_seismic_bin
from vsparta.bench.synthetic import SyntheticSpec, generate_queries, load_or_generate


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return load_or_generate(SyntheticSpec(300, n_terms=150, seed=5), tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="module")
def oracle(corpus):
    return exact.StreamingOracle(corpus, generate_queries(20, seed=5), 10, chunk=70)


def test_pisa_quantized_top10_close_to_oracle(corpus, oracle, tmp_path):
    pisa = PisaAdapter("maxscore")
    pisa.check(corpus, 2**40)
    pisa.build(corpus, tmp_path)
    pisa.set_queries(oracle.queries)
    one = [pisa.search(i, 10) for i in range(20)]
    assert pisa.search_many(range(20), 10, 2) == one
    agree = np.mean([oracle.agreement(i, r) for i, r in enumerate(one)])
    assert agree >= 0.9  # 8-bit impacts reorder only near-ties
    assert pisa.disk_bytes() > 0


def test_seismic_binary_format_round_trips(corpus, tmp_path):
    path = tmp_path / "docs.bin"
    write_seismic_bin(corpus.head(7), path, chunk=3)
    words = np.fromfile(path, dtype=np.uint32)
    assert words[0] == 7
    pos = 1
    for row in range(7):
        ids, w = corpus.row(row)
        n = int(words[pos])
        assert n == len(ids)
        assert np.array_equal(words[pos + 1 : pos + 1 + n], ids)
        assert np.allclose(words[pos + 1 + n : pos + 1 + 2 * n].view(np.float32), np.log1p(w))
        pos += 1 + 2 * n
    assert pos == len(words)


def test_scipy_engine_matches_oracle(corpus, oracle):
    scipy_engine = ScipyAdapter()
    scipy_engine.build(corpus, None)
    scipy_engine.set_queries(oracle.queries)
    assert all(oracle.agreement(i, scipy_engine.search(i, 10)) == 1.0 for i in range(20))
    assert scipy_engine.search_many(range(20), 10, 2) == [scipy_engine.search(i, 10) for i in range(20)]


@pytest.mark.parametrize("adapter_cls", [NumpyDenseAdapter, FaissDenseAdapter])
def test_dense_baselines_find_the_true_nearest(corpus, adapter_cls):
    a = adapter_cls(seed=0)
    a.build(corpus, None)
    a.set_queries([{1000: 1.0}] * 3)
    truth = np.argsort(-(a.vectors @ a.qvecs[1]), kind="stable")[:10].tolist()
    assert a.search(1, 10) == truth
    assert a.search_many([0, 1, 2], 10, 2)[1] == truth
    assert a.disk_bytes() == corpus.n_docs * DIM * 4
