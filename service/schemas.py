"""Request and response bodies of the HTTP API (docs/architecture.md section 3).

The search request's limits (query length, k, number of terms) come from the settings, so its
model is built per app by ``search_request_model``; the OpenAPI schema then shows the real bounds.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from vsparta.service.rerankers.registry import RERANKERS
from vsparta.service.settings import ServiceSettings
from vsparta.termindex.base import MAX_QUERY_WEIGHT
from vsparta.termindex.scoring import TEXT as SATURATION
from vsparta.termindex.weightings.registry import WEIGHTINGS

SEARCH_EXAMPLES: dict[str, dict[str, Any]] = {
    "text": {
        "summary": "Text query",
        "description": "Tokenized with the model's WordPiece tokenizer; no network runs at query time.",
        "value": {"query": "a red circle left of a blue square", "k": 10},
    },
    "explain": {
        "summary": "Text query with explanations, captions only",
        "description": "Each result lists its matched tokens and words, their weights and their share "
        "of the score; `fields` keeps only the caption from each result's metadata.",
        "value": {"query": "green triangle", "k": 5, "explain": True, "fields": ["metadata.caption"]},
    },
    "terms": {
        "summary": "Explicit weighted tokens",
        "description": "Tokens must be in the model's vocabulary; weights are the clause boosts "
        f"(finite, > 0, at most {MAX_QUERY_WEIGHT:g}).",
        "value": {"terms": {"red": 1.0, "circle": 2.0}, "k": 10},
    },
}

# Metadata keys about the server's own files (paths; a file's version, indexer/items.py): never sent
# to clients (they get URLs instead).
SERVER_ONLY_METADATA = frozenset({"image", "image_root", "file_version"})

# What ``fields`` may name: a whole result part, or one metadata key as ``metadata.KEY``.
FIELD_NAMES = ("metadata", "image_url", "thumbnail_url")
FIELDS_DESCRIPTION = (
    "Result parts to return besides `id` and `score` (and `terms`/`words` with `explain`): "
    "`metadata` (all of it), `metadata.KEY` (one key, e.g. `metadata.caption`), `image_url`, "
    "`thumbnail_url`. Omitted: all of them. `[]`: only ids and scores."
)
FIELD_ITEM_SCHEMA: dict[str, Any] = {
    "anyOf": [{"enum": list(FIELD_NAMES)}, {"type": "string", "pattern": "^metadata\\.", "minLength": 10}]
}
MAX_FIELDS = 32


def check_field(name: str) -> str:
    """One ``fields`` entry: a known part or ``metadata.KEY`` with a non-empty key."""
    if name in FIELD_NAMES or (name.startswith("metadata.") and len(name) > len("metadata.")):
        return name
    raise ValueError(f"unknown field {name!r}: use one of {', '.join(FIELD_NAMES)} or metadata.KEY")


FieldName = Annotated[str, AfterValidator(check_field), WithJsonSchema(FIELD_ITEM_SCHEMA)]


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MatchedTerm(_Out):
    token: str = Field(description="Word-piece as it appears in the vocabulary.")
    weight: float = Field(description="The image's weight for this token (CACHE(w, v) in the paper).")
    contribution: float = Field(
        description=f"This token's part of the score: its query weight (`query_weights`) * {SATURATION}."
    )


class MatchedWord(_Out):
    word: str = Field(description="A whole query word (word-pieces merged, punctuation left out).")
    contribution: float = Field(description="Sum of its matched tokens' contributions.")
    tokens: list[str] = Field(description="The matched word-pieces it is made of.")


_IMAGE_URL = "The original image; present only when its file is under the image roots."
_THUMB_URL = "A JPEG thumbnail (add `?size=` in pixels); present only when the image file exists."
_METADATA = "The image's metadata as indexed, without server file paths; as chosen by `fields`."


class SearchResult(_Out):
    id: str
    score: float
    metadata: dict[str, Any] | None = Field(None, description=_METADATA)
    image_url: str | None = Field(None, description=_IMAGE_URL)
    thumbnail_url: str | None = Field(None, description=_THUMB_URL)
    terms: list[MatchedTerm] | None = Field(
        None, description="With `explain`: matched tokens, largest contribution first."
    )
    words: list[MatchedWord] | None = Field(
        None, description="With `explain`: the matched tokens as whole query words, largest first."
    )


class ImageRef(_Out):
    id: str
    metadata: dict[str, Any] | None = Field(None, description=_METADATA)
    image_url: str | None = Field(None, description=_IMAGE_URL)
    thumbnail_url: str | None = Field(None, description=_THUMB_URL)


class TokenWeight(_Out):
    token: str = Field(description="A query token (each distinct one once, in query order).")
    weight: float = Field(
        description="The weight it was searched with: the boost each matched contribution multiplies."
    )


class WordStat(_Out):
    word: str = Field(description="A query word (word-pieces merged, punctuation left out).")
    tokens: list[str] = Field(description="Its word-pieces.")
    images: int = Field(
        ge=0,
        description="Indexed images that hold it (its rarest piece's count, from the engine's own "
        "statistics; 0: no image has it).",
    )
    common: bool = Field(
        description="Held by so many of the images (`VSPARTA_MATCH_COMMON_SHARE`, by default 60 %) "
        "that it does not tell them apart: it adds to scores but makes no result a match."
    )
    partial: bool = Field(
        False,
        description="No image holds every word-piece the match rule needs for it, but some image holds "
        "one of them (a model may write only a word's telling pieces; `vsparta calibrate` learns which).",
    )
    beyond_chance: bool | None = Field(
        None,
        description="A calibrated word's presence test on this index: true when more images hold it "
        "strongly than the model's look-alikes give by chance, false when not (then it matches no image: "
        "the images that hold it are look-alikes); null when not tested (no calibration, or no image "
        "has it).",
    )
    results: int = Field(ge=0, description="Results shown that match it (weight >= the match floor).")


class NoMatch(_Out):
    reason: str = Field(description="Why nothing is shown, in words (e.g. 'No image has dog.').")
    words: list[str] = Field(description="The informative query words that found nothing.")
    common: list[str] = Field(description="The query words too common to tell images apart.")


class SearchResponse(_Out):
    results: list[SearchResult]
    query_tokens: list[str] = Field(description="The tokens searched for, in query order.")
    query_words: list[str] = Field(
        description="What was searched for as words a person reads: the query's words, or, for "
        "more like this, the image's heaviest words."
    )
    query_weighting: str | None = Field(
        None,
        description="How the query's tokens were weighted: a registered query weighting (`counts`, how "
        "often each occurs, the paper's rule, by default; `GET /search/options` describes each), "
        "`terms` (explicit weights) or `similar` (an image's heaviest terms).",
        json_schema_extra={"enum": [*WEIGHTINGS.names(), "terms", "similar"]},
    )
    query_weights: list[TokenWeight] | None = Field(None, description="The weight of each query token.")
    reranker: str | None = Field(
        None,
        description="The reranker that ordered the results (`--reranker`); absent when none did. "
        "Scores stay the engine's.",
        json_schema_extra={"enum": list(RERANKERS.names())},
    )
    similar_to: ImageRef | None = Field(None, description="More like this: the image the results are like.")
    indexed_images: int | None = Field(None, ge=0, description="Images in the index (for a search).")
    query_word_stats: list[WordStat] | None = Field(
        None, description="For a search: per query word, how many indexed images hold it, in query order."
    )
    left_out: int | None = Field(
        None,
        ge=0,
        description="Results the engine ranked that were left out: they match no informative query word "
        "(`require_match`) or score below `min_score`.",
    )
    no_match: NoMatch | None = Field(
        None, description="Present when there are no results: which words found nothing, and why."
    )
    took_ms: float = Field(ge=0, description="Time spent in the handler, milliseconds.")

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "results": [
                        {
                            "id": "scene-00042",
                            "score": 3.21,
                            "metadata": {"caption": "a red circle left of a blue square"},
                            "image_url": "/images/scene-00042/file",
                            "thumbnail_url": "/images/scene-00042/thumbnail",
                            "terms": [{"token": "circle", "weight": 4.1, "contribution": 1.63}],
                            "words": [{"word": "circle", "contribution": 1.63, "tokens": ["circle"]}],
                        }
                    ],
                    "query_tokens": ["red", "circle"],
                    "query_words": ["red", "circle"],
                    "query_weighting": "counts",
                    "query_weights": [{"token": "red", "weight": 1.0}, {"token": "circle", "weight": 1.0}],
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
    metadata: dict[str, Any] = Field(description=_METADATA)
    image_url: str | None = Field(description=_IMAGE_URL)
    thumbnail_url: str | None = Field(description=_THUMB_URL)
    terms: list[ImageTerm] = Field(description="The image's heaviest terms, heaviest first.")


class Message(_Out):
    detail: str


class Health(_Out):
    status: str


class Ready(_Out):
    status: str
    detail: str
    query_weights: str | None = Field(
        None,
        description="When ready: the weighting text queries get unless they ask for another "
        "(`--query-weights`).",
        json_schema_extra={"enum": list(WEIGHTINGS.names())},
    )
    term_floors: int | None = Field(
        None,
        description="When ready: how many words have a floor of their own from the model's "
        "calibration (`vsparta calibrate`; 0: one floor, `match_min_weight`, for every word).",
    )


class Choice(_Out):
    name: str
    description: str


class SearchOptions(_Out):
    query_weightings: list[Choice] = Field(
        description="The query weightings a search may name (`query_weighting`), from the registry."
    )
    default_query_weighting: str = Field(description="What a search gets without `query_weighting`.")
    reranker: Choice | None = Field(
        None, description="The reranker that orders every search's results (`--reranker`); null: none."
    )


def _integral(value: Any) -> Any:
    """``84.0`` is an integer in JSON (and in the schema's ``integer``); ``84.5`` and ``"84"`` are not."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


JsonInt = Annotated[int, BeforeValidator(_integral)]

QueryWeight = Annotated[
    float,
    Field(
        gt=0,
        le=MAX_QUERY_WEIGHT,
        allow_inf_nan=False,
        description=f"Clause boost: finite, > 0, at most {MAX_QUERY_WEIGHT:g} (engines are exact up to it).",
    ),
]
Token = Annotated[str, StringConstraints(min_length=1)]


def _one_of_query_or_terms(schema: dict[str, Any]) -> None:
    """The schema says what the validator enforces: exactly one of ``query`` and ``terms``, not null.

    The ``oneOf`` sits inside an ``allOf`` (same meaning): a top-level ``oneOf`` whose branches
    hold only ``required`` made client generators (openapi-python-client 0.29) type the body of
    ``POST /search`` as ``Any``; this way they generate a ``SearchRequest`` model.
    """
    schema["allOf"] = [{"oneOf": [{"required": ["query"]}, {"required": ["terms"]}]}]
    for name in ("query", "terms", "query_weighting"):  # optional, never null
        schema["properties"][name].pop("default", None)


def search_request_model(settings: ServiceSettings) -> type[BaseModel]:
    """The POST /search body with this app's limits; strict types (no "10" for 10)."""
    max_chars, max_k, max_terms = settings.max_query_chars, settings.max_k, settings.max_terms
    Weighting = Literal[WEIGHTINGS.names()]  # type: ignore[valid-type]  # the registry's names

    class SearchRequest(BaseModel):
        """Give ``query`` (text) or ``terms`` ({token: weight}), exactly one of them."""

        model_config = ConfigDict(
            extra="forbid",
            strict=True,
            json_schema_extra=lambda schema: _one_of_query_or_terms(schema),
        )

        # Typed without None: an explicit null is refused, as the schema (no null) says.
        query: str = Field(
            None,  # type: ignore[assignment]
            min_length=1,
            max_length=max_chars,
            description=f"Free text, 1 to {max_chars} characters, not only whitespace.",
            json_schema_extra={"pattern": r"\S"},
        )
        terms: dict[Token, QueryWeight] = Field(
            None,  # type: ignore[assignment]
            min_length=1,
            max_length=max_terms,
            description="Explicit {token: weight} instead of a text query; tokens of the model vocabulary.",
        )
        k: JsonInt = Field(settings.default_k, ge=1, le=max_k, description="Number of results.")
        explain: bool = Field(False, description="List matched tokens and words with their contributions.")
        require_match: bool = Field(
            True,
            description="Leave out results whose score comes only from words most images hold, or "
            "from weights below the match floor; false: every image the engine ranks, as before.",
        )
        min_score: float = Field(
            0.0, ge=0, allow_inf_nan=False, description="Leave out results scoring less (finite, >= 0)."
        )
        query_weighting: Weighting = Field(
            None,  # type: ignore[assignment]
            description="How a text query's tokens are weighted, one of `GET /search/options`'s; "
            "omitted: the service's (`--query-weights`). Explicit `terms` are never re-weighted.",
        )
        fields: list[FieldName] | None = Field(
            None, max_length=MAX_FIELDS, description=FIELDS_DESCRIPTION, examples=[["metadata.caption"]]
        )

        @field_validator("query")
        @classmethod
        def _not_blank(cls, value: str) -> str:
            if not value.strip():
                raise ValueError("query is empty or only whitespace")
            return value

        @model_validator(mode="after")
        def _query_xor_terms(self) -> SearchRequest:
            if (self.query is None) == (self.terms is None):
                raise ValueError(
                    "give either `query` (text) or `terms` ({token: weight}), not both or neither"
                )
            return self

    return SearchRequest
