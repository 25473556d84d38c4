"""Which results are matches, and what an answer says about each query word.

A bag-of-words index knows what a dense one cannot: how many images hold each word
(``AsyncReader.term_statistics``, the engine's own counts). So an answer can say "no image has
*dog*", and a result that only shares "a" with the query need not be shown as an answer to it.

Words, not word-pieces: the index speaks WordPiece tokens ("buses" is ``bus`` + ``##es``, a full
stop is a token of its own). The rule and the answers speak of whole words (``Word``): pieces are
merged in the order of a text (the query, or an image's captions), and punctuation and special
tokens are left out (``words_of``).

The rule (its parameters chosen by measurement: ``bench/no_match.py``, docs/no-match.md):

- A query **word** is held by an image when the image holds each of its word-pieces but a plural
  ending, the first with a weight of at least ``min_weight`` (a learned model puts small weights on
  many words an image does not show): "peacocks" is ``peacock`` + ``##s`` and the stem says what it
  is about (a suffix alone says nothing), but "faucet" is ``fa`` + ``##uce`` + ``##t``, and ``fa``
  alone is the "fax" it begins. Its image count is its rarest such piece's. Punctuation is no word.
  A model calibrated by ``vsparta calibrate`` brings, per word its captions use, the pieces it
  writes for that word and a floor of its own (``WordFloor``, ``service.term_floors``): a strong
  model writes ``##cake`` on a cupcake and not ``cup``, so "all pieces" would say that no image has
  the cupcakes it holds. A plural the calibration never saw takes its singular's (``calibration_of``);
  another word it never saw needs its key's unseen floor (``unseen_floors``) where that is higher.
- A word is **common** when at least ``common_share`` of the indexed images hold it: "a" or "photo"
  in nearly every image tells them apart no better than nothing. It still adds to every score
  (explanations add up to the score) but makes no result a match. The others are
  **informative**, each with its inverse document frequency in the index (``termindex.scoring``).
- A result **matches** when it holds an informative word whose evidence, ``log(1 + weight) x idf``
  of its first piece (what the word adds under IDF query weights), is at least ``min_evidence``: a
  word the index holds in many images, such as a count ("five"), needs a heavier weight to tell
  than a rare one.
- A **number** word ("two", "five", "12") says how many, not what: unless ``numbers_match``, it
  makes no match on its own (an image of five birds is no answer to "five clocks").
- A **function word** ("is", "there", "with": Lucene's English stop words) joins words and names
  nothing: unless ``function_words_match``, it makes no match on its own either. A model trained on
  captions writes them onto images too, and an index may hold "is" beyond chance (the caption
  templates differ between two sets of pictures), which made "there is a worm" match images
  without worms (docs/no-match.md).
- A **relation word** ("left", "right", "next", "above": ``english.RELATION_WORDS``) says where,
  not what: unless ``relation_words_match``, it makes no match on its own. The caption templates
  place objects ("a clock left of a synagogue"), so an index holds "left" beyond chance, and such
  a query matched pictures with anything on the left (docs/no-match.md).
- A calibrated word may also bring a ``Presence`` test (``service.presence``): when the index holds
  it strongly in no more images than the model's look-alikes would give by chance, no image holds
  it (``with_verdicts``); when it holds it beyond chance, its floor is ``present_floor_scale`` of
  the calibrated one (the test, not the floor, now guards against look-alikes).
- By default (``require_match``) results that do not match are left out, and an answer with none
  says why, per word ("No image has *dog*", "*a* is in every image and does not rank";
  ``service.results.describe``). A request's ``min_score`` leaves out results scoring less.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from vsparta.service.english import FUNCTION_WORDS, RELATION_WORDS, is_number, singular_forms
from vsparta.service.presence import Presence, Verdict
from vsparta.termindex import Hit
from vsparta.termindex.base import TermStatistics
from vsparta.termindex.scoring import idf_array, saturate

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


# Chosen on the object scenes (docs/no-match.md): see MatchRule.
COMMON_SHARE = 0.6
MIN_WEIGHT = 0.5
MIN_EVIDENCE = 0.0
NUMBERS_MATCH = False
PRESENCE_ALPHA = 0.18
PRESENT_FLOOR_SCALE = 0.75
PRESENCE_RATIO = 1.5
PLURAL_ENDINGS = frozenset({"##s", "##es"})  # a word's last piece that changes number, not meaning
FUNCTION_WORDS_MATCH = False
RELATION_WORDS_MATCH = False
PLURAL_FLOORS = True
PRESENCE_JOINT = True
PRESENCE_PREDICTIVE = True


def needed_pieces(tokens: Sequence[str]) -> tuple[str, ...]:
    """The pieces of a word an image must hold: all but a plural ending ("peacocks" needs ``peacock``)."""
    ending = len(tokens) > 1 and tokens[-1] in PLURAL_ENDINGS
    return tuple(tokens[:-1] if ending else tokens)


@dataclass(frozen=True)
class WordFloor:
    """A calibrated word (``service.term_floors``): the vocabulary ids an image must hold for it
    (the pieces its model writes for it), the least weight of ``key`` among them, and the test of
    whether an index holds it beyond chance (``service.presence``; none from older calibrations)."""

    pieces: tuple[int, ...]
    key: int
    floor: float
    presence: Presence | None = None


@dataclass(frozen=True)
class MatchRule:
    """``common_share``: a word held by at least this share of the images is common; ``min_weight``:
    the least weight of a word's first piece in an image for it to hold the word (with the others);
    ``min_evidence``: the least ``log(1 + weight) x idf`` of a held informative word for a match;
    ``numbers_match``: whether a number word alone can make a match; ``word_floors``: per word,
    the pieces an image must hold and a floor in place of ``min_weight`` (none by default;
    calibrated on images outside the index by ``vsparta calibrate``, docs/no-match.md);
    ``presence_alpha``: the chance a calibrated word's strong images may have of coming from
    look-alikes alone and still count (``service.presence``), ``presence_ratio``: how many times the
    chance count its strong images must also be; ``present_floor_scale``: the share of its floor a
    word held beyond chance needs; ``function_words_match``: whether a function word alone can make
    a match; ``plural_floors``: whether a word the calibration never saw takes its singular's floor
    (``calibration_of``); ``unseen_floors``: per vocabulary id, the least weight of that key for a
    word the calibration never saw (``term_floors.unseen_floors``), where above ``min_weight``;
    ``relation_words_match``: whether a relation word ("left", "next") alone can make a match;
    ``presence_joint``: whether the test's scan shares ``presence_alpha`` by the exact joint chance
    of its weights' counts or by Bonferroni (``service.presence.scan_counts``);
    ``presence_predictive``: whether the chance count is as uncertain as the calibration's size says
    (negative binomial, ``service.presence.Presence.spread``) or taken as exact (Poisson)."""

    common_share: float = COMMON_SHARE
    min_weight: float = MIN_WEIGHT
    min_evidence: float = MIN_EVIDENCE
    numbers_match: bool = NUMBERS_MATCH
    word_floors: Mapping[str, WordFloor] = field(default_factory=dict, hash=False)
    presence_alpha: float = PRESENCE_ALPHA
    present_floor_scale: float = PRESENT_FLOOR_SCALE
    presence_ratio: float = PRESENCE_RATIO
    function_words_match: bool = FUNCTION_WORDS_MATCH
    plural_floors: bool = PLURAL_FLOORS
    unseen_floors: Mapping[int, float] = field(default_factory=dict, hash=False)
    relation_words_match: bool = RELATION_WORDS_MATCH
    presence_joint: bool = PRESENCE_JOINT
    presence_predictive: bool = PRESENCE_PREDICTIVE

    def common(self, images: int, indexed: int) -> bool:
        return indexed > 0 and images >= self.common_share * indexed


@dataclass(frozen=True)
class WordCount:
    """One query word in the index: ``images`` hold it (at most: its rarest needed piece's count),
    ``ids``: its pieces' vocabulary ids, ``needed``: those an image must hold (all but a plural
    ending, or its calibrated pieces), ``key``: the one of them whose weight must reach ``floor``,
    ``idf``: its inverse document frequency in the index (0 when common, and when the rule's
    ``min_evidence`` is 0: then the evidence is not weighed), ``partial``: no image holds every
    needed piece but some image holds one (an uncalibrated model may write only the telling ones),
    ``presence``: its calibrated test, ``verdict``: what the test said on this index (``with_verdicts``)."""

    word: str
    tokens: tuple[str, ...]
    ids: tuple[int, ...]
    images: int
    common: bool
    idf: float
    needed: tuple[int, ...]
    key: int
    floor: float
    partial: bool = False
    presence: Presence | None = None
    verdict: Verdict | None = None

    @property
    def by_chance(self) -> bool:
        """Tested, and held strongly by no more images than look-alikes give by chance."""
        return self.verdict is not None and not self.verdict.present


@dataclass(frozen=True)
class QueryCounts:
    """What the index holds of a query's words (from one ``TermStatistics``)."""

    indexed: int  # images in the index
    words: list[WordCount]

    numbers: frozenset[str] = frozenset()  # number words that make no match on their own
    function: frozenset[str] = frozenset()  # function words that make no match on their own
    relation: frozenset[str] = frozenset()  # relation words that make no match on their own

    @property
    def informative(self) -> list[WordCount]:
        alone = self.numbers | self.function | self.relation  # words that name nothing
        return [w for w in self.words if not w.common and w.word not in alone]


