"""`vsparta index` end to end with the real tiny VisualSparta model and the real engines.

Determinism note: the same image encoded in batches of different sizes can differ in the last
float bit (BLAS kernels), so tests that compare two runs with different batch boundaries
(shards, kill + resume) use ``--batch-size 1``; then every document must be identical.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psutil
import pytest

from vsparta.cli import main as vsparta
from vsparta.indexer.items import path_id
from vsparta.indexer.reader import read_items
from vsparta.termindex import IndexNotFound, TermIndex, open_index

ROOT = Path(__file__).resolve().parents[2]
N_MANY, KILL_AFTER = 200, 10  # images in the crash tests; interrupt once this many are committed


def index_args(images: Path, model: Path, backend: str, *extra: str) -> list[str]:
    return [
        "index", str(images), "--model", str(model), "--backend", backend,
        "--max-pixels", "200000", "--top-n", "64", "--device", "cpu", "--no-progress", *extra,
    ]  # fmt: skip


def snapshot(index: TermIndex, ids: list[str]) -> dict[str, tuple[dict[int, float], dict]]:
    """Every document of the index that has one of ``ids``, and checks there are no others."""
    out = {}
    for doc_id in ids:
        try:
            doc = index.get(doc_id)
        except KeyError:
            continue
        out[doc_id] = (dict(doc.weights), dict(doc.metadata))
    assert index.count() == len(out), "the index holds documents that are not in the input"
    return out


def refresh(index: TermIndex) -> None:
    fn = getattr(index, "refresh", None)
    if callable(fn):
        fn()


@pytest.fixture
def es_spec(es_url: str) -> Iterator[str]:
    """A fresh alias name on the real node; it and the ``-one``/``-sharded`` ones are dropped after."""
    name = f"indexer-test-{uuid.uuid4().hex[:10]}"
    yield f"{es_url}/{name}"
    for alias in (name, f"{name}-one", f"{name}-sharded"):
        try:
            with open_index(f"{es_url}/{alias}") as index:
                index.drop()  # type: ignore[attr-defined]
        except IndexNotFound:
            pass


def _check_job(
    spec: str, image_folder: Path, tiny_model: Path, tmp_path: Path, bad_files: dict[str, str]
) -> None:
    failures = tmp_path / "failures.jsonl"
    rc = vsparta(index_args(image_folder, tiny_model, spec, "--failures", str(failures), "--workers", "0"))
    assert rc == 0
    reasons = {
        Path(r["path"]).relative_to(image_folder).as_posix(): r["reason"]
        for r in map(json.loads, failures.read_text().splitlines())
    }
    assert reasons == bad_files
    with open_index(spec) as index:
        refresh(index)
        docs = snapshot(index, [it.id for it in read_items(image_folder)])
        assert len(docs) == 12
        for doc_id, (terms, meta) in docs.items():
            assert 0 < len(terms) <= 64 and all(w > 0 for w in terms.values())
            assert doc_id == path_id(meta["image"]) and (Path(meta["image_root"]) / meta["image"]).is_file()
            top = dict(sorted(terms.items(), key=lambda kv: -kv[1])[:5])
            assert doc_id in [h.id for h in index.search(top, k=12)]
        # a rerun without --resume overwrites: same documents, no duplicates
        assert vsparta(index_args(image_folder, tiny_model, spec, "--workers", "0")) == 0
        refresh(index)
        again = snapshot(index, list(docs))
        assert set(again) == set(docs) and index.count() == 12


def test_real_model_into_embedded(image_folder: Path, tiny_model: Path, tmp_path: Path, bad_files) -> None:
    _check_job(f"embedded:{tmp_path / 'index'}", image_folder, tiny_model, tmp_path, bad_files)


@pytest.mark.elasticsearch
def test_real_model_into_elasticsearch(
    image_folder: Path, tiny_model: Path, tmp_path: Path, bad_files, es_spec: str
) -> None:
    _check_job(es_spec, image_folder, tiny_model, tmp_path, bad_files)


def _shards_equal_one_job(spec_one: str, spec_sharded: str, images: Path, model: Path) -> None:
    assert vsparta(index_args(images, model, spec_one, "--batch-size", "1", "--workers", "0")) == 0
    for shard in ("0", "1"):
        args = ["--batch-size", "1", "--workers", "0", "--shard", shard, "--num-shards", "2"]
        assert vsparta(index_args(images, model, spec_sharded, *args)) == 0
    ids = [it.id for it in read_items(images)]
    with open_index(spec_one) as one, open_index(spec_sharded) as sharded:
        refresh(one)
        refresh(sharded)
        expected = snapshot(one, ids)
        assert len(expected) == 12
        assert snapshot(sharded, ids) == expected


def test_two_shards_give_the_same_embedded_index(
    image_folder: Path, tiny_model: Path, tmp_path: Path
) -> None:
    _shards_equal_one_job(
        f"embedded:{tmp_path / 'one'}", f"embedded:{tmp_path / 'sharded'}", image_folder, tiny_model
    )


def test_min_weight_indexes_the_same_documents_without_their_light_terms(
    image_folder: Path, tiny_model: Path, tmp_path: Path, capsys
) -> None:
    common = ("--workers", "0", "--batch-size", "1")  # batch size 1: identical φ in both jobs
    assert vsparta(index_args(image_folder, tiny_model, f"embedded:{tmp_path / 'all'}", *common)) == 0
    ids = [it.id for it in read_items(image_folder)]
    with open_index(f"embedded:{tmp_path / 'all'}") as index:
        full = snapshot(index, ids)
    # About half the stored terms; the cut sits halfway between two neighbouring half floats (what
    # the engine stores), so a weight below it is stored below it and one above it above it.
    v = np.float16(sorted(w for weights, _ in full.values() for w in weights.values())[len(full) * 32])
    cut = (float(v) + float(np.nextafter(v, np.float16(np.inf)))) / 2
    light = index_args(image_folder, tiny_model, f"embedded:{tmp_path / 'cut'}", *common)
    assert vsparta([*light, "--min-weight", str(cut)]) == 0
    with open_index(f"embedded:{tmp_path / 'cut'}") as index:
        pruned = snapshot(index, ids)
    assert pruned.keys() == full.keys()  # no image lost
    for doc_id, (weights, meta) in full.items():
        kept = {t: w for t, w in weights.items() if w >= cut} or dict(
            [max(weights.items(), key=lambda x: x[1])]
        )
        assert pruned[doc_id] == (kept, meta)
    assert sum(map(len, (w for w, _ in pruned.values()))) < sum(map(len, (w for w, _ in full.values())))
    with pytest.raises(SystemExit) as exc:
        vsparta([*light, "--min-weight", "-1"])
    assert exc.value.code == 2 and "--min-weight must be a finite number >= 0" in capsys.readouterr().err


@pytest.mark.elasticsearch
def test_two_shards_give_the_same_elasticsearch_index(
    image_folder: Path, tiny_model: Path, es_url: str, es_spec: str
) -> None:
    _shards_equal_one_job(f"{es_spec}-one", f"{es_spec}-sharded", image_folder, tiny_model)


def test_term_documents_reindex_without_model_gives_identical_search(
    image_folder: Path, tiny_model: Path, tmp_path: Path, read_export
) -> None:
    first, second = f"embedded:{tmp_path / 'first'}", f"embedded:{tmp_path / 'second'}"
    export = tmp_path / "export"
    assert vsparta(index_args(image_folder, tiny_model, first, "--export-jsonl", str(export))) == 0
    records = read_export(export)
    assert len(records) == 12 and all(isinstance(t, str) for r in records.values() for t in r["terms"])
    rc = vsparta(["index", str(export), "--tokenizer", str(tiny_model), "--backend", second, "--no-progress"])
    assert rc == 0
    with open_index(first) as a, open_index(second) as b:
        ids = list(records)
        assert snapshot(a, ids) == snapshot(b, ids)
        for doc_id in ids[:6]:
            query = dict(sorted(a.get(doc_id).weights.items(), key=lambda kv: -kv[1])[:4])
            assert [(h.id, h.score) for h in a.search(query, k=10)] == [
                (h.id, h.score) for h in b.search(query, k=10)
            ]


# ---------------------------------------------------------------------------- crash and stop


def _start(args: list[str]) -> tuple[subprocess.Popen[str], list[str], threading.Event, list[int]]:
    """Start `vsparta -v index ...`; a thread collects stderr and the committed-document count."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "vsparta.cli", "-v", *args],
        cwd=ROOT, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    lines: list[str] = []
    committed = [0]
    reached = threading.Event()

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if "committed" in line and "in total" in line:
                committed[0] = int(line.rsplit("(", 1)[1].split()[0])
                if committed[0] >= KILL_AFTER:
                    reached.set()
        reached.set()  # process ended

    threading.Thread(target=pump, daemon=True).start()
    return proc, lines, reached, committed


