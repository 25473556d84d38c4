"""`vsparta index`: encode images into weighted-term documents and write them to an engine.

examples:
  vsparta index photos/ --model runs/model --backend embedded:index/
  vsparta index data/manifest.jsonl --model runs/model --backend http://127.0.0.1:9200/images \\
      --shard 0 --num-shards 4 --resume --failures failed.jsonl
  vsparta index export/ --tokenizer runs/model --backend embedded:index2/   # no model needed
  vsparta index photos/ --fake-encoder --backend embedded:/tmp/plumbing/     # measure the pipeline
  vsparta index photos/ --model runs/model --backend http://127.0.0.1:9200/images --new-version
  vsparta index rollback --backend http://127.0.0.1:9200/images   # alias back to the previous version

ids: a manifest's "id"; for a folder, sha1 of each file's path relative to the folder.

symbolic links in an image folder: a link is indexed under its own path (its own id, so a link
and its target are two documents); a link whose target lies outside the folder is skipped and
listed in the failure report as "symlink_outside" unless --follow-symlinks is given; a dangling
link is listed as "broken_symlink". Linked folders are not entered.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from vsparta.core.errors import UsageError
from vsparta.core.progress import quiet_library_bars
from vsparta.indexer.mapper import parse_top_n
from vsparta.indexer.reader import INPUT_FORMATS
from vsparta.indexer.runner import MODEL_TOP_N, IndexConfig, run_index
from vsparta.model.config_parts import DEFAULT_TOP_N
from vsparta.model.resolve import ModelPathError, existing_path, resolve_model_path
from vsparta.termindex import TermIndexError, registry
from vsparta.termindex.errors import EngineUnavailable, WrongBackend
from vsparta.termindex.plugin import BackendSpec

log = logging.getLogger(__name__)


def _top_n(value: str) -> int | None | str:
    if value == MODEL_TOP_N:  # the default (argparse passes a string default through here)
        return value
    try:
        return parse_top_n(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _min_weight(value: str) -> float:
    try:
        w = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--min-weight must be a number, got {value!r}") from None
    if not w >= 0 or w == float("inf"):
        raise argparse.ArgumentTypeError(f"--min-weight must be a finite number >= 0, got {value!r}")
    return w


def _input(value: str) -> object:
    """An existing input path, or the word ``rollback`` (``vsparta index rollback --backend URL``)."""
    if value == "rollback" and not Path(value).exists():
        return value
    return existing_path(value)


def _default_workers() -> int:
    """One decode process per core but one (the encoder's); no upper cap: a 64-core host uses them."""
    return max(1, (os.cpu_count() or 2) - 1)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = __doc__.split("\n", 2)[2].strip()
    parser.add_argument(
        "input",
        type=_input,
        help="image folder, manifest JSONL, .npz folder, term-document JSONL, or `rollback`",
    )
    parser.add_argument(
        "--format", dest="input_format", choices=INPUT_FORMATS, default="auto", help="input kind"
    )
    out = parser.add_argument_group("outputs")
    out.add_argument("--backend", help="embedded:PATH or http://HOST:9200/ALIAS")
    registry.add_index_arguments(parser)  # each engine's own options (Elasticsearch: --shards ...)
    out.add_argument(
        "--export-jsonl", type=Path, metavar="DIR", help="also write numbered term-document JSONL"
    )
    out.add_argument(
        "--export-docs-per-file",
        type=int,
        default=10_000,
        metavar="N",
        help="start a new export file every N documents (default 10000)",
    )
    out.add_argument(
        "--failures", type=Path, metavar="PATH", help="JSONL report of files that could not be indexed"
    )
    model = parser.add_argument_group("model")
    model.add_argument("--model", type=Path, help="saved VisualSparta model folder")
    model.add_argument(
        "--fake-encoder",
        action="store_true",
        help="no model: instant deterministic terms (1000 per image), to measure decoding and writing",
    )
    model.add_argument(
        "--fake-image-size",
        type=int,
        default=224,
        metavar="S",
        help="with --fake-encoder: decode images to S x S pixels like a model would (default 224)",
    )
    model.add_argument(
        "--tokenizer", type=Path, help="tokenizer folder for term-document input (default: --model)"
    )
    model.add_argument(
        "--top-n",
        type=_top_n,
        default=MODEL_TOP_N,
        help=f"terms kept per image, or 'all' (default: the model config's top_n, {DEFAULT_TOP_N} unless"
        " trained otherwise)",
    )
    model.add_argument(
        "--min-weight",
        type=_min_weight,
        default=0.0,
        metavar="W",
        help="leave out terms lighter than W (an image's heaviest term is always kept): shorter posting "
        "lists, faster queries, some recall (python -m bench.query_cost measures it); default 0",
    )
    model.add_argument("--device", default="auto", help="auto (CUDA when present), cpu or cuda")
    model.add_argument(
        "--amp",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="mixed precision for the transformer (default: on with a GPU, off on CPU)",
    )
    job = parser.add_argument_group("job")
    job.add_argument("--batch-size", type=int, default=32, help="images encoded together (default 32)")
    job.add_argument(
        "--workers",
        type=int,
        default=_default_workers(),
        help=f"decode processes (default: cores - 1, here {_default_workers()}; 0: decode in-process)",
    )
    job.add_argument(
        "--fast-decode",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="decode JPEGs at reduced scale near the model's size (default on; off: full decode)",
    )
    job.add_argument(
        "--gpu-decode",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="decode plain JPEGs on the GPU with nvJPEG (default: when the device is CUDA and"
        " torchvision is installed; other files are always decoded by the workers)",
    )
    job.add_argument(
        "--follow-symlinks",
        action="store_true",
        help="also index symbolic links whose target lies outside the input folder",
    )
    job.add_argument("--max-pixels", type=int, help="refuse larger images (decompression-bomb guard)")
    job.add_argument(
        "--resume",
        action="store_true",
        help="skip documents the target already holds as this input gives them; a file changed since "
        "(size or modification time) is written again",
    )
    job.add_argument(
        "--prune",
        action="store_true",
        help="after a complete run, delete the documents of this shard whose id the input no longer "
        "lists (a photo deleted or moved inside the folder), from the target and the export: the "
        "target then holds this input alone, so never use it on a target that also holds other inputs",
    )
    job.add_argument(
        "--max-delete",
        type=int,
        metavar="N",
        help="with --prune: when more than N documents would be removed, remove none and stop (exit 2);"
        " a folder half unmounted or mistyped then costs nothing",
    )
    job.add_argument(
        "--commit-interval",
        type=float,
        default=1.0,
        metavar="S",
        help="gather encoded batches for up to S seconds into one engine write (default 1)",
    )
    job.add_argument("--shard", type=int, default=0, help="this job's shard, 0-based")
    job.add_argument("--num-shards", type=int, default=1, help="how many jobs split the input")
    job.add_argument(
        "--ignore-regions", action="store_true", help="encode pixels even if the manifest names regions"
    )
    job.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a progress bar on a terminal, a line every 30 s in a log (default); --no-progress: none",
    )


