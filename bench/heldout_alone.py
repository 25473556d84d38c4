"""Held-out words asked alone: does a word that no training caption used find its object?

The held-out-words split (``scenes/objects.py``) scores whole captions, in which the held-out word
is about a quarter of the content words: the rest of the caption ranks the image for any model,
so that split says little about the word itself. Here each held-out phrase of the split
("automobile", "fruit") is the whole query, and an image of the split is relevant when it shows
an object the phrase names (a name, alias or category word of that object). A held-out phrase
may still hold seen words ("bearded person"), so the phrases whose every word is held out
("bike") are also reported apart. The control asks the same pool by the seen names and category
words of the same focus objects, which training captions used. Random ranking puts a relevant
image first with the share of relevant images ("chance@1").

    python -m bench.heldout_alone --scenes DATA [--groups G,...] [--seed 0] \\
        --model scratch=RUN_A/best --model minilm=RUN_B/best --out-dir docs/heldout-alone
"""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vsparta.bench.options import add_models_argument
from vsparta.bench.written import publish

log = logging.getLogger("vsparta.bench.heldout_alone")

KS = (1, 5, 10)


@dataclass
class PhraseQueries:
    """Phrases asked alone and, per phrase, which images of the pool show an object it names."""

    phrases: list[str]
    relevant: list[np.ndarray]  # per phrase: row indices into the pool

    def chance_at_1(self, n_images: int) -> float:
        return float(np.mean([len(r) / n_images for r in self.relevant])) if self.relevant else 0.0


def phrase_queries(records, objects, vocab, held: bool) -> PhraseQueries:
    """``held``: the held-out names and category words of the pool's focus objects; otherwise
    their seen ones. An image is relevant to a phrase when one of its objects has it as a name,
    alias or category word."""
    by_name = {o.name: o for o in objects}
    wanted: set[str] = set()
    for r in records:
        focus = by_name.get(r.metadata.get("focus") or "")
        if focus is not None:
            wanted |= set(vocab.names(focus, held) + vocab.categories(focus, held))
    named: dict[str, set[int]] = {p: set() for p in wanted}
    for i, r in enumerate(records):
        for o in r.metadata.get("objects", []):
            obj = by_name[o["name"]]
            for p in {*obj.phrases, *obj.categories} & wanted:
                named[p].add(i)
    phrases = sorted(p for p in wanted if named[p])
    return PhraseQueries(phrases, [np.array(sorted(named[p]), dtype=np.int64) for p in phrases])


def only_held_words(queries: PhraseQueries, held_words) -> PhraseQueries:
    """The phrases all of whose words are held out ("bike", not "bearded person"): no word of the
    query was in a training caption, so a seen word cannot do the finding."""
    keep = [i for i, p in enumerate(queries.phrases) if set(p.split()) <= held_words]
    return PhraseQueries([queries.phrases[i] for i in keep], [queries.relevant[i] for i in keep])


def check_split(records, objects, vocab) -> None:
    """Every caption of the held-out-words pool holds a held-out word: otherwise ``--seed`` or
    ``--groups`` do not match the scenes' (a different vocabulary), and the figures would lie."""
    held = vocab.held_forms
    missing = [r.id for r in records for c in r.captions if not held & set(c.replace(",", " ").split())]
    if missing:
        raise ValueError(
            f"{len(missing)} captions of the held-out-words split hold no held-out word for this "
            f"--seed/--groups (first: {missing[0]}): give the ones the scenes were made with"
        )


class ImageScorer:
    """One model's view of the pool, encoded once: scores any phrases as its own search would.
    A model with a frozen stem reads its regions from ``feature_cache`` (built when missing)."""

    def __init__(self, model, records, device, feature_cache: Path | None = None) -> None:
        from vsparta.model.data import ImageStore
        from vsparta.model.dense import DenseDualEncoder
        from vsparta.model.evaluate import encode_dense_images, encode_sparse
        from vsparta.model.feature_cache import attach

        self.model, self.device = model, device
        self.tokenizer = model.query_tokenizer()
        store = ImageStore(records, model.config, self.tokenizer.tokenize, cache=False)
        attach(store, model, feature_cache, device, progress=False)
        self.dense = isinstance(model, DenseDualEncoder)
        if self.dense:
            self.images = encode_dense_images(model, store, 64, device, amp=False)
        else:
            sparse = encode_sparse(model, store, 64, device, amp=False)
            self.vocab_size = sparse.vocab_size
            self.terms = sparse.term_matrix(model.config.top_n)

    def scores(self, phrases: list[str]) -> np.ndarray:
        """``[phrases, images]``."""
        from vsparta.model.evaluate import Queries, encode_dense_queries, query_matrix, sparse_scores

        ids = [self.tokenizer.tokenize(p) for p in phrases]
        queries = Queries(phrases, ids, np.zeros(len(phrases), dtype=np.int64))
        if self.dense:
            return encode_dense_queries(self.model, queries, 256, self.device, amp=False) @ self.images.T
        return sparse_scores(self.terms, query_matrix(queries, self.vocab_size))


