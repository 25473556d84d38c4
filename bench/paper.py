"""The paper's Table 2 (VisualSparta, top-1000 terms; CPU dense baseline), 10-core CPU, queries/s."""

from __future__ import annotations

PAPER_HARDWARE = "paper: 10-core CPU (Lu et al., SIGIR 2021, Table 2)"
PAPER_SIZES = {1_000: "1K", 5_000: "5K", 113_287: "113K", 1_000_000: "1M"}
PAPER_QPS = {
    "paper: VisualSparta (top-1000)": {1_000: 451.0, 5_000: 390.0, 113_287: 275.0, 1_000_000: 117.0},
    "paper: dense baseline (CPU)": {1_000: 177.0, 5_000: 162.0, 113_287: 5.4, 1_000_000: 0.3},
}


def paper_qps(series: str, n_docs: int) -> float | None:
    """The paper's figure at this size (113K matches 113,000-113,287), else None."""
    table = PAPER_QPS[series]
    if n_docs in table:
        return table[n_docs]
    if 113_000 <= n_docs <= 113_287:
        return table[113_287]
    return None
