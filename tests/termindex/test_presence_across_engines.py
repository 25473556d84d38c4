"""The presence test (``service.presence.beyond_chance``) says the same of a word on every engine:
Elasticsearch and OpenSearch keep 9 significant bits of a weight (truncated), the embedded engine
half floats, so images whose weights differ by less than a 9-bit step tie on the first (ordered by
id) and not on the second. Each engine line in turn (``search_server``) against the embedded one.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from elastic_testkit import SearchServer, fresh_index

from vsparta.service.presence import beyond_chance
from vsparta.termindex import TermDocument, open_index
from vsparta.termindex.oracle import round_like_elasticsearch

pytestmark = pytest.mark.elasticsearch

KEY = 7
# 34 weights in one 9-bit step [1, 1 + 2**-8), the heaviest on the first id (ids order the ties),
# none within half a half-float step of the next one; and two images either side of it.
IN_STEP = [1.0 + i * 1e-4 for i in range(34)]
WEIGHTS = {f"d{i:02d}": w for i, w in enumerate(reversed(IN_STEP))} | {"e-high": 1.02, "e-low": 0.99}
STRONG = [0.995, 1.0, 1.00005, 1.0008, 1.002, 1.0033, 1.004, 1.01, 1.03]
NEEDED = [1, 2, 5, 20, 35, 36, 37]


def _verdicts(index, deepest: bool = False) -> dict[tuple[float, int], bool]:
    """Each (strong weight, needed) verdict, from a search of ``needed`` results or, as the presence
    test's scan asks one search for all its weights, of the most any needs (``deepest``)."""
    out = {}
    for needed in NEEDED:
        hits = index.search({KEY: 1.0}, k=max(NEEDED) if deepest else needed, explain=True)
        for strong in STRONG:
            out[strong, needed] = beyond_chance(hits, KEY, strong, needed)
    return out


def test_every_engine_gives_the_same_verdicts(search_server: SearchServer, tmp_path: Path) -> None:
    assert len(set(round_like_elasticsearch(np.array(IN_STEP)).tolist())) == 1  # one 9-bit step
    docs = [TermDocument(doc_id, {KEY: w, 3: 0.5}, {}) for doc_id, w in WEIGHTS.items()]
    embedded = open_index(f"embedded:{tmp_path / 'idx'}", create=True)
    try:
        embedded.upsert(docs)
        expected = _verdicts(embedded)
        assert _verdicts(embedded, deepest=True) == expected
    finally:
        embedded.close()
    with fresh_index(search_server, "presence") as index:
        index.upsert(docs)
        index.refresh()
        assert _verdicts(index) == expected
        assert _verdicts(index, deepest=True) == expected  # the n-th of a deeper search is the same image
    # What they mean: at least `needed` images hold the strong weight's 9-bit step or more.
    step = {w: float(round_like_elasticsearch(w)) for w in [*WEIGHTS.values(), *STRONG]}
    for (strong, needed), said in expected.items():
        assert said == (sum(step[w] >= step[strong] for w in WEIGHTS.values()) >= needed), (strong, needed)
    assert {said for said in expected.values()} == {True, False}