def _rollback(backend: str | None) -> int:
    """`vsparta index rollback --backend URL`: point the alias back at the previous version."""
    try:
        spec = registry.parse_spec(backend) if backend else None
    except ValueError:
        spec = None
    if spec is None or not registry.engine(spec.engine).versions:
        raise UsageError(f"rollback needs a --backend that keeps versions: {registry.versioned_examples()}")
    try:
        with registry.open_index(spec) as index:
            version = index.rollback()  # type: ignore[attr-defined]
    except TermIndexError as exc:
        log.error("could not roll back: %s", exc)
        return 1
    log.info("%s now points at %s", backend, version)
    return 0


def _place_for(path: Path, option: str, *, folder: bool) -> None:
    """``path`` can be written as a file (``folder=False``) or a folder: refused now, not after hours."""
    if path.exists() and path.is_dir() != folder:
        want, got = ("folder", "file") if folder else ("file", "folder")
        raise ValueError(f"{option} {path} is a {got}, not a {want}")
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise ValueError(f"{option} {path}: {parent} is a file, not a folder")


def _check_counts(backend_options: dict[str, object]) -> None:
    """Engine options that are counts (an Elasticsearch index's shards and replicas)."""
    for name, least in (("shards", 1), ("replicas", 0)):
        value = backend_options.get(name)
        if isinstance(value, int) and value < least:
            raise ValueError(f"--{name} must be >= {least}, got {value}")


