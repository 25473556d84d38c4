"""``vsparta bench no-match-floors``: the match rule with a floor per word, calibrated on images
outside the index (``MatchRule.word_floors``; ``vsparta calibrate`` makes them for the service).

Why: one floor for every word cannot tell "mouse" written weakly onto a bird from "sparrow"
written onto a sparrow, when a model writes some words with large weights everywhere. A word's own
floor comes from how the model weighs it on calibration images that show an object it names
(``--positives objects``, the scenes' labels) or whose captions use it (``captions``, what
``vsparta calibrate`` has): the pieces the model writes on at least ``--piece-shares`` of them,
the ``--quantiles`` q-quantile of the key piece's weight there, and on the others the
(1 - p)-quantile for ``--negative-quantiles`` p, combined as their larger (``max``) or their mean
(``mid``) by ``service.term_floors.word_floors``; a word with fewer than ``--min-positives``
positive images keeps the rule's ``min_weight`` and every piece. With the default floors, the
presence test (``service.presence``) too: ``--presence-quantiles`` x ``--presence-alphas`` x
``--presence-ratios`` x ``--present-floor-scales`` x ``--related-shares`` (``FloorRule.related_share``)
x ``--presence-scans`` (``FloorRule.presence_scan``, or one strong weight) x ``--presence-joints``
(``MatchRule.presence_joint``) x ``--presence-predictives`` (``MatchRule.presence_predictive``);
the best such rule is then run once more through the service's pipeline, with and without the test
(its figures again, and its cost per query). ``--plural-floors yes,no`` gives each rule with a floor
per word with and without plurals taking their singulars' floors (``MatchRule.plural_floors``),
``--unseen-quantiles`` with each unseen floor of words the calibration never saw (none: the rule's).

The calibration images are a manifest indexed by the same model into their own index (fresh
scenes of every subgroup, none of them in the searched index). The in / out queries, the answers
and the verdicts are ``vsparta bench no-match``'s (``collect``, ``judge``, ``recall``); the out
queries are also split by whether they use a category word of the catalog ("a mammal", which the
captions use for only some images of their kind) or only object words. Writes a table and its
JSON into ``--out-dir``.
"""

from __future__ import annotations

import argparse
import itertools
import logging
import time
from pathlib import Path
from typing import Any

from vsparta.bench import no_match
from vsparta.bench.no_match_floors_report import WORD_COUNT_DEPTH, markdown
from vsparta.bench.search_runs import caption_queries, meta, recall
from vsparta.bench.written import write_report

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    no_match.add_arguments(parser)
    parser.set_defaults(min_weights=[1.0, 2.0], common_shares=[0.5, 0.6], min_evidence=[0.0])
    parser.add_argument("--calibration-index", required=True, help="backend spec: the calibration images")
    parser.add_argument("--calibration-manifest", required=True, type=Path, help="their manifest")
    parser.add_argument(
        "--quantiles", type=no_match._floats, default=[0.05, 0.1, 0.2, 0.5],
        help="comma list of q: a floor is the q-quantile of the word's weight where it belongs",
    )  # fmt: skip
    parser.add_argument(
        "--negative-quantiles", type=no_match._floats, default=[0.0, 0.01, 0.05],
        help="comma list of p: combined with the (1 - p)-quantile where it does not belong",
    )  # fmt: skip
    parser.add_argument(
        "--combine", type=lambda t: t.split(","), default=["max", "mid"],
        help="comma list of max (the larger of the two) and mid (their mean)",
    )  # fmt: skip
    parser.add_argument(
        "--min-positives", type=int, default=3,
        help="a word on fewer calibration images that show it keeps the rule's floor",
    )  # fmt: skip
    parser.add_argument(
        "--positives", choices=("objects", "captions"), default="objects",
        help="a word's positive calibration images: those showing an object it names (the scenes' "
        "labels) or those whose captions use it (what `vsparta calibrate` has)",
    )  # fmt: skip
    parser.add_argument(
        "--piece-shares", type=no_match._floats, default=[0.5],
        help="comma list: a word's piece counts when the model writes it on this share of its positives",
    )  # fmt: skip
    parser.add_argument(
        "--presence-quantiles", type=no_match._optional_floats, default=[None, 0.5, 0.65, 0.75],
        help="comma list of FloorRule.presence_quantile (none: no presence test), each with the "
        "default floors",
    )  # fmt: skip
    parser.add_argument(
        "--presence-alphas", type=no_match._floats, default=[0.18],
        help="comma list of MatchRule.presence_alpha",
    )  # fmt: skip
    parser.add_argument(
        "--presence-ratios", type=no_match._floats, default=[1.0, 1.5, 2.0],
        help="comma list of MatchRule.presence_ratio",
    )  # fmt: skip
    parser.add_argument(
        "--present-floor-scales", type=no_match._floats, default=[0.75],
        help="comma list of MatchRule.present_floor_scale",
    )  # fmt: skip
    parser.add_argument(
        "--presence-scans", type=no_match._yes_no, default=[True],
        help="comma list of yes/no: whether the presence test also tries FloorRule.presence_scan's "
        "other strong weights (the calibration's default) or its one",
    )  # fmt: skip
    parser.add_argument(
        "--presence-joints", type=no_match._yes_no, default=[True],
        help="comma list of yes/no: whether the scan shares alpha by its weights' exact joint chance "
        "(MatchRule.presence_joint) or by Bonferroni",
    )  # fmt: skip
    parser.add_argument(
        "--presence-predictives", type=no_match._yes_no, default=[True],
        help="comma list of yes/no: whether the chance count is as uncertain as the calibration's size "
        "says (MatchRule.presence_predictive: negative binomial) or exact (Poisson)",
    )  # fmt: skip
    parser.add_argument(
        "--related-shares", type=no_match._optional_floats, default=[None],
        help="comma list of FloorRule.related_share (none: every image whose captions lack a word is "
        "its negative), each with the presence test",
    )  # fmt: skip
    parser.add_argument(
        "--unseen-quantiles", type=no_match._optional_floats,
        help="comma list of FloorRule.unseen_quantile (none: a word the calibration never saw keeps the "
        "rule's floor), each with every rule with a floor per word (default: the calibration's)",
    )  # fmt: skip
    parser.set_defaults(name="no-match-floors")


