"""``vsparta bench no-match``: which results should a search present as matches? (``service/matching.py``)

Two kinds of queries over one real index, each through the service's own pipeline and engine:

- **in**: the captions of the index's own test split, each relevant to its own image: the rule must
  not cost recall (R@10 against the same search without it, ``require_match: false``);
- **out**: captions that name only objects the index does not hold (drawn from other emoji
  subgroups, or a list of queries such as "a laptop" in a ``.txt`` file; a caption is kept when
  every word is a counting or linking word of the caption templates or a word no caption of the
  index uses, in the singular or the plural ("a pizza" is not kept where captions say "two
  pizzas", nor "dogs" where they say "a dog"), and it names no background, size or position):
  the answer should be "no match", naming the words that found nothing.

Each query is searched once (2 x k hits with their matched tokens, and the engine's term statistics
of its tokens); every rule of the grid (``--common-shares`` x ``--min-weights`` x
``--min-evidence``) is then applied to those answers by ``service.matching`` itself, and the rule
that says "no match" to the most **out**
queries while losing at most ``--max-drop`` points of R@10 on **in** is chosen. That rule is run
once more through the whole pipeline, as the service would, as a check. Writes a table and its
JSON, named by ``--name``, into ``--out-dir``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vsparta.bench.search_runs import KS, Caption, answers, caption_queries, meta, recall, result_ids

log = logging.getLogger(__name__)
K = max(KS)
NOT_OBJECTS = {"background", "top", "bottom", "center", "middle"}  # scene, not object, words


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def _yes_no(text: str) -> list[bool]:
    return [x.strip() == "yes" for x in text.split(",")]


def _optional_floats(text: str) -> list[float | None]:
    return [None if x.strip() == "none" else float(x) for x in text.split(",") if x.strip()]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--index", required=True, help="backend spec of the index searched")
    parser.add_argument("--model", required=True, type=Path, help="model folder (its tokenizer.json)")
    parser.add_argument("--in-split", required=True, type=Path, help="the index's own test split")
    parser.add_argument(
        "--out-split", required=True, type=Path, action="append",
        help="scenes of objects the index lacks (a manifest), or a .txt of such queries, one per line",
    )  # fmt: skip
    parser.add_argument(
        "--index-manifest", required=True, type=Path, action="append",
        help="a manifest the index was built from (the words of its captions are the index's)",
    )  # fmt: skip
    parser.add_argument(
        "--captions-per-image", type=int, help="at most this many in-split captions per image"
    )
    parser.add_argument(
        "--common-shares", type=_floats, default=[0.4, 0.5, 0.6], help="comma list of MatchRule.common_share"
    )
    parser.add_argument(
        "--min-weights",
        type=_floats,
        default=[0.0, 1.0, 2.0, 4.0, 6.0],
        help="comma list of MatchRule.min_weight",
    )
    parser.add_argument(
        "--min-evidence", type=_floats, default=[0.0, 2.0], help="comma list of MatchRule.min_evidence"
    )
    yes_no = (  # flag, default, what "yes" lets
        ("--numbers-match", [True, False], "a number word alone can make a match"),
        ("--function-words-match", [True, False], "a function word ('is', 'there') alone can make a match"),
        ("--relation-words-match", [False], "a relation word ('left', 'next') alone can make a match "
         "(no-match-floors only; default no)"),
        ("--plural-floors", [True], "a plural the calibration never saw takes its singular's floor "
         "(no-match-floors only; default yes)"),
    )  # fmt: skip
    for flag, default, text in yes_no:
        parser.add_argument(flag, type=_yes_no, default=default, help=f"comma list of yes/no: whether {text}")
    parser.add_argument("--max-drop", type=float, default=0.5, help="R@10 points the rule may cost")
    parser.add_argument("--name", default="no-match", help="file name (default: no-match)")
    parser.add_argument("--out-dir", type=Path, default=Path("docs/no-match"), help="where they go")
    parser.add_argument("--no-write", action="store_true", help="print only")


def _words(text: str) -> list[str]:
    return [w.strip(",.") for w in text.lower().split() if w.strip(",.")]


def absent_object_captions(manifests: Iterable[Path], index_manifests: Iterable[Path]) -> list[Caption]:
    """Captions that name only objects no caption of the index names (module docstring)."""
    from vsparta.scenes.object_captions import SIZE_WORDS, TEXTURE_WORDS, template_words
    from vsparta.scenes.object_words import NUMBER_WORDS, plural

    scene_words = NOT_OBJECTS | set(TEXTURE_WORDS.values()) | {w for s in SIZE_WORDS.values() for w in s}
    linking = (template_words() | set(NUMBER_WORDS.values())) - scene_words
    held = {w for m in index_manifests for c in caption_queries(m) for w in _words(c.text)} - linking
    held |= {plural(w) for w in held}  # a query's "dogs" where the index's captions say "dog"
    out = []
    for manifest in manifests:
        for caption in _queries_of(manifest):
            words = _words(caption.text)
            objects = [w for w in words if w not in linking]
            forms = set(objects) | {plural(w) for w in objects}  # the index's captions may say "pizzas"
            if objects and not (set(words) & scene_words) and not (forms & held):
                out.append(caption)
    return out


def _queries_of(path: Path) -> list[Caption]:
    """A manifest's captions, or a text file's lines (``#`` comments and blank lines skipped)."""
    if path.suffix != ".txt":
        return caption_queries(path, described=False)
    lines = (line.strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [Caption(line, None) for line in lines if line and not line.startswith("#")]


@dataclass
class Answer:
    """One query's engine answer (2 x k hits, matched tokens) and its tokens' statistics."""

    tokens: list[str]
    ids: dict[str, int]
    hits: list[Any]
    stats: Any


def collect(tokenizer: Any, spec: str, captions: Sequence[Caption]) -> list[Answer]:
    """Each caption through the pipeline without the rule (2 x k results, explained), and the
    engine's term statistics of its tokens: what every rule of the grid is applied to."""
    from vsparta.service.results import ResultView
    from vsparta.service.search import SearchPipeline, SearchQuery
    from vsparta.termindex import Hit
    from vsparta.termindex.registry import open_reader

    pipeline = SearchPipeline(tokenizer)
    view = ResultView(explain=True, fields=frozenset())

    async def run() -> list[Answer]:
        reader = open_reader(spec, 60.0)
        await reader.start()
        out = []
        try:
            for caption in captions:
                query = SearchQuery(text=caption.text, k=2 * K, view=view, require_match=False)
                response = (await pipeline.search(query, reader)).response
                ids = {tokenizer.id_to_token(i): i for i in tokenizer.tokenize(caption.text)}
                hits = [
                    Hit(
                        r["id"],
                        r["score"],
                        {},
                        {ids[t["token"]]: (t["weight"], t["contribution"]) for t in r["terms"]},
                    )
                    for r in response["results"]
                ]
                stats = await reader.term_statistics(sorted(ids.values()))
                out.append(Answer(response["query_tokens"], ids, hits, stats))
        finally:
            await reader.close()
        return out

    return asyncio.run(run())


def tests_of(answers_: Sequence[Answer], rule: Any) -> dict[str, Any]:
    """Per word of the answers that the presence test decides under ``rule``: its key and test."""
    from vsparta.service.matching import count_words, to_test, words_of

    wanted: dict[str, Any] = {}
    for a in answers_:
        wanted.update(to_test(count_words(words_of(a.tokens), a.ids, a.stats, rule), rule))
    return wanted


def presence_verdicts(spec: str, answers_: Sequence[Answer], rule: Any, known: dict) -> dict[str, Any]:
    """The presence test (``service.presence``) of every calibrated word of the answers under
    ``rule``, asked of the index once per word and test (``known`` remembers them across rules)."""
    from vsparta.service.presence import verdicts
    from vsparta.termindex.registry import open_reader

    wanted = tests_of(answers_, rule)
    indexed = answers_[0].stats.n_docs if answers_ else 0
    test = (rule.presence_alpha, rule.presence_ratio, rule.presence_joint, rule.presence_predictive)
    ask = {w: t for w, t in wanted.items() if (t, test) not in known}

    async def run() -> dict[str, Any]:
        reader = open_reader(spec, 60.0)
        await reader.start()
        try:
            return await verdicts(reader, ask, indexed, *test)
        finally:
            await reader.close()

    if ask:
        known.update({(ask[w], test): v for w, v in asyncio.run(run()).items()})
    return {w: known[(t, test)] for w, t in wanted.items()}


def judge(
    answers_: Sequence[Answer], rule: Any, verdicts: dict[str, Any] | None = None
) -> tuple[list[list[str]], list[bool], list[bool]]:
    """Under ``rule`` (with its calibrated words' presence ``verdicts``, if any): each query's first
    k ids, whether it answers no match, and whether that answer names the words that found nothing."""
    from vsparta.service.matching import count_words, select, with_verdicts, words_of
    from vsparta.service.results import describe

    ranked, none, named = [], [], []
    for a in answers_:
        counts = count_words(words_of(a.tokens), a.ids, a.stats, rule)
        if verdicts:
            counts = with_verdicts(counts, verdicts, rule)
        kept = select(a.hits, counts, rule, require_match=True, min_score=0.0)
        ranked.append([h.id for h in kept[:K]])
        none.append(not kept)
        said = describe(a.hits, kept, kept[:K], counts, rule, require_match=True, min_score=0.0)
        named.append(bool(not kept and said["no_match"]["words"]))
    return ranked, none, named


def _pct(flags: Sequence[bool]) -> float:
    return 100.0 * sum(flags) / max(1, len(flags))


def sweep(
    args: argparse.Namespace, inside: list[Answer], outside: list[Answer], captions: list[Caption]
) -> dict:
    from vsparta.service.matching import MatchRule

    base = recall([[h.id for h in a.hits[:K]] for a in inside], captions)
    grid = []
    grid_of = itertools.product(
        args.common_shares, args.min_weights, args.min_evidence, args.numbers_match, args.function_words_match
    )
    for share, weight, part, numbers, function in grid_of:
        rule = MatchRule(share, weight, part, numbers, function_words_match=function)
        ranked, in_none, _ = judge(inside, rule)
        _, out_none, out_named = judge(outside, rule)
        rec = recall(ranked, captions)
        grid.append(
            {"common_share": share, "min_weight": weight, "min_evidence": part,
             "numbers_match": numbers, "function_words_match": function, "recall": rec,
             "d_R@10": rec["R@10"] - base["R@10"], "in_no_match": _pct(in_none),
             "out_no_match": _pct(out_none), "out_named": _pct(out_named)}
        )  # fmt: skip
    allowed = [g for g in grid if g["d_R@10"] >= -args.max_drop]
    if not allowed:  # no rule keeps recall: the one that costs least, not the one that answers nothing
        least = max(g["d_R@10"] for g in grid)
        allowed = [g for g in grid if g["d_R@10"] == least]
    chosen = max(
        allowed, key=lambda g: (g["out_no_match"], g["d_R@10"], -g["min_weight"], -g["min_evidence"])
    )
    return {"baseline": base, "grid": grid, "chosen": chosen}


def check(
    args: argparse.Namespace, tokenizer: Any, rule: Any, inside: list[Caption], outside: list[Caption]
) -> dict:
    """The chosen rule through the whole pipeline, as the service runs it (require_match: true)."""
    from vsparta.service.results import ResultView
    from vsparta.service.search import SearchPipeline, SearchQuery

    pipeline = SearchPipeline(tokenizer, match=rule)
    view = ResultView(fields=frozenset())
    ask = [SearchQuery(text=c.text, k=K, view=view) for c in (*inside, *outside)]
    responses, ms = answers(pipeline, args.index, ask)
    ins, outs = responses[: len(inside)], responses[len(inside) :]
    examples = [
        {"query": c.text, "reason": r["no_match"]["reason"] if "no_match" in r else None}
        for c, r in list(zip(outside, outs, strict=True))[:8]
    ]
    return {
        "recall": recall(result_ids(ins), inside),
        "out_no_match": _pct(["no_match" in r for r in outs]),
        "out_named": _pct([bool(r.get("no_match", {}).get("words")) for r in outs]),
        "ms_per_query": round(ms, 3),
        "examples": examples,
    }


def rule_of(row: dict[str, Any], **more: Any) -> Any:
    """The ``MatchRule`` of a grid row (``more``: the fields the row does not hold)."""
    from vsparta.service.matching import MatchRule

    return MatchRule(
        row["common_share"], row["min_weight"], row.get("min_evidence", 0.0), row["numbers_match"],
        function_words_match=row["function_words_match"], plural_floors=row.get("plural_floors", True),
        relation_words_match=row.get("relation_words_match", False),
        presence_joint=bool(row.get("presence_joint")),
        presence_predictive=bool(row.get("presence_predictive")),
        **more,
    )  # fmt: skip


def _is_default(row: dict[str, Any]) -> bool:
    from vsparta.service.matching import MatchRule

    return rule_of(row) == MatchRule()


def markdown(result: dict[str, Any], args: argparse.Namespace) -> str:
    info, base, chosen, checked = result["meta"], result["baseline"], result["chosen"], result["check"]
    lines = [
        f"# The match rule: {args.name}",
        "",
        f"Command: `{info['command']}`  ",
        f"Machine: {info['hardware']['cpu']}, {info['hardware']['cores']} cores (shared, load "
        f"{info['hardware']['load_avg_at_start']} at start); total {info['seconds']:.0f} s.",
        "",
        f"Index `{args.index}`; **in**: {result['in_queries']} captions of `{args.in_split}`; **out**: "
        f"{result['out_queries']} captions naming only objects the index lacks (of "
        f"{', '.join(f'`{p}`' for p in args.out_split)}). Without the rule: R@1/5/10 = "
        f"{base['R@1']:.1f} / {base['R@5']:.1f} / {base['R@10']:.1f}, and no **out** query answers no match.",
        "",
        "| common share | min weight | min evidence | numbers match | function words match | R@1 | R@5 "
        "| R@10 | d R@10 | in: no match % | out: no match % | out: words named % |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for g in result["grid"]:
        mark = (" **chosen**" if g is chosen else "") + (" (the service's default)" if _is_default(g) else "")
        rec = g["recall"]
        lines.append(
            f"| {g['common_share']:g} | {g['min_weight']:g} | {g['min_evidence']:g} | "
            f"{'yes' if g['numbers_match'] else 'no'} | "
            f"{'yes' if g['function_words_match'] else 'no'}{mark} | "
            f"{rec['R@1']:.1f} | {rec['R@5']:.1f} | "
            f"{rec['R@10']:.1f} | {g['d_R@10']:+.1f} | {g['in_no_match']:.1f} | {g['out_no_match']:.1f} | "
            f"{g['out_named']:.1f} |"
        )
    rec = checked["recall"]
    lines += [
        "",
        f"Chosen (most **out** queries answered no match at d R@10 >= -{args.max_drop:g}): common share "
        f"{chosen['common_share']:g}, min weight {chosen['min_weight']:g}, min evidence "
        f"{chosen['min_evidence']:g}, numbers match: {'yes' if chosen['numbers_match'] else 'no'}, "
        f"function words match: {'yes' if chosen['function_words_match'] else 'no'}. "
        "Through the whole pipeline "
        f"(`require_match: true`, {checked['ms_per_query']:.2f} ms per query): R@1/5/10 = {rec['R@1']:.1f} / "
        f"{rec['R@5']:.1f} / {rec['R@10']:.1f}; **out**: {checked['out_no_match']:.1f} % no match, "
        f"{checked['out_named']:.1f} % naming the words that found nothing.",
        "",
        "Some **out** queries and their answers:",
        "",
        *[f'- "{e["query"]}": {e["reason"] or "results shown"}' for e in checked["examples"]],
    ]
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    from vsparta.model.query_tokenizer import QueryTokenizer

    start = time.perf_counter()
    tokenizer = QueryTokenizer.from_pretrained(args.model)
    inside = caption_queries(args.in_split, args.captions_per_image)
    outside = absent_object_captions(args.out_split, args.index_manifest)
    if not outside:
        raise ValueError("no caption of --out-split names only objects the index lacks")
    log.info("%d in, %d out queries", len(inside), len(outside))
    result = sweep(
        args, collect(tokenizer, args.index, inside), collect(tokenizer, args.index, outside), inside
    )
    result["check"] = check(args, tokenizer, rule_of(result["chosen"]), inside, outside)
    result |= {"in_queries": len(inside), "out_queries": len(outside), "index": args.index}
    result["meta"] = meta("no-match", time.perf_counter() - start)
    text = markdown(result, args)
    print(text)  # noqa: T201 - the command's output
    if not args.no_write:
        args.out_dir.mkdir(parents=True, exist_ok=True)
        (args.out_dir / f"{args.name}.md").write_text(text, encoding="utf-8")
        (args.out_dir / f"{args.name}.json").write_text(
            json.dumps(result, indent=1, default=str), encoding="utf-8"
        )
        log.info("wrote %s/%s.{md,json}", args.out_dir, args.name)
    return 0
