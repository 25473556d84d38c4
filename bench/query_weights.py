"""``vsparta bench query-weights``: does weighting query tokens otherwise help trained models?

Each model (``--checkpoint NAME=FOLDER``, already trained) is evaluated on each split (``--split
NAME=MANIFEST``: test, held-out words, held-out objects) with every registered query weighting
(``termindex.weightings.registry``; ``--weightings`` picks some): ``counts`` (the paper's rule,
the default, the baseline of each row's d), ``idf`` (count x the token's IDF over the evaluated
images, what ``vsparta serve --query-weights idf`` computes from its index), ``saturated`` ...
Same documents, same queries, same run: only the query weights differ, so the difference is the
weighting's. Writes ``query-weights.md`` and ``.json`` into ``--out-dir`` (default
``docs/query-weights``); the findings are summed up in the docs page of the same name.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path
from typing import Any

from vsparta.termindex.weightings.registry import DEFAULT, WEIGHTINGS

log = logging.getLogger(__name__)


def _named(text: str) -> tuple[str, Path]:
    name, sep, path = text.partition("=")
    if not sep or not name.strip() or not path.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=PATH, got {text!r}")
    if not Path(path).exists():
        raise argparse.ArgumentTypeError(f"{path} does not exist")
    return name.strip(), Path(path)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--checkpoint", type=_named, action="append", required=True, metavar="NAME=FOLDER",
        help="a trained VisualSparta model (repeatable)",
    )  # fmt: skip
    parser.add_argument(
        "--split", type=_named, action="append", required=True, metavar="NAME=MANIFEST",
        help="a manifest with captions to evaluate on (repeatable): test, heldout_words ...",
    )  # fmt: skip
    parser.add_argument("--top-n", default="natural", help="top-n cut of each image's terms (natural)")
    parser.add_argument("--device", default="cpu", help="cpu (default), cuda, auto")
    parser.add_argument("--threads", type=int, help="torch CPU threads")
    parser.add_argument(
        "--out-dir", type=Path, default=Path("docs/query-weights"), help="query-weights.md/.json go here"
    )
    parser.add_argument(
        "--weightings",
        type=lambda text: [WEIGHTINGS.check(w.strip()) for w in text.split(",")],
        default=list(WEIGHTINGS.names()),
        help="comma list of registered query weightings (default: all); counts is always the baseline",
    )
    parser.add_argument("--no-write", action="store_true", help="print only")


def _recall(row: dict[str, Any]) -> tuple[str, dict[str, float]]:
    pool = next(iter(row["recall"]))
    return pool, row["recall"][pool]


def measure(args: argparse.Namespace) -> list[dict[str, Any]]:
    import torch

    from vsparta.core.manifest import read_manifest
    from vsparta.model.cli_eval import _top_n
    from vsparta.model.dense import load_model
    from vsparta.model.encode import resolve_device
    from vsparta.model.evaluate import evaluate

    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    out = []
    for name, folder in args.checkpoint:
        model = load_model(folder)
        for split, manifest in args.split:
            records = [r for r in read_manifest(manifest) if r.captions]
            t0 = time.perf_counter()
            report = evaluate(
                records, model, top_ns=_top_n(args.top_n), device=device, amp=device.type == "cuda",
                ndcg_queries=min(1000, len(records)), time_queries=0,
                query_weights=[DEFAULT, *(w for w in args.weightings if w != DEFAULT)],
            )  # fmt: skip
            for row in report.rows:
                if row["model"] == "VisualSparta":
                    out.append({**row, "model": name, "folder": str(folder), "split": split})
            log.info("%s on %s: %.0f s", name, split, time.perf_counter() - t0)
    return out


def markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [
        "# Query-side term weights: counts vs the other registered weightings",
        "",
        f"Command: `{meta['command']}`  ",
        f"Machine: {meta['hardware']['cpu']}, {meta['hardware']['cores']} cores (shared); "
        f"total {meta['seconds']:.0f} s.",
        "",
        "Same trained models, documents and queries; only the query weights differ: `counts` = how "
        "often a token occurs in the query (the paper's rule), `idf` = count x ln(1 + (N - df + 0.5) / "
        "(df + 0.5)) over the evaluated images (`termindex/scoring.py`), `saturated` = 2.2 c / (1.2 + c) "
        "(`termindex/weightings/saturated.py`). Recall in %; d = the row's weighting minus counts.",
        "",
        "| model | split | images | top-n | terms/img | weights | R@1 | R@5 | R@10 | NDCG@25 "
        "| d R@1 | d R@5 | d R@10 |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]  # fmt: skip
    base: dict[tuple[str, str, str], dict[str, float]] = {}
    for row in rows:
        pool, rec = _recall(row)
        key = (row["model"], row["split"], str(row["top_n"]))
        if row["query_weights"] == DEFAULT:
            base[key] = rec
        ref = base.get(key)
        deltas = (
            [f"{rec[k] - ref[k]:+.1f}" for k in ("R@1", "R@5", "R@10")]
            if ref is not None and row["query_weights"] != DEFAULT
            else ["", "", ""]
        )
        lines.append(
            f"| {row['model']} | {row['split']} | {pool} | {row['top_n']} | {row['terms_per_image']:.0f} | "
            f"{row['query_weights']} | {rec['R@1']:.1f} | {rec['R@5']:.1f} | {rec['R@10']:.1f} | "
            f"{row['ndcg@25']:.3f} | " + " | ".join(deltas) + " |"
        )
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    from vsparta.bench import hardware
    from vsparta.bench.options import command_line

    t0 = time.perf_counter()
    rows = measure(args)
    meta = {
        "command": command_line("query-weights"),
        "hardware": hardware.describe(),
        "seconds": round(time.perf_counter() - t0, 1),
    }
    text = markdown(rows, meta)
    print(text)  # noqa: T201 - the command's output
    if not args.no_write:
        args.out_dir.mkdir(parents=True, exist_ok=True)
        (args.out_dir / "query-weights.md").write_text(text, encoding="utf-8")
        (args.out_dir / "query-weights.json").write_text(
            json.dumps({"meta": meta, "rows": rows}, indent=1), encoding="utf-8"
        )
        log.info("wrote %s/query-weights.{md,json}", args.out_dir)
    return 0
