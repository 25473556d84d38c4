"""The English the match rule knows (``service.matching``): words that name nothing on their own,
and the singular a plural may stand for.

Rules, not a dictionary: the captions and queries are short noun phrases, and a wrong guess costs
nothing, since a singular's calibration is only taken when the plural's own word-pieces hold it
(``matching.MatchRule.plural_floors``).
"""

from __future__ import annotations

# Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET (Elasticsearch's `_english_` stop words), as is.
FUNCTION_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there "
    "these they this to was will with".split()
)
# The words that place one thing beside another ("left of", "next to", "in the right"): they say
# where, not what. Words that also name a thing ("top", "front", "back") are left out.
RELATION_WORDS = frozenset("left right above below next beside behind near".split())
NUMBER_WORDS = frozenset(
    "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred "
    "thousand million dozen".split()
)


def is_number(word: str) -> bool:
    """A number word or numeral: says how many, not what."""
    return word.isdigit() or word.lower() in NUMBER_WORDS


def singular_forms(word: str) -> list[str]:
    """The singulars ``word`` may be the plural of, likeliest first: "berries" -> "berry", "leaves" ->
    "leaf", "leafe", "buses" -> "bus", "ducks" -> "duck" (and "skises", a generator's plural of
    "skis", -> "skis"); none for a word that does not end in s, or ends in "ss" ("glass")."""
    w = word.lower()
    if len(w) < 3 or not w.endswith("s") or w.endswith("ss"):
        return []
    forms = []
    if w.endswith("ies") and len(w) > 4:
        forms.append(w[:-3] + "y")
    if w.endswith("ves"):
        forms += [w[:-3] + "f", w[:-3] + "fe"]
    if w.endswith("es"):
        forms.append(w[:-2])
    forms.append(w[:-1])
    return list(dict.fromkeys(forms))
