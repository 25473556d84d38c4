"""Top-n truncation keeps each image's heaviest terms, as indexing with a smaller n would."""

from __future__ import annotations

import numpy as np
import pytest

from vsparta.bench.synthetic import SyntheticSpec, load_or_generate
from vsparta.bench.topn import truncate_top_n


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


def test_trade_off_joins_recall_and_latency_by_n(tmp_path):
    from vsparta.bench import topn_report

    def vs(n, r1, terms):
        recall = {"300": {"R@1": r1, "R@5": 2 * r1, "R@10": 3 * r1}}
        return {
            "model": "VisualSparta",
            "top_n": n,
            "recall": recall,
            "ndcg@25": 0.6,
            "terms_per_image": terms,
        }

    rows = [vs(10, 5.0, 10.0), vs(50, 9.0, 50.0), vs("all", 10.0, 72.4), {"model": "random"}]
    eval_json = {"n_images": 300, "n_queries": 1500, "rows": rows}
    latency = [
        {
            "top_n": n,
            "engine": topn_report.PLOTTED_ENGINE,
            "p50_ms": n / 100,
            "agreement": 1.0,
            "bytes_per_term": 3.4,
        }
        for n in (10, 50, 100, 1000)
    ]
    table = topn_report.joined(latency, eval_json)
    assert [r["top_n"] for r in table] == ["10", "50", "100", "1000", "all"]
    assert table[0]["recall"]["R@1"] == 5.0 and "same_as_all" not in table[0]["recall"]
    assert table[2]["recall"]["R@1"] == 10.0 and table[2]["recall"]["same_as_all"]  # 100 >= 72.4 terms
    assert "recall" in table[4] and not table[4]["engines"]
    hardware = {"cpu": "test CPU", "cores": 2, "ram_gib": 4, "load_avg_at_start": [0.1]}
    meta = {"command": "vsparta bench topn", "hardware": hardware, "latency_size": "1,000",
            "latency_source": "synthetic", "recall_source": "eval.json"}  # fmt: skip
    topn_report.write_markdown(table, meta, tmp_path / "topn.md")
    text = (tmp_path / "topn.md").read_text()
    assert "| 100 (= all) | 72.4 | 10.0 | 20.0 | 30.0 | 0.600 | 1.000 | 1.000 | 3.40 |" in text
    topn_report.write_plot(table, meta, tmp_path / "topn.png")
    assert (tmp_path / "topn.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
