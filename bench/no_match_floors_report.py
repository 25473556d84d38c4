"""The table ``vsparta bench no-match-floors`` prints and writes: the best rule of each kind within
``--max-drop`` points of R@10, the best presence rule through the service's pipeline, and the
presence test word by word. Kept apart from the grid so each module has one job."""

from __future__ import annotations

import argparse
from typing import Any

WORD_COUNT_DEPTH = 1000  # how deep the word-by-word table counts an index's strong images


def markdown(result: dict[str, Any], args: argparse.Namespace) -> str:
    info, base = result["meta"], result["baseline"]
    lines = [
        f"# The match rule with a floor per word: {args.name}",
        "",
        f"Command: `{info['command']}`  ",
        f"Machine: {info['hardware']['cpu']}, {info['hardware']['cores']} cores; "
        f"total {info['seconds']:.0f} s.",
        "",
        f"Index `{args.index}`; **in**: {result['in_queries']} captions of `{args.in_split}` (R@10 "
        f"{base['R@10']:.1f} without the rule); **out**: {result['out_queries']} captions naming only "
        f"objects the index lacks, {result['out_with_category_words']} of them with a category word. "
        f"Floors from `{args.calibration_index}` ({result['calibration_images']} images).",
        "",
        f"Best rules within {args.max_drop:g} points of R@10 (every row: the JSON; a rule in italics: "
        "none is within, the one that costs least):",
        "",
        "| rule | q | p | combine | piece share | presence q / alpha / ratio / floor scale | common share "
        "| min weight | numbers alone | function / relation words alone | R@10 | d R@10 | out: no match % "
        "| with a category word | object words only |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for kind, r in result["best"].items():
        name = kind if r["within"] else f"*{kind}*"
        piece = "-" if r.get("piece_share") is None else f"{r['piece_share']:g}"
        test = "-"
        if r.get("presence_quantile") is not None:
            test = f"{r['presence_quantile']:g} / {r['presence_alpha']:g} / {r['presence_ratio']:g} / "
            test += f"{r['present_floor_scale']:g}"
            if r.get("presence_scan"):
                test += ", joint scan" if r.get("presence_joint") else ", scan"
            if r.get("presence_predictive"):
                test += ", predictive"
            if r.get("related_share") is not None:
                test += f", related share {r['related_share']:g}"
        lines.append(
            f"| {name} | {r['q'] if r['q'] is not None else '-'} | {r['p'] if r['p'] is not None else '-'} | "
            f"{r['combine']} | {piece} | {test} | {r['common_share']:g} | {r['min_weight']:g} | "
            f"{'yes' if r['numbers_match'] else 'no'} | {'yes' if r['function_words_match'] else 'no'} / "
            f"{'yes' if r.get('relation_words_match') else 'no'} | "
            f"{r['R@10']:.1f} | {r['d_R@10']:+.1f} | "
            f"{r['out_no_match']:.1f} | {r['out_no_match_category_words']:.1f} | "
            f"{r['out_no_match_object_words']:.1f} |"
        )
    for name, got in result.get("pipeline", {}).items():
        rec = got["recall"]
        lines.append(
            f"\nThe presence rule above through the service's pipeline, {name}: R@1/5/10 = "
            f"{rec['R@1']:.1f} / {rec['R@5']:.1f} / {rec['R@10']:.1f}; **out**: {got['out_no_match']:.1f} % "
            f"no match, {got['out_named']:.1f} % naming the words that found nothing; "
            f"{got['ms_per_query']:.2f} ms per query."
        )
    words = result.get("word_verdicts", {})
    if words:
        lines += [
            "",
            "The presence test with the service's defaults, word by word (strong images: the index's "
            f"images holding the word's key at its strong weight, among the first {WORD_COUNT_DEPTH}):",
            "",
            "| words | calibrated | proven beyond chance | median strong images | median expected by "
            "chance | median needed |",
            "|---|---|---|---|---|---|",
        ]
        for side, name in (
            ("in", "the in queries' (the index holds them)"),
            ("out", "the out queries' only"),
        ):
            w = words[side]
            if not w["words"]:
                lines.append(f"| {name} | 0 | - | - | - | - |")
                continue
            lines.append(
                f"| {name} | {w['words']} | {w['proven_pct']:.1f} % | {w['median_strong_images']:g} | "
                f"{w['median_expected']:.2f} | {w['median_needed']:g} |"
            )
    return "\n".join(lines) + "\n"