def count_words(
    words: Sequence[Word], ids_of: Mapping[str, int], stats: TermStatistics, rule: MatchRule
) -> QueryCounts:
    """Per word (each once), how many images hold it, whether it is common and what it weighs."""
    out: list[WordCount] = []
    for word in dict.fromkeys(words):  # a word the query repeats counts once
        ids = tuple(ids_of[t] for t in word.tokens if t in ids_of)
        if not ids:
            continue
        calibrated = calibration_of(word.text, ids, rule)
        presence = None
        if calibrated is not None:
            needed, key, floor = calibrated.pieces, calibrated.key, calibrated.floor
            presence = calibrated.presence
        else:
            needed = tuple(ids_of[t] for t in needed_pieces(word.tokens) if t in ids_of) or ids
            key = needed[0]
            floor = max(rule.min_weight, rule.unseen_floors.get(key, 0.0))
        images = min(int(stats.df.get(i, 0)) for i in needed)
        partial = images == 0 and any(stats.df.get(i, 0) > 0 for i in needed)
        common = rule.common(images, stats.n_docs)
        weighed = not common and rule.min_evidence > 0
        idf = float(idf_array([images], stats.n_docs)[0]) if weighed else 0.0
        out.append(
            WordCount(word.text, word.tokens, ids, images, common, idf, needed, key, floor, partial, presence)
        )
    numbers = frozenset() if rule.numbers_match else frozenset(w.word for w in out if is_number(w.word))
    function = frozenset()
    if not rule.function_words_match:
        function = frozenset(w.word for w in out if w.word.lower() in FUNCTION_WORDS)
    relation = frozenset()
    if not rule.relation_words_match:
        relation = frozenset(w.word for w in out if w.word.lower() in RELATION_WORDS)
    return QueryCounts(int(stats.n_docs), out, numbers, function, relation)


