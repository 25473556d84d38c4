"""`vsparta demo`: the whole product on one laptop, from nothing, on the embedded engine.

The data are the object scenes (everyday things from the Noto Color Emoji font, nothing held out),
all 1,161 objects of the catalog. The model is the ``lite0-128`` recipe: a tiny transformer on the
ImageNet features of EfficientNet-Lite0 (frozen, computed once per image into a feature cache), which
learns an object from a few scenes where a stem trained from scratch needed dozens: the page's
examples ("two animals", "a clock", "food", "a tool") span the catalog's groups. The index holds
the training and the test scenes (a collection to search, not an evaluation; the evaluation step
reads the test scenes alone).

It chains the real subcommands (scenes -> train -> index -> serve) rather than a shortcut, so the
demo exercises exactly what users run; to serve, it becomes `vsparta serve` (``vsparta.demo_server``:
the service, without the torch its training loaded). Every step is resumable: rerunning the demo reuses the
generated data, continues an interrupted training from its last checkpoint, and skips documents
already indexed.

The Docker stack's first run (``docker/first-run.sh``) builds this same demo, with its scenes and
model in the stack's volumes (``--scenes``, ``--model``) and its index in Elasticsearch
(``--backend``).
"""

from __future__ import annotations

import argparse
import errno
import json
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from vsparta.demo_server import become_server

log = logging.getLogger(__name__)

# the demo's budget: a fresh clone serves within ~5 minutes on a 2-core machine (README); the
# pretrained stem's passes over every picture (feature cache, then indexing) are most of it
TRAIN_IMAGES, EPOCHS, CONFIG, SIZE, LR = 2000, 6, "lite0-128", 128, 2e-3
EXAMPLE_QUERY = "two animals"
# the demo's objects: the whole catalog (""); `--groups` narrows it to Unicode emoji subgroups
DEMO_GROUPS = ""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out", type=Path, default=Path("demo-data"), help="work folder (default: %(default)s)"
    )
    parser.add_argument(
        "--kind", choices=["objects", "shapes"], default="objects", help="scene benchmark (default objects)"
    )
    parser.add_argument(
        "--groups",
        default=DEMO_GROUPS,
        help="emoji groups/subgroups of the objects (see vsparta scenes --groups; default: all)",
    )
    parser.add_argument("--train-images", type=int, default=TRAIN_IMAGES, help="generated training scenes")
    parser.add_argument("--test-images", type=int, default=300, help="generated scenes to evaluate on")
    parser.add_argument("--size", type=int, default=SIZE, help="scene image side in pixels (the model's)")
    parser.add_argument("--epochs", type=int, default=EPOCHS, help="training epochs")
    parser.add_argument("--config", default=CONFIG, help="model preset or JSON (see vsparta train --help)")
    parser.add_argument("--lr", type=float, default=LR, help="learning rate")
    parser.add_argument(
        "--sparsity-weight",
        type=float,
        help="learned-sparsity weight (default: the preset's; 0 = the paper's recipe, no regularizer)",
    )
    parser.add_argument(
        "--presence-weight",
        type=float,
        help="weight of the presence penalty (vsparta train --help; default: the preset's, none)",
    )
    parser.add_argument("--seed", type=int, default=0, help="same seed, same scenes and model")
    parser.add_argument(
        "--scenes", type=Path, help="folder of the generated scenes (default: OUT/scenes; reused when there)"
    )
    parser.add_argument(
        "--model", type=Path, help="a trained model folder to use instead of training one (default: train)"
    )
    parser.add_argument(
        "--backend",
        help="index to build and serve (default: embedded:OUT/index; e.g. http://HOST:9200/NAME)",
    )
    parser.add_argument(
        "--no-index", action="store_true", help="stop after training and evaluation (index nothing)"
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to serve on (default: %(default)s)")
    parser.add_argument("--port", type=int, default=8000, help="port (default: %(default)s)")
    parser.add_argument("--no-serve", action="store_true", help="stop after indexing (and evaluation)")
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="progress bars of each step (default: on; a plain line per interval in a redirected log)",
    )


def _step(vsparta: Callable[[list[str]], int], title: str, argv: list[str]) -> None:
    """Run one `vsparta` command line. ``vsparta`` is the console script's ``main``, handed over by
    it (``args.run_command``): the demo never imports the command line back (no import cycle)."""
    log.info("demo: %s  (vsparta %s)", title, " ".join(argv))
    code = vsparta(argv)
    if code:
        raise SystemExit(f"demo step failed ({title}): `vsparta {' '.join(argv)}` exited {code}")


