"""`vsparta demo`: the whole product on one laptop, from nothing, on the embedded engine.

It chains the real subcommands (scenes -> train -> index -> serve) rather than a shortcut, so the
demo exercises exactly what users run. Every step is resumable: rerunning the demo reuses the
generated data, continues an interrupted training from its last checkpoint, and skips documents
already indexed.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
from pathlib import Path

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out", type=Path, default=Path("demo-data"), help="work folder (default: %(default)s)"
    )
    parser.add_argument("--train-images", type=int, default=2000, help="generated training scenes")
    parser.add_argument("--test-images", type=int, default=300, help="generated scenes to index and search")
    parser.add_argument("--size", type=int, default=96, help="scene image side in pixels")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--config", default="tiny", help="model preset or JSON (see `vsparta train --help`)")
    parser.add_argument("--lr", type=float, default=5e-3)
    parser.add_argument(
        "--sparsity-weight",
        type=float,
        help="learned-sparsity weight (default: the preset's; 0 = the paper's recipe, no regularizer)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--no-serve", action="store_true", help="stop after indexing (and evaluation)")


def _step(title: str, argv: list[str]) -> None:
    from vsparta.cli import main

    log.info("demo: %s  (vsparta %s)", title, " ".join(argv))
    code = main(argv)
    if code:
        raise SystemExit(f"demo step failed ({title}): `vsparta {' '.join(argv)}` exited {code}")


def _drop_outdated_index(index_dir: Path) -> None:
    """An index left by an older demo in an older on-disk format is rebuilt, not an error: the
    demo owns that folder and re-indexing 300 scenes takes seconds."""
    from termindex.embedded_format import FORMAT_VERSION, MANIFEST

    try:
        version = json.loads((index_dir / MANIFEST).read_text()).get("version")
    except (OSError, ValueError):
        return
    if version != FORMAT_VERSION:
        log.warning(
            "demo: %s is in index format v%s (now v%d): rebuilding it", index_dir, version, FORMAT_VERSION
        )
        shutil.rmtree(index_dir)


def run(args: argparse.Namespace) -> int:
    out: Path = args.out.resolve()
    scenes, model_dir, index_dir = out / "scenes", out / "model", out / "index"
    final = model_dir / "final"

    if not (scenes / "test.jsonl").exists():
        _step(
            "generate scenes",
            ["scenes", "--out", str(scenes), "--train", str(args.train_images), "--val", "100",
             "--test", str(args.test_images), "--size", str(args.size), "--seed", str(args.seed)],
        )  # fmt: skip
    if not (final / "config.json").exists():
        _step(
            "train a small VisualSparta model on CPU",
            ["train", "--manifest", str(scenes / "train.jsonl"), "--out", str(model_dir),
             "--config", args.config, "--epochs", str(args.epochs), "--lr", str(args.lr),
             "--seed", str(args.seed), "--resume"]
            + ([] if args.sparsity_weight is None else ["--sparsity-weight", str(args.sparsity_weight)]),
        )  # fmt: skip
    _drop_outdated_index(index_dir)
    _step(
        "index the test scenes into the embedded engine",
        ["index", str(scenes / "test.jsonl"), "--backend", f"embedded:{index_dir}", "--model", str(final),
         "--resume", "--failures", str(out / "index-failures.jsonl")],
    )  # fmt: skip
    _step(
        "evaluate on the test scenes",
        ["eval", "--manifest", str(scenes / "test.jsonl"), "--model", str(final),
         "--json", str(out / "eval.json")],
    )  # fmt: skip
    if args.no_serve:
        return 0
    log.info(
        "demo: serving on http://%s:%d/  (web page; API docs at /docs). Try a query such as "
        "'a red circle left of a blue square'. Ctrl-C stops it.",
        args.host,
        args.port,
    )
    _step(
        "serve search",
        ["serve", "--backend", f"embedded:{index_dir}", "--model", str(final), "--image-root", str(scenes),
         "--host", args.host, "--port", str(args.port)],
    )  # fmt: skip
    return 0