def hit_rates(scores: np.ndarray, queries: PhraseQueries) -> dict[str, float]:
    """Share of phrases with a relevant image in the top k, and the mean reciprocal rank of the
    first relevant one; ties count against the phrase (a relevant image must beat every other)."""
    first = []
    for row, rel in zip(scores, queries.relevant, strict=True):
        best = row[rel].max()
        irrelevant = np.delete(row, rel)
        first.append(1 + int((irrelevant >= best).sum()))
    ranks = np.array(first)
    out = {f"hit@{k}": float((ranks <= k).mean()) for k in KS}
    out["mrr"] = float((1.0 / ranks).mean())
    return out


def evaluate_models(
    models: list[tuple[str, Path]],
    scenes: Path,
    seed: int,
    groups: tuple[str, ...],
    feature_caches: Path | None = None,
) -> dict:
    import torch

    from vsparta.core.manifest import read_manifest
    from vsparta.model.dense import load_model
    from vsparta.scenes.objects import held_out

    records = read_manifest(scenes / "heldout_words.jsonl")
    objects, vocab = held_out(seed, groups)
    check_split(records, objects, vocab)
    held = phrase_queries(records, objects, vocab, True)
    sets = {"held-out": held, "held-out, every word": only_held_words(held, vocab.held_words)}
    sets["seen (control)"] = phrase_queries(records, objects, vocab, False)
    rows = []
    for name, path in models:
        model = load_model(path)
        cache = None if feature_caches is None else feature_caches / f"{scenes.name}-{name}"
        scorer = ImageScorer(model, records, torch.device("cpu"), cache)
        for label, queries in sets.items():
            scores = scorer.scores(queries.phrases)
            row = {"model": name, "path": str(path), "words": label, "phrases": len(queries.phrases)}
            row |= hit_rates(scores, queries) | {"chance@1": queries.chance_at_1(len(records))}
            rows.append(row)
            log.info("%s, %s words: %s", name, label, rows[-1])
    examples = {label: q.phrases[:12] for label, q in sets.items()}
    return {"images": len(records), "rows": rows, "examples": examples}


def markdown(result: dict, command: str) -> str:
    lines = [
        "# Held-out words asked alone",
        "",
        f"Command: `{command}`",
        "",
        f"Pool: the {result['images']} images of the held-out-words split. A query is one phrase; an "
        "image is relevant when one of its objects has the phrase as a name, alias or category word. "
        "hit@k: share of phrases with a relevant image in the top k (ties count against it); chance@1: "
        "the mean share of relevant images (random ranking's hit@1).",
        "",
        "| model | words | phrases | hit@1 | hit@5 | hit@10 | MRR | chance@1 |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['model']} | {r['words']} | {r['phrases']} | {100 * r['hit@1']:.1f} "
            f"| {100 * r['hit@5']:.1f} | {100 * r['hit@10']:.1f} | {r['mrr']:.3f} "
            f"| {100 * r['chance@1']:.1f} |"
        )
    lines += ["", "First phrases of each set:", ""]
    lines += [f"- {label}: {', '.join(p)}" for label, p in result["examples"].items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--scenes", type=Path, required=True, help="the object scenes folder (heldout_words.jsonl)"
    )
    p.add_argument("--seed", type=int, default=0, help="the seed the scenes were made with")
    p.add_argument(
        "--groups", default="", help="the emoji groups the scenes were made with (comma-separated)"
    )
    add_models_argument(p)
    p.add_argument("--out-dir", type=Path, help="write heldout-alone.{md,json} here")
    p.add_argument(
        "--feature-cache",
        type=Path,
        help="folder for the pool's regions of models with a frozen stem (one cache per model name)",
    )
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not (args.scenes / "heldout_words.jsonl").is_file():
        p.error(f"{args.scenes} has no heldout_words.jsonl: give an object scenes folder with that split")
    groups = tuple(g.strip() for g in args.groups.split(",") if g.strip())
    try:
        result = evaluate_models(args.model, args.scenes, args.seed, groups, args.feature_cache)
    except ValueError as exc:
        print(f"heldout_alone: {exc}", file=sys.stderr)
        return 2
    return publish("heldout_alone", "heldout-alone", result, markdown, argv, args.out_dir)


if __name__ == "__main__":
    sys.exit(main())