def _backend(text: str | None) -> BackendSpec | None:
    """``--backend`` parsed, the one time on the way into the job: a malformed spec
    (``embeded:/x``) is refused, and so is the folder of an engine of local files (the embedded
    one: ``Engine.paths``) that cannot be one."""
    if not text:
        return None
    spec = registry.parse_spec(text)
    if registry.engine(spec.engine).paths:
        _place_for(Path(spec.location), "--backend", folder=True)
    return spec


def _config(args: argparse.Namespace) -> IndexConfig:
    """Every argument checked, in the order a user reads them; nothing loaded, nothing listed."""
    backend = _backend(args.backend)
    backend_options = registry.index_options(backend, args)
    _check_counts(backend_options)
    if args.export_jsonl is not None:
        _place_for(args.export_jsonl, "--export-jsonl", folder=True)
    if args.failures is not None:
        _place_for(args.failures, "--failures", folder=False)
    if args.export_docs_per_file < 1:
        raise ValueError(f"--export-docs-per-file must be >= 1, got {args.export_docs_per_file}")
    # Resolved before any engine is opened: a mistyped --model leaves no empty index folder behind.
    model = Path(resolve_model_path(args.model)) if args.model else None
    tokenizer = None
    if args.tokenizer:
        tokenizer = Path(
            resolve_model_path(args.tokenizer, option="--tokenizer", needs="tokenizer.json", allow_file=True)
        )
    config = IndexConfig(
        input=Path(args.input),
        input_format=args.input_format,
        backend=backend,
        export_jsonl=args.export_jsonl,
        export_docs_per_file=args.export_docs_per_file,
        model=model,
        tokenizer=tokenizer,
        top_n=args.top_n,
        min_weight=args.min_weight,
        batch_size=args.batch_size,
        workers=args.workers,
        device=args.device,
        amp=args.amp,
        resume=args.resume,
        prune=args.prune,
        max_delete=args.max_delete,
        shard=args.shard,
        num_shards=args.num_shards,
        failures=args.failures,
        max_pixels=args.max_pixels,
        ignore_regions=args.ignore_regions,
        commit_interval=args.commit_interval,
        progress=args.progress,
        fast_decode=args.fast_decode,
        gpu_decode=args.gpu_decode,
        follow_symlinks=args.follow_symlinks,
        fake_encoder=args.fake_encoder,
        fake_image_size=args.fake_image_size,
        backend_options=backend_options,
    )
    config.validate()
    return config


def run(args: argparse.Namespace) -> int:
    if not getattr(args, "verbose", False):
        registry.quiet_client_loggers(logging.ERROR)  # a line per request, a traceback per retry
    try:
        if str(args.input) == "rollback" and not Path(args.input).exists():
            return _rollback(args.backend)
        config = _config(args)
    except ModelPathError:
        raise
    except ValueError as exc:  # a mistake in the arguments: one sentence before anything is loaded
        raise UsageError(str(exc)) from exc
    if not args.fake_encoder and (args.progress is False or not sys.stderr.isatty()):
        quiet_library_bars()
    try:
        summary = run_index(config)
    except WrongBackend as exc:  # hosts of two clusters, one node twice: the spec's mistake
        raise UsageError(str(exc)) from exc
    except EngineUnavailable as exc:  # unreachable, or a server it refuses: exit 3, as `vsparta search`
        log.error("the index could not be written: %s", exc)
        return 3
    except TermIndexError as exc:  # the engine refusing writes
        log.error("the index could not be written: %s", exc)
        return 1
    except ModelPathError:
        raise
    except ValueError as exc:  # the input or what it needs (a --tokenizer ...): the user can fix it
        raise UsageError(str(exc)) from exc
    except BrokenProcessPool:
        log.error("a decode worker process died (out of memory?); rerun with --resume, fewer --workers")
        return 1
    if summary.interrupted_by:
        return 128 + int(signal.Signals[summary.interrupted_by])
    return 0