def object_words(tokenizer: Any, record: Any, linking: set[str]) -> set[Any]:
    """The words naming one of the image's objects (names, aliases, categories and their plurals;
    never a caption template's linking or counting word)."""
    from vsparta.scenes.emoji_catalog import catalog
    from vsparta.scenes.object_words import plural
    from vsparta.service.matching import words_of

    by_name = {o.name: o for o in catalog()}
    words = set()
    for drawn in record.metadata["objects"]:
        obj = by_name[drawn["name"]]
        for phrase in (*obj.phrases, *obj.categories):
            for text in (phrase, plural(phrase)):
                tokens = [tokenizer.id_to_token(i) for i in tokenizer.tokenize(text)]
                words.update(w for w in words_of(tokens) if w.text not in linking)
    return words


def linking_words() -> set[str]:
    from vsparta.scenes.object_captions import template_words
    from vsparta.scenes.object_words import NUMBER_WORDS

    return set(template_words() | set(NUMBER_WORDS.values())) - no_match.NOT_OBJECTS


def calibration(tokenizer: Any, manifest: Path, spec: str, positives: str) -> Any:
    """The calibration images' ``term_floors.Calibration``: a word's positives are the images that
    show an object it names (``objects``, the scenes' own labels) or whose captions use it
    (``captions``, what ``vsparta calibrate`` has)."""
    from vsparta.core.manifest import read_manifest
    from vsparta.service.term_floors import calibration_table, caption_words, documents_of
    from vsparta.termindex import open_index

    records = {r.id: r for r in read_manifest(manifest)}
    ids = sorted(records)
    with open_index(spec) as index:
        docs = documents_of(index, [records[i] for i in ids])
    linking = linking_words()
    if positives == "captions":
        shows = [caption_words(tokenizer, records[i].captions) for i in ids]
    else:
        shows = [object_words(tokenizer, records[i], linking) for i in ids]
    return calibration_table(tokenizer, shows, docs)


def category_words() -> set[str]:
    """Words of the catalog's categories and their plurals ("mammal", "transports")."""
    from vsparta.scenes.emoji_catalog import catalog
    from vsparta.scenes.object_words import plural

    words = {w for o in catalog() for c in o.categories for w in c.split()}
    return words | {plural(w) for w in words}


