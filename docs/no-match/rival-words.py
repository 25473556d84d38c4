"""Does an image hold a word, or a look-alike of it? Rival words, measured against the presence test
(docs/no-match.md, "Rival words"), on half of the whole catalog: plural-floors.sh's model,
10,000-image index and 8,000 calibration scenes, the service's defaults otherwise. Not in the product.

The presence test asks the index whether it holds a word beyond chance; when the model writes an
object's word on its look-alikes as strongly as on the object, it cannot tell, and either refuses
the word everywhere (recall lost) or accepts it everywhere (look-alikes shown). This asks each image
instead: does it hold one of the word's **rivals** more strongly than the word itself? A rival of w
is a calibrated word v (not an alias or kind of w) whose calibration images often hold w's key
strongly (at least a share of them: 0.1, 0.2, 0.35): the look-alikes that make w's null rate. Weights are
compared relative to each word's strong weight (its presence test's): an image where some rival
reaches ``beta`` times w's relative weight is explained by the rival, and does not hold w.

Rules compared (each on the same answers, as the benchmark does):
- **presence** (the service's defaults);
- **rivals**: no presence test, the calibrated floors, rival veto;
- **presence, else rivals**: a word proven beyond chance matches as now; one not proven matches the
  images where no rival explains it (instead of none);
- **presence and rivals**: the veto on every calibrated word;
- **rank**: no presence test; an image does not hold w when 3 words that do not name it outweigh it;
- **oracle**: no presence test; an image does not hold w when a word its own captions use outweighs
  it: what no engine knows, so a bound on what any such veto could do.

Usage, from the repository root after plural-floors.sh's indexes exist (~4 min; prints the table of
docs/no-match/rival-words-half-10k.md):
  .venv/bin/python docs/no-match/rival-words.py
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np
from half_catalog import MANIFESTS, SPEC, calibrated_word, study

from vsparta.bench import no_match
from vsparta.bench.search_runs import recall
from vsparta.core.manifest import read_manifest
from vsparta.service.english import FUNCTION_WORDS, is_number
from vsparta.service.matching import count_words, with_verdicts, words_of
from vsparta.service.term_floors import (
    FloorRule,
    caption_words,
    related_images,
)
from vsparta.termindex import open_index

TEMPLATE_SHARE = 0.2  # a word the captions use on more images than this names no object: no rival
RANK_WORDS = 3  # the "rank" rule: this many words that do not name w outweighing it explain it away


@dataclass
class Objects:
    """The calibrated words that name things: a presence test, no function or number word, not a
    caption template's word."""

    words: list[str]
    positives: np.ndarray  # [words, images]
    named: np.ndarray  # [words, images]: the word's positives and the images of its related words
    names: np.ndarray  # [v, w]: half of v's images are named w, or v shares w's key
    by_key: dict[int, list[int]]  # each key's words
    strong: np.ndarray  # their strong weights


def object_words(table, floors, related) -> Objects:  # noqa: ANN001
    n = table.images
    words = [
        w
        for w, f in floors.items()
        if f.presence is not None
        and f.presence.weight > 0
        and w.lower() not in FUNCTION_WORDS
        and not is_number(w)
        and table.positive[w].sum() <= TEMPLATE_SHARE * n
    ]
    positives = np.stack([table.positive[w] for w in words]).astype(np.float32)
    named = np.stack([related.get(w, np.zeros(n, dtype=bool)) | table.positive[w] for w in words])
    shared = positives @ named.astype(np.float32).T
    keys = np.array([floors[w].key for w in words])
    names = (shared >= 0.5 * positives.sum(axis=1)[:, None]) | (keys[:, None] == keys[None, :])
    by_key: dict[int, list[int]] = {}
    for k, w in enumerate(words):
        by_key.setdefault(floors[w].key, []).append(k)
    strong = np.array([floors[w].presence.weight for w in words])
    return Objects(words, positives, named, names, by_key, strong)


def rival_table(table, floors, objects: Objects, share: float, least: int = 2) -> dict[str, list[str]]:  # noqa: ANN001
    """Per object word w, its rivals (module docstring): words v that do not name w, of whose
    calibration images at least ``share`` (and ``least``) hold w's key strongly, not named w."""
    strong = np.stack(  # [words, images]
        [
            ~objects.named[k] & (table.weights[floors[w].key] >= objects.strong[k])
            for k, w in enumerate(objects.words)
        ]
    ).astype(np.float32)
    inside = objects.positives @ strong.T  # [v, w]: v's images that hold w's key strongly
    sizes = objects.positives.sum(axis=1)
    ok = (inside >= least) & (inside >= share * sizes[:, None]) & ~objects.names
    out: dict[str, list[str]] = {}
    for k, w in enumerate(objects.words):
        rivals = [objects.words[v] for v in np.flatnonzero(ok[:, k])]
        if rivals:
            out[w] = rivals
    return out


