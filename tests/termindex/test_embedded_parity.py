"""The embedded engine returns exactly the brute-force oracle's top 10 (ids and scores) through its
own machinery: many blocks and segments, both run layouts, deletes and merges, quantization steps
that differ between segments, near-ties inside one step, extreme stored weights. What every engine
must do (the conformance suite, ``test_engine_conformance.py``) runs on it too.

How ties and rounding are handled, explicitly:

- Rounding: the engine stores half floats; the oracle is built on ``round_like_embedded``
  weights, so both score the same numbers. No tolerance is needed for that.
- Float32: the engine accumulates in float32 only to find candidates; it keeps every document
  within a proven float32 error bound of the k-th score and rescores them in float64 in the
  oracle's order (ascending term id, numpy's log1p). Scores are therefore compared with ``==``.
- Ties: ~5% of documents copy another document's terms, so exact ties occur; both sides break
  them by id ascending, and the test checks that tied ranks actually occurred.
"""

from __future__ import annotations

import numpy as np
import pytest

from vsparta.termindex.base import MAX_QUERY_WEIGHT, TermDocument
from vsparta.termindex.embedded.index import EmbeddedIndex
from vsparta.termindex.oracle import (
    BruteForceOracle,
    random_documents,
    random_queries,
    round_like_elasticsearch,
    round_like_embedded,
)

N_DOCS = 3000
VOCAB = 2000


@pytest.fixture(scope="module")
def docs() -> list[TermDocument]:
    return random_documents(N_DOCS, vocab_size=VOCAB, seed=0)


@pytest.fixture(scope="module")
def queries() -> list[dict[int, float]]:
    return random_queries(300, vocab_size=VOCAB, seed=1)


@pytest.fixture(scope="module")
def oracle(docs) -> BruteForceOracle:
    return BruteForceOracle(docs, round_weights=round_like_embedded)


def _pairs(hits):
    return [(h.id, h.score) for h in hits]


def _assert_parity(index, oracle, queries, k=10) -> int:
    """Identical (id, score) lists; returns how many results lists contained an exact tie."""
    tied = 0
    for q in queries:
        got = _pairs(index.search(q, k=k))
        want = _pairs(oracle.search(q, k=k))
        assert got == want, f"query {q}"
        scores = [s for _, s in want]
        tied += any(a == b for a, b in zip(scores, scores[1:], strict=False))
    return tied


def test_parity_many_blocks_and_segments(tmp_path, docs, queries, oracle):
    # block_size 256 -> 12 blocks: block-max skipping is exercised; 3 segments: cross-segment top-k
    index = EmbeddedIndex(tmp_path / "idx", create=True, block_size=256)
    for part in (docs[:1000], docs[1000:2200], docs[2200:]):
        index.upsert(part)
    assert index.count() == N_DOCS
    assert index.segment_count() == 3
    seg = index._snap.segments[0]  # both run layouts are exercised: dense (frequent terms) and sparse
    assert ((np.diff(seg.doffsets) == 0) & (np.diff(seg.woffsets) > 0)).any()
    assert (np.diff(seg.doffsets) > 0).any()
    tied = _assert_parity(index, oracle, queries)
    assert tied >= 5, "the document set should produce exact ties in some top-10 lists"


def _run_encodings(seg) -> dict[str, int]:
    """How many runs of each layout a segment has (see termindex.embedded.postings)."""
    sparse = np.diff(seg.doffsets) > 0
    split = np.diff(seg.hoffsets) > 0
    return {
        "dense": int((~sparse & (np.diff(seg.woffsets) > 0)).sum()),
        "flat": int((sparse & ~split).sum()),
        "split": int(split.sum()),
        "split over several sub-blocks": int((np.diff(seg.hoffsets) > 1).sum()),
    }


