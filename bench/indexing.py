"""Indexing throughput: images/s per stage (decode, encode, write) and bulk-write documents/s.

``vsparta bench indexing`` (or ``python -m bench.indexing``). Stages are timed alone, one CPU
process each, on generated JPEGs, then the whole overlapped pipeline is timed end to end:

- decode: ``load_image`` + the model's preprocessor (what one decode worker does);
- encode: ``TermEncoder.encode_pixels`` with top-n, for each model config asked for
  (``tiny``: random init, tests/demo size; ``default``: the MiniLM-initialised model);
- write: ``TermIndex.upsert`` of synthetic documents (``--write-docs`` x ``--terms-per-doc``)
  in batches, into the embedded engine and, when reachable, Elasticsearch.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

DEFAULT_ES_URL = "http://127.0.0.1:9200"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--images", type=int, default=64, help="generated images for the decode/encode stages"
    )
    parser.add_argument(
        "--image-size", type=int, nargs=2, default=(640, 480), metavar=("W", "H"), help="generated image size"
    )
    parser.add_argument(
        "--models", default="tiny,default", help="comma-separated: tiny, default, or a saved model folder"
    )
    parser.add_argument("--batch-size", type=int, default=16, help="images per encode batch")
    parser.add_argument("--top-n", type=int, default=1000, help="terms kept per image")
    parser.add_argument("--write-docs", type=int, default=10_000, help="synthetic documents per engine")
    parser.add_argument("--terms-per-doc", type=int, default=1000, help="terms per synthetic document")
    parser.add_argument("--write-batch", type=int, default=500, help="documents per engine write")
    parser.add_argument("--vocab-size", type=int, default=30522, help="term ids of the synthetic documents")
    parser.add_argument(
        "--engines", default="embedded,elasticsearch", help="comma-separated engines to write into"
    )
    parser.add_argument(
        "--es-url",
        default=os.environ.get("VSPARTA_TEST_ES_URL", DEFAULT_ES_URL),
        help="Elasticsearch node (env VSPARTA_TEST_ES_URL)",
    )
    parser.add_argument("--workers", type=int, default=1, help="decode workers in the end-to-end run")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--workdir", type=Path, help="keep generated files here (default: a temp folder)")


def make_images(folder: Path, n: int, size: tuple[int, int], seed: int = 0) -> list[Path]:
    """Photo-like JPEGs (smooth gradients + noise + shapes) so decode cost is realistic."""
    from PIL import Image, ImageDraw

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    w, h = size
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    paths = []
    for i in range(n):
        base = np.stack(
            [xx / w * rng.uniform(50, 255), yy / h * rng.uniform(50, 255), (xx + yy) / (w + h) * 200], -1
        )
        arr = np.clip(base + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8)
        im = Image.fromarray(arr)
        draw = ImageDraw.Draw(im)
        for _ in range(6):
            x0, y0 = int(rng.integers(0, max(1, w - 8))), int(rng.integers(0, max(1, h - 8)))
            x1, y1 = x0 + int(rng.integers(4, max(5, w // 3))), y0 + int(rng.integers(4, max(5, h // 3)))
            draw.ellipse((x0, y0, x1, y1), fill=tuple(int(c) for c in rng.integers(0, 256, 3)))
        path = folder / f"img{i:05d}.jpg"
        im.save(path, quality=90)
        paths.append(path)
    return paths


def build_model(kind: str, folder: Path) -> Path:
    """Save a model for ``kind`` and return its folder.

    ``default``: the ``base`` preset (MiniLM-L6 dimensions, 224 px) initialised from MiniLM, as
    ``vsparta train`` starts by default; ``tiny``/``small``/``base``: random init; or an existing
    saved model folder.
    """
    if Path(kind).is_dir():
        return Path(kind)
    from model.configuration import DEFAULT_TEXT_MODEL, PRESETS, config_from_spec
    from model.modeling import build_model as build

    out = folder / f"model-{kind}"
    if kind == "default":
        model = build(config_from_spec("base"), init=DEFAULT_TEXT_MODEL)
    elif kind in PRESETS:
        model = build(config_from_spec(kind))
    else:
        raise ValueError(f"unknown model {kind!r}: default, {', '.join(PRESETS)} or a saved model folder")
    model.save_pretrained(out)
    return out


def time_decode(paths: list[Path], preprocess: Any) -> tuple[float, list[np.ndarray]]:
    from model.images import load_image

    start = time.perf_counter()
    arrays = [preprocess(load_image(p)) for p in paths]
    return len(paths) / (time.perf_counter() - start), arrays


def time_encode(encoder: Any, arrays: list[np.ndarray], batch_size: int, top_n: int) -> tuple[float, float]:
    """(images/s, mean terms per image); the first batch is a warm-up and not timed."""
    batches = [np.stack(arrays[i : i + batch_size]) for i in range(0, len(arrays), batch_size)]
    encoder.encode_pixels(batches[0], top_n=top_n)
    start = time.perf_counter()
    n_terms = []
    for b in batches:
        n_terms += [len(t) for t in encoder.encode_pixels(b, top_n=top_n)]
    return len(arrays) / (time.perf_counter() - start), float(np.mean(n_terms))


def synthetic_batches(
    n_docs: int, n_terms: int, vocab: int, batch: int, seed: int = 0
) -> Iterator[list[Any]]:
    from termindex import TermDocument

    rng = np.random.default_rng(seed)
    for start in range(0, n_docs, batch):
        docs = []
        for i in range(start, min(n_docs, start + batch)):
            ids = rng.choice(vocab, size=n_terms, replace=False)
            weights = rng.gamma(2.0, 0.5, n_terms) + 1e-3
            docs.append(
                TermDocument(f"doc{i:07d}", dict(zip(ids.tolist(), weights.tolist(), strict=True)), {"n": i})
            )
        yield docs


def time_writes(index: Any, args: argparse.Namespace) -> float:
    """Documents/s of ``upsert`` alone (document generation is not timed), including the flush."""
    from indexer.writer import IndexTarget

    target = IndexTarget(index)
    spent = 0.0
    written = 0
    with target.bulk():
        for docs in synthetic_batches(args.write_docs, args.terms_per_doc, args.vocab_size, args.write_batch):
            start = time.perf_counter()
            target.write(docs)
            spent += time.perf_counter() - start
            written += len(docs)
    start = time.perf_counter()
    refresh = getattr(index, "refresh", None)
    if callable(refresh):
        refresh()
    spent += time.perf_counter() - start
    assert index.count() == written, f"{index.count()} documents in the index, {written} written"
    return written / spent


def _es_up(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_cluster/health", timeout=5) as resp:
            return resp.status == 200
    except OSError:
        return False


def run(args: argparse.Namespace) -> int:
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="vsparta-bench-indexing-"))
    results: dict[str, Any] = {
        "images": args.images,
        "image_size": list(args.image_size),
        "cpus": os.cpu_count(),
    }
    try:
        _run(args, work, results)
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


def _out(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _run(args: argparse.Namespace, work: Path, results: dict[str, Any]) -> None:
    from indexer.runner import IndexConfig, IndexJob
    from termindex import open_index

    results["models"] = {}
    kinds = [k for k in args.models.split(",") if k]
    if kinds:
        paths = make_images(work / "images", args.images, tuple(args.image_size))
        w, h = args.image_size
        _out(f"{len(paths)} generated JPEGs of {w}x{h}, batch {args.batch_size}")
    for kind in kinds:
        from model.encode import TermEncoder  # torch: only when a model is measured

        folder = build_model(kind, work)
        encoder = TermEncoder.from_pretrained(folder, device="cpu")
        cfg = encoder.config
        decode_rate, arrays = time_decode(paths, encoder.preprocessor)
        encode_rate, mean_terms = time_encode(encoder, arrays, args.batch_size, args.top_n)
        job = IndexJob(
            IndexConfig(
                input=work / "images",
                backend=f"embedded:{work / f'pipeline-{kind}'}",
                batch_size=args.batch_size,
                workers=args.workers,
                top_n=args.top_n,
                progress=False,
            ),
            encoder=encoder,
        )
        summary = job.run()
        row = {
            "hidden_size": cfg.hidden_size,
            "layers": cfg.num_hidden_layers,
            "image_size": cfg.image_size,
            "vocab_size": cfg.vocab_size,
            "decode_images_per_s": decode_rate,
            "encode_images_per_s": encode_rate,
            "mean_terms_per_image": mean_terms,
            "pipeline_images_per_s": summary.images_per_second,
            "pipeline_write_docs_per_s": summary.stage_rates()["write"],
        }
        results["models"][kind] = row
        _out(
            f"model {kind} (hidden {cfg.hidden_size}, {cfg.num_hidden_layers} layers, {cfg.image_size}px):"
            f" decode {decode_rate:.1f} img/s/process, encode {encode_rate:.1f} img/s,"
            f" write {row['pipeline_write_docs_per_s']:.1f} docs/s,"
            f" pipeline ({args.workers} decode worker) {summary.images_per_second:.1f} img/s,"
            f" {mean_terms:.0f} terms/image"
        )
    results["writes"] = {}
    engines = [e for e in args.engines.split(",") if e]
    for engine in engines:
        if engine == "embedded":
            spec = f"embedded:{work / 'bench-write-embedded'}"
        elif engine == "elasticsearch":
            if not _es_up(args.es_url):
                _out(f"elasticsearch: not reachable at {args.es_url}, skipped")
                continue
            spec = f"{args.es_url}/bench-indexing-{os.getpid()}"
        else:
            raise ValueError(f"unknown engine {engine!r}")
        index = open_index(spec, create=True)
        try:
            rate = time_writes(index, args)
        finally:
            drop = getattr(index, "drop", None)
            if engine == "elasticsearch" and callable(drop):
                drop()
            index.close()
        results["writes"][engine] = {"docs_per_s": rate, "docs": args.write_docs, "terms": args.terms_per_doc}
        _out(f"write {engine}: {rate:.0f} docs/s ({args.write_docs} docs x {args.terms_per_doc} terms)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("elasticsearch").setLevel(logging.WARNING)  # one line per bulk request otherwise
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
