"""The rerankers, one registration line each (``core.registry``): ``--reranker`` names one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vsparta.core.registry import Registry

if TYPE_CHECKING:
    from vsparta.service.rerankers.base import Reranker

RERANKERS: Registry[Reranker] = Registry(
    "reranker",
    {
        "coord": "vsparta.service.rerankers.coord",  # Lucene's classic coordination factor
    },
    "RERANKER",
)
NONE = "none"  # what --reranker / VSPARTA_RERANKER take to run none


def reranker_named(name: str | None) -> Reranker | None:
    """The reranker registered as ``name``; None for None, "" or ``none``."""
    if name is None or name in ("", NONE):
        return None
    return RERANKERS.get(name)