@pytest.fixture
def many_images(tmp_path: Path, write_images) -> Path:
    root = tmp_path / "many"
    write_images(root, n=N_MANY, size=20)
    return root


@pytest.mark.slow
@pytest.mark.parametrize("how", ["kill -9", "SIGTERM"])
def test_interrupted_job_resumes_to_exactly_the_uninterrupted_documents(
    many_images: Path, tiny_model: Path, tmp_path: Path, read_export, how: str
) -> None:
    # commits right away, so the signal comes while most of the input is still to do
    common = ["--batch-size", "1", "--workers", "1", "--commit-interval", "0"]
    ref_spec, spec = f"embedded:{tmp_path / 'ref'}", f"embedded:{tmp_path / 'index'}"
    ref_export, export = tmp_path / "ref-export", tmp_path / "export"
    assert (
        vsparta(index_args(many_images, tiny_model, ref_spec, *common, "--export-jsonl", str(ref_export)))
        == 0
    )

    proc, lines, reached, committed = _start(
        index_args(many_images, tiny_model, spec, *common, "--export-jsonl", str(export))
    )
    assert reached.wait(120), "".join(lines[-20:])
    assert proc.poll() is None, "the job finished before it could be interrupted:\n" + "".join(lines[-20:])
    workers = psutil.Process(proc.pid).children(recursive=True)
    assert workers, "expected decode worker processes"
    proc.send_signal(signal.SIGKILL if how == "kill -9" else signal.SIGTERM)
    rc = proc.wait(60)
    _, alive = psutil.wait_procs(workers, timeout=20)
    assert not alive, f"worker processes outlived the job: {alive}"
    ids = [it.id for it in read_items(many_images)]
    with open_index(spec) as index:
        partial = snapshot(index, ids)
    assert KILL_AFTER <= len(partial) < N_MANY
    if how == "SIGTERM":
        assert rc == 128 + signal.SIGTERM, "".join(lines[-20:])
        assert any("rerun with --resume" in line for line in lines)
        assert set(read_export(export)) == set(partial)  # stopped consistently: engine == export
    else:
        assert rc == -signal.SIGKILL

    assert (
        vsparta(index_args(many_images, tiny_model, spec, *common, "--export-jsonl", str(export), "--resume"))
        == 0
    )
    with open_index(spec) as index, open_index(ref_spec) as ref:
        expected = snapshot(ref, ids)
        assert len(expected) == N_MANY
        assert snapshot(index, ids) == expected
    assert read_export(export) == read_export(ref_export)  # no duplicate, none missing, same terms