def grid(args: argparse.Namespace, inside: list[Any], outside: list[Any], captions: list[Any],
         table: Any) -> dict[str, Any]:  # fmt: skip
    """Every rule: one floor (the ``no-match`` grid) and a floor per word, on the same answers."""
    from vsparta.service.matching import MatchRule, words_of
    from vsparta.service.term_floors import FloorRule, unseen_floors, word_floors

    base = recall([[h.id for h in a.hits[: no_match.K]] for a in inside], captions)
    categories = category_words()
    by_category = [bool({w.text for w in words_of(a.tokens)} & categories) for a in outside]
    per_word = [(None, None, "-", None, None, 0.05, 1.0, 1.0, None, False, False, False)] + [
        (q, p, c, piece, None, 0.05, 1.0, 1.0, None, False, False, False)
        for q in args.quantiles for p in (None, *args.negative_quantiles)
        for c in (["-"] if p is None else args.combine) for piece in args.piece_shares
    ]  # fmt: skip
    default = FloorRule()
    per_word += [  # the presence test, with the default floors
        (default.quantile, default.negative_quantile, default.combine, default.piece_share, pq, alpha, scale,
         ratio, related, scan, joint, predictive)
        for pq in args.presence_quantiles if pq is not None
        for alpha in args.presence_alphas for scale in args.present_floor_scales
        for ratio in args.presence_ratios for related in args.related_shares for scan in args.presence_scans
        for joint in args.presence_joints if scan or not joint  # one weight: no scan to share alpha
        for predictive in args.presence_predictives
    ]  # fmt: skip
    rows, known = [], {}
    choices = itertools.product(
        per_word,
        args.common_shares,
        args.min_weights,
        args.numbers_match,
        args.function_words_match,
        args.relation_words_match,
        itertools.product(args.plural_floors, args.unseen_quantiles),
    )
    unseen_of = {u: unseen_floors(table, u) for u in args.unseen_quantiles}
    for per, share, floor, numbers, function, relation, (plural, unseen) in choices:
        q, p, combine, piece, pq, alpha, scale, ratio, related, scan, joint, predictive = per
        if q is None and (plural, unseen) != (args.plural_floors[0], args.unseen_quantiles[0]):
            continue  # no floors per word: no singular's to take, no calibration to say what is unseen
        if q is None:
            words = {}
        else:
            how = FloorRule(q, p, combine, args.min_positives, piece, pq, related,  # type: ignore[arg-type]
                            presence_scan=default.presence_scan if scan else ())  # fmt: skip
            words = word_floors(table, how)
        more = unseen_of[unseen] if q is not None else {}
        rule = MatchRule(
            share,
            floor,
            0.0,
            numbers,
            words,
            alpha,
            scale,
            ratio,
            function,
            plural,
            more,
            relation,
            joint,
            predictive,
        )
        tested = no_match.presence_verdicts(args.index, [*inside, *outside], rule, known) if pq else None
        ranked, _, _ = no_match.judge(inside, rule, tested)
        _, out_none, _ = no_match.judge(outside, rule, tested)
        pairs = list(zip(out_none, by_category, strict=True))
        rec = recall(ranked, captions)
        rows.append({
            "presence_quantile": pq, "presence_alpha": alpha if pq else None,
            "present_floor_scale": scale if pq else None, "presence_ratio": ratio if pq else None,
            "related_share": related, "presence_scan": scan if pq else None,
            "presence_joint": joint if pq else None, "presence_predictive": predictive if pq else None,
            "q": q, "p": p, "combine": combine, "piece_share": piece, "common_share": share,
            "min_weight": floor, "numbers_match": numbers, "function_words_match": function,
            "relation_words_match": relation,
            "plural_floors": plural, "unseen_quantile": unseen if q is not None else None,
            "words_with_floors": len(words),
            "R@10": rec["R@10"],
            "d_R@10": rec["R@10"] - base["R@10"], "out_no_match": no_match._pct(out_none),
            "out_no_match_category_words": no_match._pct([n for n, c in pairs if c]),
            "out_no_match_object_words": no_match._pct([n for n, c in pairs if not c]),
        })  # fmt: skip
    best = {}
    kinds = [
        ("one floor", lambda r: r["q"] is None),
        ("a floor per word", lambda r: r["q"] is not None and r["presence_quantile"] is None),
        ("a floor per word and the presence test", lambda r: r["presence_quantile"] is not None),
    ]
    options = list(itertools.product(args.plural_floors, args.unseen_quantiles))
    if len(options) > 1:  # each per-word kind with each choice of plural floors and unseen floors
        kinds = kinds[:1] + [
            (f"{kind}, plural floors {'yes' if o[0] else 'no'}, unseen quantile {o[1]}",
             lambda r, keep=keep, o=o: keep(r) and (r["plural_floors"], r["unseen_quantile"]) == o)
            for kind, keep in kinds[1:] for o in options
        ]  # fmt: skip
    for kind, keep in kinds:
        kind_rows = [r for r in rows if keep(r)]
        if not kind_rows:
            continue
        allowed = [r for r in kind_rows if r["d_R@10"] >= -args.max_drop]
        if allowed:
            best[kind] = max(allowed, key=lambda r: (r["out_no_match"], r["d_R@10"])) | {"within": True}
        else:  # none keeps recall: the one that costs least, marked as such
            best[kind] = max(kind_rows, key=lambda r: (r["d_R@10"], r["out_no_match"])) | {"within": False}
    return {"baseline": base, "rows": rows, "best": best, "out_with_category_words": sum(by_category)}


