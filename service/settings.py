"""One settings object for the query service, read from ``VSPARTA_*`` environment variables.

CLI flags (``vsparta serve``) are passed as init arguments, which pydantic-settings ranks above
the environment, so a flag always wins over an exported variable.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from vsparta.model.query_tokenizer import QueryTokenizer
from vsparta.service.matching import (
    COMMON_SHARE,
    FUNCTION_WORDS_MATCH,
    MIN_EVIDENCE,
    MIN_WEIGHT,
    NUMBERS_MATCH,
    PLURAL_FLOORS,
    PRESENCE_ALPHA,
    PRESENCE_JOINT,
    PRESENCE_PREDICTIVE,
    PRESENCE_RATIO,
    PRESENT_FLOOR_SCALE,
    RELATION_WORDS_MATCH,
    MatchRule,
)
from vsparta.service.rerankers.registry import NONE as NO_RERANKER
from vsparta.service.rerankers.registry import RERANKERS
from vsparta.service.term_floors import load as load_term_floors
from vsparta.service.term_floors import load_unseen
from vsparta.termindex import MAX_QUERY_WEIGHT, parse_spec
from vsparta.termindex.weightings.registry import DEFAULT as DEFAULT_WEIGHTING
from vsparta.termindex.weightings.registry import WEIGHTINGS


def _split_list(value: Any) -> Any:
    """Accept a JSON list or a ``:``/``,``-separated string for list settings from the environment."""
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return []
        if text.startswith("["):
            return json.loads(text)
        sep = "," if "," in text else os.pathsep
        return [part.strip() for part in text.split(sep) if part.strip()]
    return value


class ServiceSettings(BaseSettings):
    """Everything the service needs to start; limits bound what one request may cost."""

    model_config = SettingsConfigDict(env_prefix="VSPARTA_", extra="ignore", validate_default=True)

    backend: str = Field(
        "embedded:vsparta-index",
        description="Index spec: `embedded:/path/to/index` or `http://host:9200/ALIAS`.",
    )
    model_path: Path = Field(
        ..., description="Saved model folder (or tokenizer.json): only the tokenizer is read."
    )
    image_roots: Annotated[list[Path], NoDecode] = Field(
        default_factory=list,
        description="Folders images may be served from; a document's `image` is resolved under them.",
    )
    max_query_chars: int = Field(512, ge=1, le=100_000)
    # A token repeated n times weighs n: this bound keeps text queries inside MAX_QUERY_WEIGHT.
    max_query_tokens: int = Field(64, ge=1, le=int(MAX_QUERY_WEIGHT))
    max_terms: int = Field(256, ge=1, le=100_000, description="Most explicit `terms` in one request.")
    max_k: int = Field(100, ge=1, le=10_000)
    default_k: int = Field(10, ge=1)
    max_body_bytes: int = Field(64 * 1024, ge=256)
    engine_timeout_s: float = Field(5.0, gt=0)
    retry_after_s: int = Field(5, ge=1, description="Retry-After sent with 503 answers.")
    similar_terms: int = Field(32, ge=1, le=1000, description="Top terms of an image used by /similar.")
    top_terms: int = Field(50, ge=1, le=10_000, description="Terms listed by GET /images/{id}.")
    thumbnail_sizes: Annotated[list[int], NoDecode] = Field(default_factory=lambda: [128, 256, 512])
    thumbnail_cache_dir: Path | None = Field(
        None, description="Where JPEG thumbnails are cached; a temporary folder when unset."
    )
    query_weights: str = Field(
        DEFAULT_WEIGHTING,
        description="How a text query's tokens are weighted, a name in "
        "`termindex/weightings/registry.py`: `counts` (how often each occurs, the paper's rule), "
        "`idf` (count x the token's inverse document frequency in the index), `saturated` (BM25's "
        "saturation of the count) ...",
        json_schema_extra={"enum": list(WEIGHTINGS.names())},
    )
    reranker: str | None = Field(
        None,
        description="A reranker named in `service/rerankers/registry.py` (e.g. `coord`); none by default.",
        json_schema_extra={"enum": [*RERANKERS.names(), NO_RERANKER]},
    )
    match_common_share: float = Field(
        COMMON_SHARE,
        gt=0,
        le=1,
        description="A query word held by at least this share of the indexed images is common: it "
        "makes no result a match (service/matching.py; chosen in docs/no-match.md).",
    )
    match_min_weight: float = Field(
        MIN_WEIGHT,
        ge=0,
        allow_inf_nan=False,
        description="The least weight of a query word in an image for it to make the image a match "
        "(a model's weights have their own scale: docs/no-match.md measures the default).",
    )
    match_min_evidence: float = Field(
        MIN_EVIDENCE,
        ge=0,
        allow_inf_nan=False,
        description="The least log(1 + weight) x idf of a held informative query word for a match "
        "(0: any held informative word; docs/no-match.md).",
    )
    match_term_floors: bool = Field(
        True,
        description="Use the model folder's term-floors.json (written by `vsparta calibrate`): for "
        "each word it calibrated, the word-pieces the model writes for it and a floor in place of "
        "match_min_weight (docs/no-match.md).",
    )
    match_numbers: bool = Field(
        NUMBERS_MATCH,
        description="Whether a number word ('two', 'five') alone can make a result a match "
        "(docs/no-match.md).",
    )
    match_function_words: bool = Field(
        FUNCTION_WORDS_MATCH,
        description="Whether a function word ('is', 'there', 'with': Lucene's English stop words) alone "
        "can make a result a match (docs/no-match.md).",
    )
    match_relation_words: bool = Field(
        RELATION_WORDS_MATCH,
        description="Whether a relation word ('left', 'next', 'above') alone can make a result a match; "
        "it says where, not what (docs/no-match.md).",
    )
    match_plural_floors: bool = Field(
        PLURAL_FLOORS,
        description="Whether a plural the calibration never saw ('banjos') takes the floor of its "
        "singular ('banjo') when its word-pieces hold the singular's (docs/no-match.md).",
    )
    match_unseen_floors: bool = Field(
        True,
        description="With match_term_floors, a word the calibration never saw needs its key piece's "
        "unseen floor from term-floors.json, where above match_min_weight: the weight that piece "
        "reaches on few calibration images (`vsparta calibrate --unseen-quantile`; docs/no-match.md).",
    )
    match_presence_alpha: float = Field(
        PRESENCE_ALPHA,
        ge=0,
        le=1,
        description="A calibrated word matches no image of an index that holds it strongly no more "
        "often than the model's look-alikes would by chance with at least this probability "
        "(service/presence.py; 0 turns the test off; docs/no-match.md).",
    )
    match_presence_ratio: float = Field(
        PRESENCE_RATIO,
        ge=1,
        allow_inf_nan=False,
        description="How many times the chance count a calibrated word's strong images must also be "
        "(service/presence.py; docs/no-match.md).",
    )
    match_presence_scan: bool = Field(
        True,
        description="Whether the presence test also tries the other strong weights term-floors.json "
        "keeps for a word (its scan, alpha shared as match_presence_joint says) or its one "
        "(service/presence.py; docs/no-match.md).",
    )
    match_presence_joint: bool = Field(
        PRESENCE_JOINT,
        description="Whether the presence test's scan shares match_presence_alpha among its strong "
        "weights by their exact joint chance (each may ask for fewer images) or by Bonferroni "
        "(service/presence.py; docs/no-match.md).",
    )
    match_presence_predictive: bool = Field(
        PRESENCE_PREDICTIVE,
        description="Whether the presence test's chance count is as uncertain as the number of "
        "calibration images its null rates were counted on says (negative binomial; in files calibrated "
        "before 2026-12-05, their calibration images) or taken as exact (Poisson) "
        "(service/presence.py; docs/no-match.md).",
    )
    match_present_floor_scale: float = Field(
        PRESENT_FLOOR_SCALE,
        gt=0,
        le=1,
        description="The share of its calibrated floor a word needs once the index holds it beyond "
        "chance (docs/no-match.md).",
    )
    setup_errors: Literal["exit", "not-ready"] = Field(
        "exit",
        description="A wrong model or images folder: `exit` (a CLI mistake, exit 2) or `not-ready` "
        "(stay up, /ready answers 503 with the reason: the container images set it).",
    )
    cors_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Origins allowed by CORS; empty (the default) means CORS off."
    )

    def match_rule(self, tokenizer: QueryTokenizer) -> MatchRule:
        """Which results are matches (``service.matching``), with these settings' parameters and the
        model's floors per word (``service.term_floors``; ``UsageError`` for a file it cannot use)."""
        floors = load_term_floors(self.model_path, tokenizer) if self.match_term_floors else {}
        if not self.match_presence_scan:  # the test at each word's one strong weight
            floors = {
                w: replace(f, presence=replace(f.presence, more=())) if f.presence else f
                for w, f in floors.items()
            }
        unseen = self.match_term_floors and self.match_unseen_floors
        return MatchRule(
            self.match_common_share,
            self.match_min_weight,
            self.match_min_evidence,
            self.match_numbers,
            floors,
            self.match_presence_alpha,
            self.match_present_floor_scale,
            self.match_presence_ratio,
            function_words_match=self.match_function_words,
            relation_words_match=self.match_relation_words,
            presence_joint=self.match_presence_joint,
            presence_predictive=self.match_presence_predictive,
            plural_floors=self.match_plural_floors,
            unseen_floors=load_unseen(self.model_path, tokenizer) if unseen else {},
        )

    @field_validator("image_roots", "thumbnail_sizes", "cors_origins", mode="before")
    @classmethod
    def _lists_from_env(cls, value: Any) -> Any:
        return _split_list(value)

    @field_validator("query_weights")
    @classmethod
    def _registered_weighting(cls, value: str) -> str:
        return WEIGHTINGS.check(value)  # the message lists the registered names

    @field_validator("reranker")
    @classmethod
    def _registered_reranker(cls, value: str | None) -> str | None:
        if value is None or value in ("", NO_RERANKER):
            return None
        return RERANKERS.check(value)

    @field_validator("backend")
    @classmethod
    def _backend_parses(cls, value: str) -> str:
        parse_spec(value)  # raises ValueError with the expected form
        return value

    @field_validator("thumbnail_sizes")
    @classmethod
    def _sizes_positive(cls, value: list[int]) -> list[int]:
        if not value or any(s < 16 or s > 4096 for s in value):
            raise ValueError("thumbnail_sizes must be a non-empty list of pixel sizes in [16, 4096]")
        return sorted(set(value))

    @field_validator("image_roots")
    @classmethod
    def _roots_absolute(cls, value: list[Path]) -> list[Path]:
        return [p.expanduser().resolve() for p in value]

    @model_validator(mode="after")
    def _default_k_in_range(self) -> ServiceSettings:
        if self.default_k > self.max_k and "default_k" not in self.model_fields_set:
            self.default_k = self.max_k  # a small max_k lowers the default instead of failing
        if self.default_k > self.max_k:
            raise ValueError(f"default_k ({self.default_k}) must not exceed max_k ({self.max_k})")
        return self