@pytest.mark.elasticsearch
def test_resume_into_elasticsearch_skips_what_is_there(
    image_folder: Path, tiny_model: Path, tmp_path: Path, es_spec: str
) -> None:
    """Half the documents are already in the index (an earlier, stopped job): --resume adds the rest."""
    args = ["--batch-size", "1", "--workers", "0"]
    assert (
        vsparta(index_args(image_folder, tiny_model, es_spec, *args, "--shard", "0", "--num-shards", "2"))
        == 0
    )
    ids = [it.id for it in read_items(image_folder)]
    with open_index(es_spec) as index:
        before = snapshot(index, ids)
    from vsparta.indexer.runner import IndexConfig, IndexJob

    config = IndexConfig(
        input=image_folder, backend=es_spec, model=tiny_model, top_n=64, device="cpu", batch_size=1,
        workers=0, resume=True, max_pixels=200_000, progress=False,
    )  # fmt: skip
    summary = IndexJob(config).run()
    assert summary.skipped == len(before) > 0 and summary.indexed == 12 - len(before)
    with open_index(es_spec) as index:
        after = snapshot(index, ids)
    assert len(after) == 12 and {k: after[k] for k in before} == before


@pytest.mark.elasticsearch
def test_shard_jobs_started_together_build_one_elasticsearch_index(
    image_folder: Path, tiny_model: Path, es_spec: str
) -> None:
    """Shards started together: shard 0 creates the index, shard 1 waits; one version, one job's docs."""
    from vsparta.indexer.runner import IndexConfig, run_index

    one, sharded = f"{es_spec}-one", f"{es_spec}-sharded"
    assert vsparta(index_args(image_folder, tiny_model, one, "--batch-size", "1", "--workers", "0")) == 0

    def shard(i: int) -> None:
        run_index(
            IndexConfig(
                input=image_folder,
                backend=sharded,
                model=tiny_model,
                top_n=64,
                device="cpu",
                batch_size=1,
                workers=0,
                max_pixels=200_000,
                progress=False,
                shard=i,
                num_shards=2,
            )  # fmt: skip
        )

    errors: list[BaseException] = []
    jobs = [threading.Thread(target=_catch, args=(errors, shard, i)) for i in (1, 0)]
    for job in jobs:  # at the same moment: each would otherwise create its own version
        job.start()
    for job in jobs:
        job.join(120)
    assert not errors and not any(job.is_alive() for job in jobs)
    url, _, alias = sharded.rpartition("/")
    with urllib.request.urlopen(f"{url}/_alias/{alias}", timeout=10) as resp:
        assert len(json.load(resp)) == 1  # the alias points at exactly one index
    ids = [it.id for it in read_items(image_folder)]
    with open_index(one) as a, open_index(sharded) as b:
        expected = snapshot(a, ids)
        assert len(expected) == 12 and snapshot(b, ids) == expected


def _catch(errors: list[BaseException], fn, *args) -> None:
    try:
        fn(*args)
    except BaseException as exc:  # noqa: BLE001 - reported by the test
        errors.append(exc)


def test_other_shards_wait_for_shard_zero_to_create_the_index(tmp_path: Path) -> None:
    from vsparta.indexer.stages import open_backend
    from vsparta.termindex import IndexNotFound as NotFound
    from vsparta.termindex import parse_spec

    spec = parse_spec(f"embedded:{tmp_path / 'index'}")
    start = time.monotonic()
    with pytest.raises(NotFound, match="shard 0 creates it"):
        open_backend(spec, shard=1, num_shards=2, wait=0.6)
    assert time.monotonic() - start >= 0.6
    open_backend(spec, shard=0, num_shards=2).close()
    open_backend(spec, shard=1, num_shards=2, wait=0.6).close()