def _drop_outdated_index(index_dir: Path) -> None:
    """An index left by an older demo in an older on-disk format is rebuilt, not an error: the
    demo owns that folder and re-indexing 300 scenes takes seconds."""
    from vsparta.termindex.embedded.format import FORMAT_VERSION, MANIFEST

    try:
        version = json.loads((index_dir / MANIFEST).read_text()).get("version")
    except (OSError, ValueError):
        return
    if version != FORMAT_VERSION:
        log.warning(
            "demo: %s is in index format v%s (now v%d): rebuilding it", index_dir, version, FORMAT_VERSION
        )
        shutil.rmtree(index_dir)


def _train_argv(args: argparse.Namespace, scenes: Path, model_dir: Path) -> list[str]:
    """Resume only when an earlier run left a checkpoint: on a fresh run `--resume` only warns."""
    from vsparta.model.train import latest_checkpoint

    argv = ["train", "--manifest", str(scenes / "train.jsonl"), "--out", str(model_dir),
            "--config", args.config, "--epochs", str(args.epochs), "--lr", str(args.lr),
            "--seed", str(args.seed)]  # fmt: skip
    if args.sparsity_weight is not None:
        argv += ["--sparsity-weight", str(args.sparsity_weight)]
    if args.presence_weight is not None:
        argv += ["--presence-weight", str(args.presence_weight)]
    if model_dir.is_dir() and latest_checkpoint(model_dir) is not None:
        argv.append("--resume")
    return argv + _no_progress(args)


def _scenes_argv(args: argparse.Namespace, scenes: Path) -> list[str]:
    argv = ["scenes", "--kind", args.kind, "--out", str(scenes), "--train", str(args.train_images),
            "--val", "100", "--test", str(args.test_images), "--size", str(args.size),
            "--seed", str(args.seed)]  # fmt: skip
    if args.kind == "objects":  # a demo holds nothing out: every word and object is searchable
        argv += ["--heldout-words", "0", "--heldout-objects", "0"]
        argv += ["--held-word-share", "0", "--held-object-share", "0", "--no-vocabulary"]
        argv += ["--groups", args.groups] if args.groups else []
    return argv + _no_progress(args)


def _no_progress(args: argparse.Namespace) -> list[str]:
    """Each step picks a bar or plain lines from where stderr goes; the demo only passes an "off"."""
    return [] if args.progress else ["--no-progress"]


def run(args: argparse.Namespace) -> int:
    out: Path = args.out.resolve()
    if out.exists() and not out.is_dir():
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(args.out))
    scenes = args.scenes.resolve() if args.scenes else out / "scenes"
    model_dir, index_dir = out / "model", out / "index"
    final = args.model.resolve() if args.model else model_dir / "final"
    backend = args.backend or f"embedded:{index_dir}"

    if not (scenes / "test.jsonl").exists():
        _step(args.run_command, "generate scenes", _scenes_argv(args, scenes))
    if args.model is None and not (final / "config.json").exists():
        _step(
            args.run_command, "train a small VisualSparta model on CPU", _train_argv(args, scenes, model_dir)
        )
    if args.backend is None:
        _drop_outdated_index(index_dir)
    for split in () if args.no_index else ("train", "test"):
        _step(
            args.run_command,
            f"index the {split} scenes into {backend}",
            ["index", str(scenes / f"{split}.jsonl"), "--backend", backend, "--model", str(final),
             "--resume", "--failures", str(out / "index-failures.jsonl"), *_no_progress(args)],
        )  # fmt: skip
    _step(
        args.run_command,
        "evaluate on the test scenes",
        ["eval", "--manifest", str(scenes / "test.jsonl"), "--model", str(final),
         "--json", str(out / "eval.json")],
    )  # fmt: skip
    if args.no_serve or args.no_index:
        return 0
    local_host = "127.0.0.1" if args.host in {"0.0.0.0", "::", ""} else args.host
    serve = ["serve", "--backend", backend, "--model", str(final), "--image-root", str(scenes),
             "--host", args.host, "--port", str(args.port)]  # fmt: skip
    log.info("demo: serve search  (vsparta %s)", " ".join(serve))
    url = f"http://{local_host}:{args.port}/"
    become_server(serve, url, EXAMPLE_QUERY, args.run_command)  # the service, without torch
