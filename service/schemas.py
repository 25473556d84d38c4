"""Request and response bodies of the HTTP API (docs/architecture.md section 3).

The search request's limits (query length, k, number of terms) come from the settings, so its
model is built per app by ``search_request_model``; the OpenAPI schema then shows the real bounds.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from service.settings import ServiceSettings

SEARCH_EXAMPLES: dict[str, dict[str, Any]] = {
    "text": {
        "summary": "Text query",
        "description": "Tokenized with the model's WordPiece tokenizer; no network runs at query time.",
        "value": {"query": "a red cube next to a blue sphere", "k": 10},
    },
    "explain": {
        "summary": "Text query with explanations",
        "description": "Each result lists its matched tokens, their weights and their share of the score.",
        "value": {"query": "red cube", "k": 5, "explain": True},
    },
    "terms": {
        "summary": "Explicit weighted tokens",
        "description": "Tokens must be in the model's vocabulary; weights are the clause boosts.",
        "value": {"terms": {"red": 1.0, "cube": 2.0}, "k": 10},
    },
}


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MatchedTerm(_Out):
    token: str = Field(description="Word-piece as it appears in the vocabulary.")
    weight: float = Field(description="The image's weight for this token (CACHE(w, v) in the paper).")
    contribution: float = Field(description="This token's part of the score: boost * log(1 + weight).")


class SearchResult(_Out):
    id: str
    score: float
    metadata: dict[str, Any]
    image_url: str | None = Field(description="The original image, served from the image roots.")
    thumbnail_url: str | None = Field(description="A JPEG thumbnail; add `?size=` (pixels).")
    terms: list[MatchedTerm] | None = Field(
        None, description="With `explain`: matched tokens, largest first."
    )


class SearchResponse(_Out):
    results: list[SearchResult]
    query_tokens: list[str] = Field(description="The tokens searched for, in query order.")
    took_ms: float

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "results": [
                        {
                            "id": "scene-00042",
                            "score": 3.21,
                            "metadata": {"image": "images/scene-00042.png"},
                            "image_url": "/images/scene-00042/file",
                            "thumbnail_url": "/images/scene-00042/thumbnail",
                            "terms": [{"token": "cube", "weight": 4.1, "contribution": 1.63}],
                        }
                    ],
                    "query_tokens": ["red", "cube"],
                    "took_ms": 1.8,
                }
            ]
        }
    )


class ImageTerm(_Out):
    token: str
    weight: float


class ImageDetail(_Out):
    id: str
    metadata: dict[str, Any]
    image_url: str | None
    thumbnail_url: str | None
    terms: list[ImageTerm] = Field(description="The image's heaviest terms, heaviest first.")


class Message(_Out):
    detail: str


class Health(_Out):
    status: str


class Ready(_Out):
    status: str
    detail: str


def search_request_model(settings: ServiceSettings) -> type[BaseModel]:
    """The POST /search body with this app's limits; strict types (no "10" for 10)."""
    max_chars, max_k, max_terms = settings.max_query_chars, settings.max_k, settings.max_terms

    class SearchRequest(BaseModel):
        """Give ``query`` (text) or ``terms`` ({token: weight}), not both."""

        model_config = ConfigDict(
            extra="forbid",
            strict=True,
            json_schema_extra={"examples": [e["value"] for e in SEARCH_EXAMPLES.values()]},
        )

        query: str | None = Field(
            None, max_length=max_chars, description=f"Free text, at most {max_chars} characters."
        )
        terms: dict[str, float] | None = Field(
            None,
            min_length=1,
            max_length=max_terms,
            description="Explicit {token: weight} instead of a text query; weights > 0.",
        )
        k: int = Field(settings.default_k, ge=1, le=max_k, description="Number of results.")
        explain: bool = Field(False, description="List matched tokens with weights and contributions.")

        @field_validator("query")
        @classmethod
        def _not_blank(cls, value: str | None) -> str | None:
            if value is not None and not value.strip():
                raise ValueError("query is empty or only whitespace")
            return value

        @field_validator("terms")
        @classmethod
        def _weights_positive(cls, value: dict[str, float] | None) -> dict[str, float] | None:
            for token, weight in (value or {}).items():
                if not token:
                    raise ValueError("terms: empty token")
                if not math.isfinite(weight) or weight <= 0:
                    raise ValueError(f"terms: weight of {token!r} must be finite and > 0, got {weight}")
            return value

        @model_validator(mode="after")
        def _query_xor_terms(self) -> SearchRequest:
            if (self.query is None) == (self.terms is None):
                raise ValueError(
                    "give either `query` (text) or `terms` ({token: weight}), not both or neither"
                )
            return self

    return SearchRequest
