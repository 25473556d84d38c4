"""Indexing throughput: where the time of ``vsparta index`` goes, stage by stage and end to end.

``vsparta bench indexing`` (or ``python -m bench.indexing``). On generated JPEGs:

- decode, alone in one process: ``load_image`` + resize to uint8 as a decode worker does it, in
  draft mode (``fast``) and with a full decode (``exact``);
- encode, alone: ``TermEncoder.encode_uint8`` (normalize, transformer, φ, top-n, one copy back)
  for each model asked for (``tiny``: random init; ``default``: the MiniLM-initialised model);
- the whole job (``IndexJob``: decode workers, encoder, writer) into the embedded engine, with
  its own summary: end-to-end images/s, each stage's solo rate and busy share, queue depths and
  the GPU's busy share (CUDA only);
- ``--gpu-decode`` / ``--no-gpu-decode``: the whole job with nvJPEG in the decode stage, or
  without it (default: as ``vsparta index``, nvJPEG whenever the encoder runs on CUDA);
- ``--fake-encoder``: the same job with instant deterministic terms, which measures the
  plumbing (target: end to end >= 80% of the decode stage's rate times the workers);
- write, alone: ``TermIndex.upsert_arrays`` of synthetic CSR batches (``--write-docs`` x
  ``--terms-per-doc``), as the job writes, into the embedded engine and Elasticsearch.

Before any job, the embedded engine's numba kernels are compiled (or loaded from numba's cache) on
a tiny index, once per process, and the seconds reported apart (``kernel_warmup_seconds``): a
job is timed as every job after an install's first runs.

``--make-images N --size WxH --workdir DIR`` only writes the JPEG test set (reused by later runs
with the same ``--workdir``), so anyone can reproduce a figure on their own machine.
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

from vsparta.bench import hardware
from vsparta.bench.options import command_line
from vsparta.bench.photos import image_set
from vsparta.model.config_parts import DEFAULT_TOP_N
from vsparta.termindex.registry import quiet_client_loggers

log = logging.getLogger(__name__)

DEFAULT_ES_URL = "http://127.0.0.1:9200"


def _size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"size must look like 640x480, got {text!r}") from None
    if w < 1 or h < 1:
        raise argparse.ArgumentTypeError(f"size must be positive, got {text!r}")
    return w, h


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--images", type=int, default=64, help="generated JPEGs to measure on (default 64)")
    parser.add_argument(
        "--size", type=_size, default=(640, 480), metavar="WxH", help="generated JPEG size (default 640x480)"
    )
    parser.add_argument(
        "--make-images",
        type=int,
        metavar="N",
        help="only write N JPEGs of --size into --workdir/images (a test set to reuse), then stop",
    )
    parser.add_argument(
        "--models",
        default="tiny,default",
        help="comma-separated: tiny, default, a saved model folder, or none (default tiny,default)",
    )
    parser.add_argument(
        "--fake-encoder", action="store_true", help="also run the whole job with the instant fake encoder"
    )
    parser.add_argument("--fake-image-size", type=int, default=224, help="the fake encoder's input size")
    parser.add_argument("--batch-size", type=int, default=32, help="images per encoder batch (default 32)")
    parser.add_argument(
        "--top-n", type=int, default=DEFAULT_TOP_N, help=f"terms kept per image (default {DEFAULT_TOP_N})"
    )
    parser.add_argument("--write-docs", type=int, default=10_000, help="synthetic documents per engine")
    parser.add_argument("--terms-per-doc", type=int, default=1000, help="terms per synthetic document")
    parser.add_argument("--write-batch", type=int, default=500, help="documents per engine write")
    parser.add_argument("--vocab-size", type=int, default=30522, help="vocabulary of synthetic documents")
    parser.add_argument(
        "--engines",
        default="embedded,elasticsearch",
        help="comma-separated engines to write into, or none (default embedded,elasticsearch)",
    )
    parser.add_argument(
        "--es-url", default=os.environ.get("VSPARTA_TEST_ES_URL", DEFAULT_ES_URL), help="Elasticsearch URL"
    )
    parser.add_argument(
        "--workers", type=int, default=1, help="decode worker processes in the whole-job runs (default 1)"
    )
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument(
        "--gpu-decode",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="whole-job runs with (or without) nvJPEG in the decode stage (default: on with CUDA)",
    )
    parser.add_argument(
        "--solo-images",
        type=int,
        default=None,
        metavar="N",
        help="measure decode and encode alone on the first N images only (default: all)",
    )
    parser.add_argument(
        "--make-workers", type=int, default=1, help="processes writing the generated JPEGs (default 1)"
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--workdir", type=Path, help="keep generated files here (default: a temp folder)")


def build_model(kind: str, folder: Path) -> Path:
    """Save a model for ``kind`` and return its folder.

    ``default``: the ``base`` preset (MiniLM-L6 dimensions, 224 px) initialised from MiniLM, as
    ``vsparta train`` starts by default; ``tiny``/``small``/``base``: random init; or an existing
    saved model folder.
    """
    if Path(kind).is_dir():
        return Path(kind)
    from vsparta.model.configuration import DEFAULT_TEXT_MODEL, PRESETS, config_from_spec
    from vsparta.model.modeling import build_model as build

    out = folder / f"model-{kind}"
    if kind == "default":
        model = build(config_from_spec("base"), init=DEFAULT_TEXT_MODEL)
    elif kind in PRESETS:
        model = build(config_from_spec(kind))
    else:
        raise ValueError(f"unknown model {kind!r}: default, {', '.join(PRESETS)} or a saved model folder")
    model.save_pretrained(out)
    return out


def time_decode(paths: list[Path], preprocess: Any, fast: bool) -> tuple[float, np.ndarray]:
    """Images/s of one process doing what a decode worker does; and the uint8 pictures."""
    from vsparta.indexer.decoder import decode_chunk
    from vsparta.indexer.items import WorkItem

    items = [WorkItem(id=str(i), location=str(p), image=p) for i, p in enumerate(paths)]
    start = time.perf_counter()
    chunk = decode_chunk(items, preprocess, None, fast_decode=fast)
    rate = len(paths) / (time.perf_counter() - start)
    assert chunk.pixels is not None and len(chunk.pixels) == len(paths), "a generated image failed to decode"
    return rate, chunk.pixels


def time_encode(encoder: Any, pixels: np.ndarray, batch_size: int, top_n: int) -> tuple[float, float]:
    """(images/s, mean terms per image); the first batch is a warm-up and not timed."""
    batches = [pixels[i : i + batch_size] for i in range(0, len(pixels), batch_size)]
    encoder.encode_uint8(batches[0], top_n=top_n)
    start = time.perf_counter()
    n_terms: list[int] = []
    for b in batches:
        indptr, _, _ = encoder.encode_uint8(b, top_n=top_n)
        n_terms += np.diff(indptr).tolist()
    return len(pixels) / (time.perf_counter() - start), float(np.mean(n_terms))


def synthetic_batches(n_docs: int, n_terms: int, vocab: int, batch: int, seed: int = 0) -> Iterator[Any]:
    """CSR batches like the encoder's: distinct ids per row, heaviest first."""
    from vsparta.indexer.batch import TermBatch, canonical_csr

    rng = np.random.default_rng(seed)
    for start in range(0, n_docs, batch):
        n = min(n_docs, start + batch) - start
        ids = np.stack([rng.choice(vocab, size=n_terms, replace=False) for _ in range(n)]).astype(np.int32)
        weights = (rng.gamma(2.0, 0.5, (n, n_terms)) + 1e-3).astype(np.float32)
        indptr = np.arange(n + 1, dtype=np.int64) * n_terms
        csr = canonical_csr(indptr, ids.ravel(), weights.ravel(), None)
        yield TermBatch(
            [f"doc{i:07d}" for i in range(start, start + n)],
            *csr,
            [{"n": i} for i in range(start, start + n)],
        )


