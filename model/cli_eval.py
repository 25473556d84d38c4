"""`vsparta eval`: Recall@K, NDCG@25 and the top-n trade-off on a held-out manifest."""

from __future__ import annotations

import argparse
import json
import logging
import os
from pathlib import Path

from vsparta.core.progress import quiet_library_bars
from vsparta.model.resolve import existing_dir, existing_path, resolve_model_path

log = logging.getLogger(__name__)


def _top_n(text: str) -> list[int | str | None]:
    out: list[int | str | None] = []
    for part in text.split(","):
        part = part.strip().lower()
        if part == "all":
            out.append(None)
        elif part == "natural":
            out.append(part)
        elif part.isdigit() and int(part) > 0:
            out.append(int(part))
        else:
            raise argparse.ArgumentTypeError(
                f"top-n values are positive integers, 'natural' or 'all', got {part!r}"
            )
    return out


def _query_weights(text: str) -> list[str]:
    from vsparta.termindex.weightings.registry import WEIGHTINGS

    out = [part.strip().lower() for part in text.split(",") if part.strip()]
    bad = [part for part in out if part not in WEIGHTINGS]
    if not out or bad:
        raise argparse.ArgumentTypeError(
            f"query weights are a comma list of {', '.join(WEIGHTINGS.names())}, got {text!r}"
        )
    return list(dict.fromkeys(out))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--manifest",
        required=True,
        type=existing_path,
        help="held-out manifest (JSONL with captions) or a Karpathy-split .json",
    )
    parser.add_argument("--image-root", type=existing_dir, help="image folder for a Karpathy-split .json")
    parser.add_argument("--split", default="test", help="Karpathy split to evaluate (test or val)")
    parser.add_argument("--model", help="saved VisualSparta folder (e.g. runs/vs/final)")
    parser.add_argument("--dense", help="saved dense baseline folder, evaluated beside it")
    parser.add_argument(
        "--top-n",
        type=_top_n,
        default="50,100,300,1000,natural,all",
        help="comma list; 'natural' = the model's positive terms capped like `vsparta index` "
        "(config top_n, default 1000); 'all' = every positive term",
    )
    parser.add_argument(
        "--query-weights",
        type=_query_weights,
        default="counts",
        help="VisualSparta rows per query weighting, comma list of the registered ones "
        "(termindex/weightings/registry.py): 'counts' (each token weighs how often it occurs, the "
        "paper's rule), 'idf' (count x the token's IDF over the evaluated images, as `vsparta serve "
        "--query-weights idf` does over the index), 'saturated' (BM25's saturation of the count) ...",
    )
    parser.add_argument("--batch-size", type=int, default=64, help="images per encode batch")
    parser.add_argument("--device", default="auto", help="auto (CUDA if available), cpu, cuda, cuda:1 ...")
    parser.add_argument("--ndcg-queries", type=int, default=1000, help="queries used for NDCG@25")
    parser.add_argument("--time-queries", type=int, default=500, help="queries timed one by one")
    parser.add_argument("--max-images", type=int, help="evaluate on the first N images only")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random baseline")
    parser.add_argument("--threads", type=int, help="torch CPU threads")
    parser.add_argument("--json", help="write the results to this JSON file")
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="a progress bar while images are encoded (a line every 30 s in a log; default); "
        "--no-progress: none",
    )


def run(args: argparse.Namespace) -> int:
    if not args.model and not args.dense:
        log.error("give --model and/or --dense")
        return 2
    model_dir = resolve_model_path(args.model, hub=False) if args.model else None
    dense_dir = resolve_model_path(args.dense, option="--dense", hub=False) if args.dense else None
    import torch

    from vsparta.core.karpathy import load_records
    from vsparta.model.dense import DenseDualEncoder, load_model
    from vsparta.model.encode import resolve_device
    from vsparta.model.eval_table import format_table
    from vsparta.model.evaluate import evaluate
    from vsparta.model.modeling import VisualSpartaModel

    quiet_library_bars()

    threads = args.threads or (
        int(os.environ["OMP_NUM_THREADS"]) if os.environ.get("OMP_NUM_THREADS") else None
    )
    if threads:
        torch.set_num_threads(threads)
    try:
        records = [r for r in load_records(args.manifest, args.image_root, args.split) if r.captions]
        if args.max_images:
            records = records[: args.max_images]
        model = load_model(model_dir) if model_dir else None
        dense = load_model(dense_dir) if dense_dir else None
        if model is not None and not isinstance(model, VisualSpartaModel):
            raise ValueError(f"--model {args.model} is not a VisualSparta model")
        if dense is not None and not isinstance(dense, DenseDualEncoder):
            raise ValueError(f"--dense {args.dense} is not a dense baseline model")
        device = resolve_device(args.device)
        report = evaluate(
            records,
            model,
            dense,
            top_ns=args.top_n if isinstance(args.top_n, list) else _top_n(args.top_n),
            batch_size=args.batch_size,
            device=device,
            amp=device.type == "cuda",
            ndcg_queries=args.ndcg_queries,
            time_queries=args.time_queries,
            seed=args.seed,
            progress=args.progress,
            query_weights=(
                args.query_weights
                if isinstance(args.query_weights, list)
                else _query_weights(args.query_weights)
            ),
        )
    except (ValueError, FileNotFoundError) as exc:
        log.error("%s", exc)
        return 2
    print(format_table(report))  # noqa: T201 - the command's output
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report.to_json(), indent=1), encoding="utf-8")
    return 0