def word_verdicts(args: argparse.Namespace, inside: list[Any], outside: list[Any], table: Any
                  ) -> dict[str, Any]:  # fmt: skip
    """The service's default presence test word by word: of the calibrated words the in queries use
    (words the index holds) and those only out queries use, the share proven beyond chance, and the
    median count of images holding each strongly against what look-alikes give by chance."""
    from statistics import median

    from vsparta.service.matching import MatchRule
    from vsparta.service.term_floors import FloorRule, word_floors
    from vsparta.termindex import open_index

    floors = word_floors(table, FloorRule())
    rule = MatchRule(word_floors=floors)
    known: dict = {}  # each word asked of the index once
    verdicts = no_match.presence_verdicts(args.index, [*inside, *outside], rule, known)
    held = set(no_match.presence_verdicts(args.index, inside, rule, known))
    tests = no_match.tests_of([*inside, *outside], rule)  # a plural's may be its singular's
    out: dict[str, Any] = {}
    with open_index(args.index) as index:
        for side, words in (("in", sorted(held)), ("out", sorted(set(verdicts) - held))):
            strong = []
            for word in words:
                key, weight = tests[word][0], tests[word][1].weight
                hits = index.search({key: 1.0}, k=WORD_COUNT_DEPTH, explain=True)
                strong.append(sum((h.contributions or {}).get(key, (0.0,))[0] >= weight for h in hits))
            out[side] = {"words": len(words)} | ({
                "proven_pct": no_match._pct([verdicts[w].present for w in words]),
                "median_strong_images": median(strong),
                "median_expected": median(verdicts[w].expected for w in words),
                "median_needed": median(verdicts[w].needed for w in words),
            } if words else {})  # fmt: skip
    return out


def pipeline_check(args: argparse.Namespace, tokenizer: Any, table: Any, row: dict[str, Any],
                   inside: list[Any], outside: list[Any]) -> dict[str, Any]:  # fmt: skip
    """A presence row's rule through the service's whole pipeline (as ``vsparta serve`` runs it,
    verdicts remembered per index version), and the same rule without the test: the grid's figures
    once more, and what the test costs a query."""
    from dataclasses import replace

    from vsparta.service.term_floors import FloorRule, unseen_floors, word_floors

    how = FloorRule(row["q"], row["p"], row["combine"], args.min_positives, row["piece_share"],
                    row["presence_quantile"], row.get("related_share"),
                    presence_scan=FloorRule().presence_scan if row.get("presence_scan") else ())  # fmt: skip
    floors = word_floors(table, how)
    rule = no_match.rule_of(row, word_floors=floors, presence_alpha=row["presence_alpha"],
                            present_floor_scale=row["present_floor_scale"],
                            presence_ratio=row["presence_ratio"],
                            unseen_floors=unseen_floors(table, row.get("unseen_quantile")))  # fmt: skip
    return {
        name: no_match.check(args, tokenizer, r, inside, outside)
        for name, r in (("with the test", rule), ("without it", replace(rule, presence_alpha=0.0)))
    }


def run(args: argparse.Namespace) -> int:
    from vsparta.model.query_tokenizer import QueryTokenizer
    from vsparta.service.term_floors import UNSEEN_QUANTILE

    start = time.perf_counter()
    args.unseen_quantiles = args.unseen_quantiles or [UNSEEN_QUANTILE]
    tokenizer = QueryTokenizer.from_pretrained(args.model)
    captions = caption_queries(args.in_split, args.captions_per_image)
    outside_captions = no_match.absent_object_captions(args.out_split, args.index_manifest)
    table = calibration(tokenizer, args.calibration_manifest, args.calibration_index, args.positives)
    inside = no_match.collect(tokenizer, args.index, captions)
    outside = no_match.collect(tokenizer, args.index, outside_captions)
    result = grid(args, inside, outside, captions, table)
    result |= {"in_queries": len(inside), "out_queries": len(outside), "calibration_images": table.images}
    result["word_verdicts"] = word_verdicts(args, inside, outside, table)
    presence = [r for k, r in result["best"].items() if k.startswith("a floor per word and the presence")]
    tested = presence[0] if presence else None
    if tested is not None:
        result["pipeline"] = pipeline_check(args, tokenizer, table, tested, captions, outside_captions)
    result["meta"] = meta("no-match-floors", time.perf_counter() - start)
    text = markdown(result, args)
    print(text)  # noqa: T201 - the command's output
    write_report(None if args.no_write else args.out_dir, args.name, text, result)
    return 0