def time_writes(index: Any, args: argparse.Namespace) -> float:
    """Documents/s of ``upsert_arrays`` alone (generation is not timed), including the refresh."""
    from vsparta.indexer.writer import IndexTarget

    target = IndexTarget(index)
    spent = 0.0
    written = 0
    with target.bulk():
        for batch in synthetic_batches(
            args.write_docs, args.terms_per_doc, args.vocab_size, args.write_batch
        ):
            start = time.perf_counter()
            target.write(batch)
            spent += time.perf_counter() - start
            written += len(batch)
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
    if args.make_images is not None:
        if args.workdir is None:
            raise ValueError("--make-images needs --workdir DIR (where the test set is kept)")
        paths = image_set(args.workdir, args.make_images, args.size, args.make_workers)
        _out(f"wrote {len(paths)} JPEGs of {args.size[0]}x{args.size[1]} in {args.workdir / 'images'}")
        return 0

    work = args.workdir or Path(tempfile.mkdtemp(prefix="vsparta-bench-indexing-"))
    results: dict[str, Any] = {
        "command": command_line("indexing"),
        "machine": hardware.describe(),
        "images": args.images,
        "image_size": list(args.size),
        "batch_size": args.batch_size,
        "workers": args.workers,
        "gpu_decode": args.gpu_decode,
        "solo_images": args.solo_images,
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


def _job(args: argparse.Namespace, work: Path, name: str, **kw: Any) -> dict[str, Any]:
    """One whole ``vsparta index`` job into a fresh embedded index; its summary's figures."""
    from vsparta.indexer.runner import IndexConfig, IndexJob

    target = work / f"pipeline-{name}"
    shutil.rmtree(target, ignore_errors=True)
    encoder = kw.pop("encoder", None)
    config = IndexConfig(
        input=work / "images",
        backend=f"embedded:{target}",
        batch_size=args.batch_size,
        workers=args.workers,
        top_n=args.top_n,
        progress=False,
        gpu_decode=args.gpu_decode,
        **kw,
    )
    summary = IndexJob(config, encoder=encoder).run()
    assert summary.indexed == args.images, f"{summary.indexed} of {args.images} images indexed"
    return summary.figures()


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _stage_line(label: str, fig: dict[str, Any]) -> str:
    rates, busy = fig["stage_rates"], fig["busy_shares"]
    parts = [f"{label}: {fig['images_per_s']:.1f} img/s end to end"]
    for stage in ("decode", "encode", "write"):
        if rates.get(stage) is not None:
            parts.append(f"{stage} {rates[stage]:.0f}/s busy {_pct(busy.get(stage))}")
    parts.append(f"GPU busy {_pct(busy.get('gpu'))}")
    return "; ".join(parts)


def _run(args: argparse.Namespace, work: Path, results: dict[str, Any]) -> None:
    from vsparta.termindex import open_index

    results["models"] = {}
    kinds = [k for k in args.models.split(",") if k and k != "none"]
    if kinds or args.fake_encoder:
        from vsparta.termindex.embedded.warmup import compile_kernels

        results["kernel_warmup_seconds"] = compile_kernels(work / "warm-kernels")
        _out(f"embedded engine kernels compiled or loaded first: {results['kernel_warmup_seconds']:.1f} s")
        paths = image_set(work, args.images, args.size, args.make_workers)
        w, h = args.size
        _out(f"{len(paths)} JPEGs of {w}x{h}, batch {args.batch_size}, {args.workers} decode worker(s)")
        solo = paths[: args.solo_images] if args.solo_images else paths
    if args.fake_encoder:
        from vsparta.indexer.fake import FakeEncoder

        pre = FakeEncoder(args.fake_image_size).preprocessor
        decode_fast, _ = time_decode(solo, pre, fast=True)
        decode_exact, _ = time_decode(solo, pre, fast=False)
        fig = _job(args, work, "fake", fake_encoder=True, fake_image_size=args.fake_image_size)
        ceiling = decode_fast * max(1, args.workers)
        row = {
            "decode_fast_images_per_s": decode_fast,
            "decode_exact_images_per_s": decode_exact,
            "pipeline": fig,
            "pipeline_vs_decode": fig["images_per_s"] / ceiling,
        }
        results["fake_encoder"] = row
        _out(
            f"fake encoder ({args.fake_image_size}px): decode alone {decode_fast:.1f} img/s/process"
            f" (full decode {decode_exact:.1f}); {_stage_line('job', fig)};"
            f" job = {row['pipeline_vs_decode']:.0%} of decode x workers"
        )
    for kind in kinds:
        from vsparta.model.encode import TermEncoder  # torch: only when a model is measured

        folder = build_model(kind, work)
        encoder = TermEncoder.from_pretrained(folder, device="auto")
        cfg = encoder.config
        decode_rate, pixels = time_decode(solo, encoder.preprocessor, fast=True)
        encode_rate, mean_terms = time_encode(encoder, pixels, args.batch_size, args.top_n)
        fig = _job(args, work, kind, encoder=encoder)
        row = {
            "hidden_size": cfg.hidden_size,
            "layers": cfg.num_hidden_layers,
            "image_size": cfg.image_size,
            "vocab_size": cfg.vocab_size,
            "device": str(encoder.device),
            "decode_images_per_s": decode_rate,
            "encode_images_per_s": encode_rate,
            "mean_terms_per_image": mean_terms,
            "pipeline": fig,
        }
        results["models"][kind] = row
        _out(
            f"model {kind} (hidden {cfg.hidden_size}, {cfg.num_hidden_layers} layers, {cfg.image_size}px,"
            f" {encoder.device}): decode alone {decode_rate:.1f} img/s/process, encode alone"
            f" {encode_rate:.1f} img/s, {mean_terms:.0f} terms/image; {_stage_line('job', fig)}"
        )
    results["writes"] = {}
    engines = [e for e in args.engines.split(",") if e and e != "none"]
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
    quiet_client_loggers(logging.WARNING)  # one line per bulk request otherwise
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
