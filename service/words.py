"""Word-pieces back into the words a person reads.

The index speaks WordPiece tokens: "buses" is ``bus`` + ``##es``, a full stop is a token of its
own. A page that shows ``##es`` or ``.`` as a "matched word" explains nothing, so results are
also described by whole words: pieces are merged in the order of a text (the query, or an
image's captions), and punctuation and special tokens are left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

CONTINUATION = "##"


@dataclass(frozen=True)
class Word:
    """A readable word and the vocabulary tokens it is made of."""

    text: str
    tokens: tuple[str, ...]


def readable(word: str) -> bool:
    """Has a letter or digit and is not a special token such as ``[UNK]``."""
    special = word.startswith("[") and word.endswith("]")
    return not special and any(ch.isalnum() for ch in word)


def words_of(tokens: Sequence[str]) -> list[Word]:
    """Merge word-pieces of a text, in text order, into words; drop punctuation and orphans.

    A ``##`` piece with nothing before it cannot be placed in a word, so it is dropped too.
    """
    merged: list[tuple[str, list[str]]] = []
    for token in tokens:
        if token.startswith(CONTINUATION):
            if merged:
                text, pieces = merged[-1]
                merged[-1] = (text + token[len(CONTINUATION) :], [*pieces, token])
            continue
        merged.append((token, [token]))
    return [Word(text, tuple(pieces)) for text, pieces in merged if readable(text)]


def group_by_word(scored: Iterable[tuple[str, float]], words: Sequence[Word]) -> list[dict[str, Any]]:
    """``(token, value)`` pairs summed per word, largest first, ties by word.

    A token takes the first word of ``words`` that contains it; a token in none of them stands
    for itself when it is a readable whole word, and is left out otherwise (``##s``, ``.``).
    """
    owner: dict[str, str] = {}
    for word in words:
        for token in word.tokens:
            owner.setdefault(token, word.text)
    total: dict[str, float] = {}
    parts: dict[str, list[str]] = {}
    for token, value in scored:
        text = owner.get(token)
        if text is None:
            if token.startswith(CONTINUATION) or not readable(token):
                continue
            text = token
        total[text] = total.get(text, 0.0) + float(value)
        parts.setdefault(text, []).append(token)
    ordered = sorted(total.items(), key=lambda kv: (-kv[1], kv[0]))
    return [{"word": text, "value": value, "tokens": parts[text]} for text, value in ordered]


def captions_of(metadata: Mapping[str, Any]) -> list[str]:
    """The texts that describe an image: ``caption`` and ``captions`` (the indexer writes both forms)."""
    texts: list[str] = []
    caption = metadata.get("caption")
    if isinstance(caption, str):
        texts.append(caption)
    captions = metadata.get("captions")
    if isinstance(captions, list):
        texts.extend(c for c in captions if isinstance(c, str))
    return texts
