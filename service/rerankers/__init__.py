"""Rerankers: re-order the engine's first hits before they are presented (``search.Reranker``).

One module per reranker, one line each in ``registry.RERANKERS`` (``core.registry``): ``vsparta
serve --reranker`` / ``vsparta search --reranker`` / ``VSPARTA_RERANKER`` name one; none by default.
"""
