"""The query weightings, one registration line each (``core.registry``): ``--query-weights`` names one.

Numpy only: the service, the evaluation and the settings read the names without anything heavy.
"""

from __future__ import annotations

from vsparta.core.registry import Registry
from vsparta.termindex.weightings.base import QueryWeighting

DEFAULT = "counts"

WEIGHTINGS: Registry[QueryWeighting] = Registry(
    "query weighting",
    {
        "counts": "vsparta.termindex.weightings.counts",  # the paper's rule: how often the token occurs
        "idf": "vsparta.termindex.weightings.idf",  # count x the token's IDF in the index
        "saturated": "vsparta.termindex.weightings.saturated",  # BM25's saturation of the count
    },
    "WEIGHTING",
)


def weighting_named(name: str) -> QueryWeighting:
    """The weighting registered as ``name`` (``core.registry.UnknownChoice`` naming them if none is)."""
    return WEIGHTINGS.get(name)
