"""Turn engine hits into the JSON the API and `vsparta search --json` return (docs/architecture.md section 3).

Engines speak vocabulary ids; people read tokens and words. The mapping back happens here, once,
so the HTTP service and the command line print the same thing.

Words, not word-pieces: a page that shows ``##es`` or ``.`` as a "matched word" explains nothing,
so results are also described by whole words (``service.matching.Word``, the words the match rule
is about): a hit's tokens are summed per word of a text (the query, or an image's captions).

What a client sees of an image is decided here too: ids and URLs, never the server's file paths.

And what an answer says of each query word (``describe``): how many images hold it, and when
nothing is shown, why, in words. ``service.matching`` decides which results match; this says it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from vsparta.model.query_tokenizer import QueryTokenizer
from vsparta.service.matching import (
    CONTINUATION,
    MatchRule,
    QueryCounts,
    Word,
    WordCount,
    held,
    readable,
    select,
    words_of,
)
from vsparta.service.schemas import SERVER_ONLY_METADATA
from vsparta.termindex import Hit, heaviest_terms


# ---- tokens summed per word --------------------------------------------------------------------
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


# ---- hits into results --------------------------------------------------------------------------
@dataclass(frozen=True)
class ResultView:
    """What one response shows of each image.

    ``fields`` None: everything; else the names of ``schemas.FIELD_NAMES`` / ``metadata.KEY``.
    ``hidden``: metadata keys never shown (server paths over HTTP; the local CLI shows them).
    """

    explain: bool = False
    fields: frozenset[str] | None = None
    hidden: frozenset[str] = SERVER_ONLY_METADATA

    @classmethod
    def of(cls, explain: bool, fields: Collection[str] | None) -> ResultView:
        return cls(explain, None if fields is None else frozenset(fields))

    def wants(self, name: str) -> bool:
        return self.fields is None or name in self.fields

    def metadata(self, metadata: Mapping[str, Any]) -> dict[str, Any] | None:
        """The metadata to show, or None when the client asked for none of it."""
        if self.wants("metadata"):
            return {k: v for k, v in metadata.items() if k not in self.hidden}
        keys = {f.removeprefix("metadata.") for f in self.fields or () if f.startswith("metadata.")}
        if not keys:
            return None
        return {k: v for k, v in metadata.items() if k in keys and k not in self.hidden}


def image_urls(doc_id: str, has_file: bool) -> tuple[str | None, str | None]:
    """Relative URLs of the original and its thumbnail; None when there is no file to serve."""
    if not has_file:
        return None, None
    base = f"/images/{quote(doc_id, safe='')}"
    return f"{base}/file", f"{base}/thumbnail"


def image_fields(
    doc_id: str, metadata: Mapping[str, Any], has_file: bool, view: ResultView
) -> dict[str, Any]:
    """The parts of an image every response shows the same way: metadata and URLs, as asked."""
    out: dict[str, Any] = {}
    shown = view.metadata(metadata)
    if shown is not None:
        out["metadata"] = shown
    image_url, thumbnail_url = image_urls(doc_id, has_file)
    if view.wants("image_url"):
        out["image_url"] = image_url
    if view.wants("thumbnail_url"):
        out["thumbnail_url"] = thumbnail_url
    return out


def explain_terms(hit: Hit, tokenizer: QueryTokenizer) -> list[dict[str, Any]]:
    """Matched tokens of one hit, biggest contribution first (the paper's Figure 3)."""
    contributions = hit.contributions or {}
    order = heaviest_terms({tid: c for tid, (_w, c) in contributions.items()})
    return [
        {
            "token": tokenizer.id_to_token(tid),
            "weight": float(contributions[tid][0]),
            "contribution": float(c),
        }
        for tid, c in order
    ]


def matched_words(terms: Sequence[Mapping[str, Any]], words: Sequence[Word]) -> list[dict[str, Any]]:
    """A hit's matched tokens as the query's words, with their summed contributions."""
    grouped = group_by_word(((t["token"], t["contribution"]) for t in terms), words)
    return [{"word": g["word"], "contribution": g["value"], "tokens": g["tokens"]} for g in grouped]


def hit_to_result(
    hit: Hit,
    tokenizer: QueryTokenizer,
    view: ResultView,
    *,
    has_file: bool,
    words: Sequence[Word] = (),
) -> dict[str, Any]:
    """One result; with ``view.explain`` its matched tokens and the query ``words`` they form."""
    out: dict[str, Any] = {"id": hit.id, "score": float(hit.score)}
    out.update(image_fields(hit.id, hit.metadata, has_file, view))
    if view.explain:
        out["terms"] = explain_terms(hit, tokenizer)
        out["words"] = matched_words(out["terms"], words)
    return out


def top_terms(terms: Mapping[int, float], tokenizer: QueryTokenizer, n: int) -> list[dict[str, Any]]:
    """The ``n`` heaviest terms of a document as ``{token, weight}``, heaviest first."""
    return [{"token": tokenizer.id_to_token(tid), "weight": float(w)} for tid, w in heaviest_terms(terms, n)]


def caption_words(metadata: Mapping[str, Any], tokenizer: QueryTokenizer) -> list[Word]:
    """The words of an image's captions, to name its heaviest tokens as whole words."""
    words: list[Word] = []
    for caption in captions_of(metadata):
        words.extend(words_of([tokenizer.id_to_token(i) for i in tokenizer.tokenize(caption)]))
    return words


def similar_words(
    terms: Sequence[tuple[int, float]], metadata: Mapping[str, Any], tokenizer: QueryTokenizer
) -> list[str]:
    """The words a "more like this" query stands for: its heaviest tokens, named by the captions."""
    scored = [(tokenizer.id_to_token(t), w) for t, w in terms]
    return [g["word"] for g in group_by_word(scored, caption_words(metadata, tokenizer))]


# ---- what the answer says of the query's words (the match rule's account) -----------------------
def _share(images: int, indexed: int) -> str:
    return "every image" if images >= indexed else f"{images:,} of the {indexed:,} images"


def _names(words: Sequence[WordCount]) -> str:
    return ", ".join(w.word for w in words)


def _absent(word: WordCount) -> str:
    """Why no image holds ``word``: none has it, or none holds every piece the rule asks for."""
    if not word.partial:
        return f"No image has {word.word}."
    return (
        f"No image holds every piece of {word.word} ({' '.join(word.tokens)}); "
        "`vsparta calibrate` learns which pieces the model writes for it."
    )


def _chance(word: WordCount, indexed: int) -> str:
    """Why a word held by some images matches none: no more hold it strongly than look-alikes would."""
    assert word.verdict is not None
    expected = word.verdict.expected
    if word.verdict.needed > indexed:  # look-alikes alone would fill the index: no count can prove it
        return (
            f"The model writes {word.word} strongly on nearly every image (its look-alikes alone give "
            f"{expected:.1f} of {indexed:,} images by chance), so it tells no image apart and none counts "
            "as a match."
        )
    return (
        f"The images that hold {word.word} are no more than the model's look-alikes give by chance "
        f"({expected:.1f} of {indexed:,} images expected; {word.verdict.needed} needed), so none counts "
        "as a match."
    )


def _floor_text(words: Sequence[WordCount]) -> str:
    """The weight the words needed, in words: one floor, or each word's own (``word_floors``)."""
    own = {w.word: w.floor for w in words}
    if len(set(own.values())) > 1:
        return "a weight of " + ", ".join(f"{v:.3g} for {word}" for word, v in own.items()) + " or more"
    level = next(iter(own.values()))
    return f"a weight of {level:.3g} or more" if level > 0 else "a weight that ranks"


def describe(
    ranked: Sequence[Hit],
    selected: Sequence[Hit],
    shown: Sequence[Hit],
    counts: QueryCounts,
    rule: MatchRule,
    *,
    require_match: bool,
    min_score: float,
) -> dict[str, Any]:
    """The response's account of the words (``query_word_stats``), and ``no_match`` when nothing
    is shown: the informative words that found nothing, the common ones, and why, in words.
    ``ranked``: what the engine answered; ``selected``: what ``select`` kept of it; ``shown``: what
    is presented (re-ranked, at most k)."""
    stats = [
        {
            "word": w.word,
            "tokens": list(w.tokens),
            "images": w.images,
            "common": w.common,
            "partial": w.partial,
            "beyond_chance": None if w.verdict is None else w.verdict.present,
            "results": sum(1 for h in shown if not w.common and held(h, w)),
        }
        for w in counts.words
    ]
    out: dict[str, Any] = {
        "indexed_images": counts.indexed,
        "query_word_stats": stats,
        "left_out": len(ranked) - len(selected),
    }
    if shown:
        return out
    common, rare = [w for w in counts.words if w.common], counts.informative
    numbers = [w for w in counts.words if w.word in counts.numbers and not w.common]
    function = [w for w in counts.words if w.word in counts.function and not w.common]
    relation = [w for w in counts.words if w.word in counts.relation and not w.common]
    found = [w for w in rare if any(held(h, w) for h in ranked)]
    reasons = [_absent(w) for w in rare if w.images == 0]
    chance = [w for w in rare if w.images > 0 and w.by_chance]
    reasons += [_chance(w, counts.indexed) for w in chance]
    weak = [w for w in rare if w.images > 0 and w not in found and w not in chance]
    if weak and require_match:
        floor = _floor_text(weak)
        reasons.append(  # below the floor, or too light to rank among the best-scored images
            f"The images that hold {_names(weak)} hold {'it' if len(weak) == 1 else 'them'} too weakly "
            f"to count as a match ({floor} among the {len(ranked)} best-scored images)."
        )
    if found and require_match and not select(ranked, counts, rule, require_match=True, min_score=0.0):
        reasons.append(
            f"The images that hold {_names(found)} hold {'it' if len(found) == 1 else 'them'} too weakly "
            f"for {'a word' if len(found) == 1 else 'words'} that many images hold."
        )
    reasons += [f"{w.word} is in {_share(w.images, counts.indexed)} and does not rank." for w in common]
    reasons += [f"{w.word} says how many, not what." for w in numbers if require_match]
    reasons += [f"{w.word} joins words and names nothing." for w in function if require_match]
    reasons += [f"{w.word} says where, not what." for w in relation if require_match]
    if not counts.words:
        reasons.append("No word of the query is in the model's vocabulary.")
    elif not rare and require_match:
        reasons.append("No other word tells the images apart.")
    if min_score > 0 and select(ranked, counts, rule, require_match=require_match, min_score=0.0):
        reasons.append(f"No result scores {min_score:g} or more.")
    out["no_match"] = {
        "reason": " ".join(reasons) or "No image matches the query.",
        "words": [w.word for w in rare if w not in found],
        "common": [w.word for w in common],
    }
    return out