def test_a_run_is_dense_when_more_than_half_of_its_block_has_the_term(tmp_path):
    """The layout rule (``embedded.build.choose_layout``) at its edge, one block of 256: a term in
    129 documents gets a dense run, one in 128 a sparse run; search agrees with the oracle on both
    (every document has term 3, so the candidates mix the two layouts)."""
    docs = []
    for i in range(256):
        weights = {3: 0.3 + (i * 7 % 11) / 5}
        if i < 129:
            weights[1] = 0.1 + (i * 5 % 13) / 3
        if i % 2:
            weights[2] = 0.2 + (i * 3 % 17) / 4
        docs.append(TermDocument(id=f"d{i:03d}", weights=weights))
    index = EmbeddedIndex(tmp_path / "idx", create=True, block_size=256)
    index.upsert(docs)
    seg = index._snap.segments[0]
    sparse_postings = np.diff(seg.doffsets)  # key = term * n_blocks + block, one block here
    assert sparse_postings[1] == 0 and seg.woffsets[2] - seg.woffsets[1] == 256  # dense: 129 of 256
    assert sparse_postings[2] == 128  # sparse: exactly half
    oracle = BruteForceOracle(docs, round_weights=round_like_embedded)
    queries = [{1: 1.0}, {2: 1.0}, {1: 1.0, 2: 2.0}, {1: 0.5, 2: 1.0, 3: 1.5}, {2: 3.0, 3: 1.0}]
    _assert_parity(index, oracle, queries, k=10)
    _assert_parity(index, oracle, queries, k=200)


def _stored(doc: TermDocument) -> dict[int, float]:
    return {t: float(round_like_embedded(w)) for t, w in doc.weights.items()}


def test_parity_with_every_id_encoding_through_deletes_and_merges(tmp_path, docs, queries):
    """Dense, flat and split runs in one segment (3000 documents = 12 sub-blocks of 256), then
    segments merged across deletes: search, get and similar stay exact on every path."""
    index = EmbeddedIndex(tmp_path / "idx", create=True)
    index.upsert(docs[:2000])
    index.upsert(docs[2000:])
    index.compact()
    encodings = _run_encodings(index._snap.segments[0])
    assert all(n > 0 for n in encodings.values()), encodings
    _assert_parity(index, BruteForceOracle(docs, round_weights=round_like_embedded), queries[:100])
    for d in docs[::97]:
        assert index.get(d.id).weights == _stored(d)
    gone = {d.id for d in docs[::3]}
    index.delete(sorted(gone))
    index.upsert(docs[:5])  # re-added: a second segment, older copies tombstoned
    index.compact()
    kept = [d for d in docs if d.id not in gone or d in docs[:5]]
    assert index.count() == len(kept)
    _assert_parity(index, BruteForceOracle(kept, round_weights=round_like_embedded), queries[100:200])
    for d in kept[::89]:
        assert index.get(d.id).weights == _stored(d)


def test_parity_after_compaction(tmp_path, docs, queries, oracle):
    index = EmbeddedIndex(tmp_path / "idx", create=True, block_size=512)
    for start in range(0, N_DOCS, 500):
        index.upsert(docs[start : start + 500])
    assert index.segment_count() == 6
    index.compact()
    assert index.segment_count() == 1
    _assert_parity(index, oracle, queries[:100])


def test_round_like_elasticsearch_keeps_nine_significant_bits():
    assert round_like_elasticsearch(1.0) == 1.0
    assert round_like_elasticsearch(1.0 + 2.0**-8) == 1.0 + 2.0**-8  # 8 stored mantissa bits
    assert round_like_elasticsearch(1.0 + 2.0**-9) == 1.0  # the 9th is truncated
    assert round_like_elasticsearch(1.0 + 2.0**-8 - 2.0**-20) == 1.0  # toward zero, not nearest
    w = np.random.default_rng(0).lognormal(size=10_000)
    r = round_like_elasticsearch(w)
    assert np.all(r <= w) and np.all((w - r) / w < 2.0**-8)
    assert np.all(r.astype(np.float32).view(np.uint32) & 0x7FFF == 0)