def main() -> None:
    loaded = study()
    tokenizer, table, captions = loaded.tokenizer, loaded.table, loaded.captions
    inside, outside = loaded.inside, loaded.outside
    with open_index(SPEC) as index:
        docs = {d.id: dict(d.weights) for d in index.iter_documents()}
    rule, base = loaded.defaults, loaded.base
    floors = rule.word_floors
    related = related_images(table, 0.3, FloorRule().min_positives)
    verdicts = no_match.presence_verdicts(SPEC, [*inside, *outside], rule, {})
    by_test = calibrated_word(floors)
    print(f"R@10 without a rule: {base:.2f}; {len(inside)} in, {len(outside)} out queries.\n")
    print("| rule | rival share | beta | words with rivals | R@10 | d R@10 | out: no match % |")
    print("|---|---|---|---|---|---|---|")

    def relative(doc: dict[int, float], word: str) -> float:
        f = floors[word]
        return doc.get(f.key, 0.0) / f.presence.weight

    objects = object_words(table, floors, related)
    position = {w: k for k, w in enumerate(objects.words)}
    by_key, kin, strong_of = objects.by_key, objects.names | objects.names.T, objects.strong
    tested = set(objects.words)
    said = {  # what each indexed image's own captions say: the truth no engine has
        r.id: {w.text for w in caption_words(tokenizer, r.captions)}
        for m in MANIFESTS
        for r in read_manifest(m)
    }

    def judge(rivals: dict[str, list[str]], mode: str, beta: float, answers) -> tuple[list, list]:  # noqa: ANN001
        ranked, none = [], []
        for a in answers:
            counts = count_words(words_of(a.tokens), a.ids, a.stats, rule)
            proven = {w.word: verdicts.get(w.word) for w in counts.words}
            if mode in ("presence", "presence and rivals"):
                counts = with_verdicts(counts, verdicts, rule)
            else:  # proven words take the present floor; the others keep theirs
                counts = with_verdicts(counts, {w: v for w, v in verdicts.items() if v.present}, rule)
            kept = []
            for hit in a.hits:
                terms = hit.contributions or {}
                for w in counts.informative:
                    if w.by_chance or not all(i in terms for i in w.needed) or terms[w.key][0] < w.floor:
                        continue
                    own = by_test.get((w.key, w.presence)) if w.presence else None
                    veto = own in rivals and (
                        mode in ("rivals", "presence and rivals")
                        or (
                            mode == "presence, else rivals"
                            and not (proven[w.word] and proven[w.word].present)
                        )
                    )
                    if mode == "rank" and own in position:
                        doc = docs[hit.id]
                        k, mine = position[own], relative(doc, own)
                        above = 0
                        for key, weight in doc.items():
                            for v in by_key.get(key, ()):
                                if not kin[v, k] and weight / strong_of[v] >= beta * mine:
                                    above += 1
                        if above >= RANK_WORDS:
                            continue
                    if mode == "oracle" and own in position and own not in said[hit.id]:
                        doc = docs[hit.id]
                        mine = relative(doc, own)
                        if any(relative(doc, v) >= beta * mine for v in said[hit.id] & tested):
                            continue
                    if veto:
                        doc = docs[hit.id]
                        mine = relative(doc, own)
                        if any(relative(doc, v) >= beta * mine for v in rivals[own]):
                            continue
                    if mode == "presence, else rivals" and proven[w.word] and not proven[w.word].present:
                        if own not in rivals:
                            continue  # no rival to ask: the test's verdict stands
                    kept.append(hit)
                    break
            ranked.append([h.id for h in kept[: no_match.K]])
            none.append(not kept)
        return ranked, none

    def row(name: str, rivals: dict, share: str, beta: str, mode: str, b: float) -> None:
        ranked, _ = judge(rivals, mode, b, inside)
        _, none = judge(rivals, mode, b, outside)
        r10 = recall(ranked, captions)["R@10"]
        cells = [
            name,
            share,
            beta,
            len(rivals),
            f"{r10:.2f}",
            f"{r10 - base:+.2f}",
            f"{no_match._pct(none):.1f}",
        ]
        print("| " + " | ".join(str(c) for c in cells) + " |")
        sys.stdout.flush()

    row("presence (the defaults)", {}, "-", "-", "presence", 1.0)
    for beta in (1.0, 1.5):
        row("oracle: a word its own captions use outweighs it", {}, "-", f"{beta:g}", "oracle", beta)
    for beta in (1.0, 1.5, 2.0):
        row(f"rank: fewer than {RANK_WORDS} other words above it", {}, "-", f"{beta:g}", "rank", beta)
    for share in (0.1, 0.2, 0.35):
        rivals = rival_table(table, floors, objects, share)
        for mode in ("rivals", "presence, else rivals", "presence and rivals"):
            for beta in (0.8, 1.0, 1.25):
                row(mode, rivals, f"{share:g}", f"{beta:g}", mode, beta)


if __name__ == "__main__":
    main()
