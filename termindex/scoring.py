"""How a score is made, the one home of its two formulas: the saturation of a stored weight and the IDF.

## The saturation, ``saturate(w) = log(1 + w)``

The paper's Eq. 12/15: ``f(q, v) = sum over query tokens of log(1 + w)``, each token counted once per
occurrence (its boost). This module is the one home of that function, in every form the code needs:
a Python float (``saturate``: the embedded engine's stored bounds are built from it, the same
bits on every CPU), numpy arrays (``saturate_array``: the oracle's and the embedded engine's
rescoring tables), torch tensors (``saturate_tensor``:
training and evaluation), the Elasticsearch ``rank_feature`` clause that computes it
(``engine_clause``), and the words the service shows (``TEXT``).

Changing the function: change it here (every form), and bump the embedded engine's
``FORMAT_VERSION`` (``termindex/embedded/format.py``): its segments store 8-bit quantized upper
bounds of ``saturate(w)`` (``quant.u8``, ``quant_step``), valid only for the function they were
written with. The float and numpy forms keep ``math.log1p`` and ``numpy.log1p`` apart on purpose:
they differ in the last bit for some inputs, and the exactness tests compare bit for bit.

## The IDF: query-side term weights from the index's own statistics

A text query's tokens all count alike under the paper's rule (weight = how often the token occurs),
so a word that every image has ("a", "the", "of") adds to every score as much as a rare, telling
word. OpenSearch's inference-free neural sparse mode (the ``opensearch-neural-sparse-encoding-doc``
models, Geng et al. 2024, arXiv:2411.04403) instead weights each query token by its inverse
document frequency (``idf.json`` shipped with the model, computed on its training corpus). Here
the frequencies come from the index being searched, so nothing but the index is needed at query
time and the weights follow the collection:

    weight(t) = count(t in query) * idf(t),   idf(t) = ln(1 + (N - df_t + 0.5) / (df_t + 0.5))

with N the documents of the index and df_t those that hold t. That ``idf`` is Lucene's BM25 one
(``BM25Similarity.idf``; Robertson-Sparck Jones with the ``1 +`` that keeps it positive): a term in
every document still weighs a little more than 0 (every engine refuses weights <= 0), an absent
term weighs most (it matches nothing, so that costs nothing). SPLADE's document-only variant
(SPLADE-doc, Formal et al. 2021, "SPLADE v2", arXiv:2109.10086) scores a query as its bag of
tokens, each weighing 1: our default (``counts``); the IDF is what the OpenSearch work adds to it.

Each weight is rounded to float32 here, once: Elasticsearch and OpenSearch keep a clause's
``boost`` as a float32, so the weight the engine multiplies with is exactly the one the
explanation multiplies with, and the embedded engine (float64 boosts) sees the same number.

The weighting named ``idf`` (``termindex.weightings.idf``) is this rule. Statistics per engine:
``TermIndex.term_statistics`` (the embedded engine counts its postings;
Elasticsearch/OpenSearch count matches in one ``_msearch``, cached per index version by
``termindex.elastic.statistics.StatisticsCache``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

# The largest weight one query term may carry (a repeat count or an explicit ``terms`` weight).
# Engines are exact up to it; beyond it float32 sums overflow, so requests are refused instead.
MAX_QUERY_WEIGHT = 1000.0

TEXT = "log(1 + weight)"  # how the service, its OpenAPI document and the web page describe it

# The rank_feature function that computes saturate(w): ln(scaling_factor + w) with factor 1.
ENGINE_FUNCTION: dict[str, Any] = {"log": {"scaling_factor": 1}}


def saturate(weight: float) -> float:
    """One weight's contribution (float64, ``math.log1p``)."""
    return math.log1p(weight)


def saturate_array(weights: Any) -> np.ndarray:
    """Element-wise, in the array's dtype (``numpy.log1p``: the oracle's exact form)."""
    return np.log1p(weights)


def saturate_tensor(weights: Any) -> Any:
    """For a torch tensor (differentiable; no torch import here: the query side stays torch-free)."""
    return weights.log1p()


def engine_clause(field: str, boost: float) -> dict[str, Any]:
    """One query term as an Elasticsearch/OpenSearch clause scoring ``boost * saturate(w)``."""
    return {"rank_feature": {"field": field, **ENGINE_FUNCTION, "boost": boost}}


# ---- the IDF -----------------------------------------------------------------------------------
def idf_array(df: Any, n_docs: int) -> np.ndarray:
    """BM25's inverse document frequency (module docstring), float64; ``df`` clamped to [0, n_docs]."""
    n = float(max(int(n_docs), 0))
    d = np.clip(np.asarray(df, dtype=np.float64), 0.0, n)
    return np.log1p((n - d + 0.5) / (d + 0.5))


def weigh_counts(counts: Any, df: Any, n_docs: int) -> np.ndarray:
    """``count * idf`` of aligned arrays, as float32 in (0, ``MAX_QUERY_WEIGHT``]: the query weights
    (the service's and the evaluation's, so both rank alike)."""
    w = (np.asarray(counts, dtype=np.float64) * idf_array(df, n_docs)).astype(np.float32)
    return np.clip(w, np.finfo(np.float32).tiny, np.float32(MAX_QUERY_WEIGHT))


def idf_weights(counts: Mapping[int, float], df: Mapping[int, int], n_docs: int) -> dict[int, float]:
    """``{id: count * idf}`` of a query's token counts (``weigh_counts``), from the index's ``df``
    (``TermStatistics.df``: absent = 0) and document count."""
    ids = list(counts)
    weights = weigh_counts([counts[t] for t in ids], [df.get(t, 0) for t in ids], n_docs)
    return dict(zip(ids, weights.astype(np.float64).tolist(), strict=True))
