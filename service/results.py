"""Turn engine hits into the JSON the API and `vsparta search --json` return (DESIGN.md section 3).

Engines speak vocabulary ids; people read tokens. The mapping back happens here, once, so the HTTP
service and the command line print the same thing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from model.query_tokenizer import QueryTokenizer
from termindex import Hit


def image_urls(doc_id: str, metadata: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """Relative URLs of the original and its thumbnail; None when the document names no image."""
    if not metadata.get("image"):
        return None, None
    base = f"/images/{quote(doc_id, safe='')}"
    return f"{base}/file", f"{base}/thumbnail"


def explain_terms(hit: Hit, tokenizer: QueryTokenizer) -> list[dict[str, Any]]:
    """Matched tokens of one hit, biggest contribution first (the paper's Figure 3)."""
    items = sorted((hit.contributions or {}).items(), key=lambda kv: (-kv[1][1], kv[0]))
    return [
        {"token": tokenizer.id_to_token(tid), "weight": float(w), "contribution": float(c)}
        for tid, (w, c) in items
    ]


def hit_to_result(hit: Hit, tokenizer: QueryTokenizer, explain: bool) -> dict[str, Any]:
    image_url, thumbnail_url = image_urls(hit.id, hit.metadata)
    out: dict[str, Any] = {
        "id": hit.id,
        "score": float(hit.score),
        "metadata": dict(hit.metadata),
        "image_url": image_url,
        "thumbnail_url": thumbnail_url,
    }
    if explain:
        out["terms"] = explain_terms(hit, tokenizer)
    return out


def top_terms(terms: Mapping[int, float], tokenizer: QueryTokenizer, n: int) -> list[dict[str, Any]]:
    """The ``n`` heaviest terms of a document as ``{token, weight}``, heaviest first."""
    items = sorted(terms.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
    return [{"token": tokenizer.id_to_token(tid), "weight": float(w)} for tid, w in items]


def query_from_text(text: str, tokenizer: QueryTokenizer) -> tuple[dict[int, float], list[str]]:
    """``({id: count}, tokens in order)`` of a text query; ``tokenize`` already drops the ids no query
    contains, [UNK] included (the rule: ``model.query_tokenizer.non_query_ids``)."""
    ids = tokenizer.tokenize(text)
    weights: dict[int, float] = {}
    for i in ids:
        weights[i] = weights.get(i, 0.0) + 1.0
    return weights, [tokenizer.id_to_token(i) for i in ids]