def test_round_like_embedded_is_half_float():
    w = np.random.default_rng(0).lognormal(size=10_000)
    r = round_like_embedded(w)
    assert np.all(np.abs(r - w) / w <= 2.0**-11)
    assert np.array_equal(r, w.astype(np.float16).astype(np.float64))
    assert round_like_embedded(1e6) == 65504.0
    assert round_like_embedded(1e-12) == 2.0**-24


def test_near_ties_inside_one_quantization_step(tmp_path):
    """Candidates come from coarse upper bounds (8-bit quantized log1p); documents whose weights
    differ far below one quantization step must still come back in exact order."""
    rng = np.random.default_rng(3)
    n = 2000
    weights = 2.0 + rng.permutation(n) * 2.0**-9  # distinct half floats, few distinct 8-bit bounds
    docs = [
        TermDocument(f"n{i:04d}", {3: float(w), 4: float(weights[(i * 7) % n]), 9 + i % 5: 1.0})
        for i, w in enumerate(weights)
    ]
    docs += [TermDocument(f"dup{i}", dict(docs[i].weights)) for i in range(0, n, 97)]  # exact ties
    index = EmbeddedIndex(tmp_path / "idx", create=True, block_size=256)
    index.upsert(docs)
    oracle = BruteForceOracle(docs, round_weights=round_like_embedded)
    for q in [{3: 1.0}, {3: 1.0, 4: 2.0}, {3: 0.37, 4: 1.91, 9: 0.5}, {4: 3.0, 10: 1.0, 11: 1.0}]:
        for k in (1, 10, 25):
            assert _pairs(index.search(q, k=k)) == _pairs(oracle.search(q, k=k)), (q, k)


def test_parity_at_the_query_weight_bound(tmp_path, docs, queries):
    """Every query weight at ``MAX_QUERY_WEIGHT`` (the largest a request may carry), against
    documents that include the largest and smallest storable weights: still exact, ``==``."""
    extreme = [
        TermDocument(
            f"x{i}",
            {
                t: w
                for t, w in zip(
                    range(i, i + 8), (65504.0, 1e6, 2.0**-24, 1e-9, 3.0, 0.5, 70000.0, 1.0), strict=True
                )
            },
        )
        for i in range(0, 40, 3)
    ]
    both = docs + extreme
    index = EmbeddedIndex(tmp_path / "idx", create=True, block_size=256)
    index.upsert(both[:1500])
    index.upsert(both[1500:])
    oracle = BruteForceOracle(both, round_weights=round_like_embedded)
    bound = [{t: MAX_QUERY_WEIGHT for t in q} for q in queries[:80]]
    bound += [{t: MAX_QUERY_WEIGHT for t in range(i, i + 12)} for i in range(0, 40, 5)]
    _assert_parity(index, oracle, bound)
    _assert_parity(index, oracle, bound[:20], k=1)


def test_parity_across_segments_with_different_quantization_steps(tmp_path, docs, queries):
    """Each segment quantizes with a step from its own largest weight; the k-th bound carried
    between segments is converted from one step to the next, so results stay exact, in one
    segment or several."""
    scaled = [
        TermDocument(f"big{i}", {t: w * 3000.0 for t, w in d.weights.items()})
        for i, d in enumerate(docs[:800])
    ]
    small = [
        TermDocument(f"small{i}", {t: w * 0.01 for t, w in d.weights.items()})
        for i, d in enumerate(docs[800:1600])
    ]
    index = EmbeddedIndex(tmp_path / "idx", create=True, block_size=256)
    index.upsert(docs[1600:])
    index.upsert(scaled)
    index.upsert(small)
    steps = [s.quant_step for s in index._snap.segments]
    assert len(set(steps)) == 3 and max(steps) > 20 * min(steps), steps
    oracle = BruteForceOracle(docs[1600:] + scaled + small, round_weights=round_like_embedded)
    _assert_parity(index, oracle, queries[:100])
    index.compact()
    _assert_parity(index, oracle, queries[100:160], k=25)
