"""The score's saturation: what a stored weight w adds for one query term, ``saturate(w) = log(1 + w)``.

The paper's Eq. 12/15: ``f(q, v) = sum over query tokens of log(1 + w)``, each token counted once per
occurrence (its boost). This module is the one home of that function, in every form the code needs:
a Python float (``saturate``), numpy arrays (``saturate_array``: the oracle's and the embedded
engine's tables and quantized bounds are built from it), torch tensors (``saturate_tensor``:
training and evaluation), the Elasticsearch ``rank_feature`` clause that computes it
(``engine_clause``), and the words the service shows (``TEXT``).

Changing the function: change it here (every form), and bump the embedded engine's
``FORMAT_VERSION`` (``termindex/embedded/format.py``): its segments store 8-bit quantized upper
bounds of ``saturate(w)`` (``quant.u8``, ``quant_step``), valid only for the function they were
written with. The float and numpy forms keep ``math.log1p`` and ``numpy.log1p`` apart on purpose:
they differ in the last bit for some inputs, and the exactness tests compare bit for bit.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

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