def calibration_of(word: str, ids: Sequence[int], rule: MatchRule) -> WordFloor | None:
    """``word``'s calibrated floor, or with ``plural_floors`` its singular's when the plural's own
    pieces hold the singular's (``english.singular_forms``): captions say "two banjos" less often than
    "a banjo", so a calibration may see only the singular, and "banjos" is ``banjo`` + ``##s``."""
    own = rule.word_floors.get(word)
    if own is not None or not rule.plural_floors:
        return own
    for form in singular_forms(word):
        floor = rule.word_floors.get(form)
        if floor is not None and set(floor.pieces) <= set(ids):
            return floor
    return None


def to_test(counts: QueryCounts, rule: MatchRule) -> dict[str, tuple[int, Presence]]:
    """The informative words a presence test can decide (calibrated with one, held by some image);
    none when the rule's ``presence_alpha`` is 0 (the test is off)."""
    if rule.presence_alpha <= 0:
        return {}
    return {w.word: (w.key, w.presence) for w in counts.informative if w.presence is not None and w.images}


def with_verdicts(counts: QueryCounts, verdicts: Mapping[str, Verdict], rule: MatchRule) -> QueryCounts:
    """``counts`` with each tested word's verdict: one beyond chance needs ``present_floor_scale`` of
    its floor, one not beyond chance is held by no image (``held``)."""
    words = []
    for w in counts.words:
        verdict = verdicts.get(w.word)
        if verdict is not None:
            floor = w.floor * rule.present_floor_scale if verdict.present else w.floor
            w = replace(w, verdict=verdict, floor=floor)
        words.append(w)
    return replace(counts, words=words)


def _held_weight(hit: Hit, word: WordCount) -> float | None:
    """The weight of ``word``'s key piece in ``hit`` when ``hit`` holds the word (each needed
    piece, the key with at least the word's floor), else None."""
    terms = hit.contributions or {}
    if word.by_chance or not all(i in terms for i in word.needed):
        return None
    weight = terms[word.key][0]
    return weight if weight >= word.floor else None


def held(hit: Hit, word: WordCount) -> bool:
    """Whether ``hit`` holds each needed piece of ``word``, the key with at least the word's floor."""
    return _held_weight(hit, word) is not None


def is_match(hit: Hit, counts: QueryCounts, rule: MatchRule) -> bool:
    """Whether ``hit`` holds an informative word with at least ``rule.min_evidence``."""
    for w in counts.informative:
        weight = _held_weight(hit, w)
        if weight is not None and (rule.min_evidence <= 0 or saturate(weight) * w.idf >= rule.min_evidence):
            return True
    return False


def select(
    hits: Sequence[Hit], counts: QueryCounts, rule: MatchRule, *, require_match: bool, min_score: float
) -> list[Hit]:
    """The hits to present: those scoring ``min_score`` or more and, with ``require_match``, matching."""
    return [h for h in hits if h.score >= min_score and (not require_match or is_match(h, counts, rule))]
