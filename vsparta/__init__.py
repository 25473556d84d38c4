"""VisualSparta search: the CLI and the pieces that tie model, indexer, engines and service together."""

from __future__ import annotations

__version__ = "0.1.0"
