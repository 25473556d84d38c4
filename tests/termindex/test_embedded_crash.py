"""A writer killed mid-write leaves the last good state; readers in other processes stay consistent."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vsparta.termindex.base import TermDocument
from vsparta.termindex.embedded.index import EmbeddedIndex
from vsparta.termindex.oracle import random_documents, random_queries

ROOT = Path(__file__).resolve().parents[2]

# Each phase stops the writer at one point of a commit (announced on stdout) so the kill lands
# exactly there; "natural" is an unpatched big batch killed as soon as its temp files appear.
WRITER = """
import os, sys, time
import numpy as np
import vsparta.termindex.embedded.format as fmt
from vsparta.termindex.base import TermDocument
from vsparta.termindex.embedded.index import EmbeddedIndex

path, phase = sys.argv[1], sys.argv[2]

def announce_and_hang(what):
    print(what, flush=True)
    time.sleep(600)

real_write_file, real_rename = fmt.write_file, os.rename
if phase == "segment-files":  # some segment files written, the rest not
    def write_file(p, data):
        real_write_file(p, data)
        if p.name == "docids.bin":
            announce_and_hang(phase)
    fmt.write_file = write_file
elif phase == "segment-renamed":  # segment directory in place, manifest not switched
    def rename(a, b):
        real_rename(a, b)
        announce_and_hang(phase)
    fmt.os.rename = rename
elif phase == "manifest-temp":  # new manifest written to its temp name, not yet os.replace'd
    def write_file(p, data):
        real_write_file(p, data)
        if p.name.startswith(".manifest"):
            announce_and_hang(phase)
    fmt.write_file = write_file

n, m = (20_000, 300) if phase == "natural" else (300, 50)
rng = np.random.default_rng(0)
terms = {int(t): 1.5 for t in rng.choice(3000, m, replace=False)}
index = EmbeddedIndex(path)
index.delete(["doc3"]) if phase == "manifest-temp" else None
index.upsert(TermDocument(f"big-{i}", terms) for i in range(n))
print("finished", flush=True)
"""

READER = """
import json, os, sys, time
from vsparta.termindex.embedded.index import EmbeddedIndex
path, ready, stop = sys.argv[1], sys.argv[2], sys.argv[3]
index = EmbeddedIndex(path, auto_refresh=False)
open(ready, "w").close()
gens, iterations, last = set(), 0, -1
while not os.path.exists(stop) or iterations < 3:
    index.refresh()
    gen = index.generation
    assert gen >= last, (gen, last)
    last = gen
    n = index.count()
    hits = index.search({1: 1.0}, k=10_000)  # every document has term 1
    ids = [h.id for h in hits]
    assert len(ids) == n == len(set(ids)), (gen, n, len(ids))
    assert (n - 20) % 50 == 0, n  # 20 fixed documents + whole batches of 50
    versions = {h.metadata["v"] for h in hits if h.id.startswith("r")}
    assert len(versions) == 1, versions  # a commit's replacements are seen all or nothing
    gens.add(gen)
    iterations += 1
print(json.dumps({"generations": sorted(gens), "iterations": iterations}))
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}


def _snapshot(index: EmbeddedIndex, queries) -> list:
    return [[(h.id, h.score) for h in index.search(q, k=10)] for q in queries]


@pytest.mark.parametrize(
    "phase",
    ["segment-files", "segment-renamed", "manifest-temp", pytest.param("natural", marks=pytest.mark.slow)],
)
def test_killed_writer_leaves_last_good_state(tmp_path, phase):
    path = tmp_path / "idx"
    index = EmbeddedIndex(path, create=True)
    index.upsert(random_documents(500, vocab_size=3000, seed=1))
    queries = random_queries(20, vocab_size=3000, seed=2)
    before = _snapshot(index, queries)
    generation = index.generation

    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path), phase], env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    if phase == "natural":
        deadline = time.monotonic() + 120
        while not any(p.name.startswith(".tmp-") for p in path.iterdir()):  # writing a segment
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "writer never started writing"
            time.sleep(0.002)
    else:
        line = proc.stdout.readline().decode().strip()
        assert line == phase, (line, proc.stderr.read().decode()[-2000:])
    proc.send_signal(signal.SIGKILL)
    out, _ = proc.communicate()
    assert proc.returncode == -signal.SIGKILL and b"finished" not in out, "writer finished before the kill"

    reader = EmbeddedIndex(path)
    assert reader.generation == generation
    assert reader.count() == 500
    assert _snapshot(reader, queries) == before
    assert reader.get("doc3").id == "doc3"
    # the lock died with the writer; the next write succeeds and removes the leftovers
    reader.upsert([TermDocument("after-crash", {5: 1.0})])
    assert reader.count() == 501
    assert reader.get("after-crash").weights == {5: 1.0}
    assert not [p for p in path.iterdir() if p.name.startswith(".")]
    assert len([p for p in path.iterdir() if p.name.startswith("seg-")]) == 2


@pytest.mark.slow
def test_concurrent_reader_processes_see_consistent_generations(tmp_path):
    path = tmp_path / "idx"
    writer = EmbeddedIndex(path, create=True, max_segments=4)
    writer.upsert([TermDocument(f"r{j}", {1: 1.0, 2: float(j + 1)}, {"v": 0}) for j in range(20)])
    stop = tmp_path / "stop"
    readers = []
    for r in range(3):
        ready = tmp_path / f"ready-{r}"
        cmd = [sys.executable, "-c", READER, str(path), str(ready), str(stop)]
        proc = subprocess.Popen(cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        readers.append((ready, proc))
    deadline = time.monotonic() + 120
    while not all(ready.exists() for ready, _ in readers):
        assert all(p.poll() is None for _, p in readers), [p.communicate() for _, p in readers]
        assert time.monotonic() < deadline
        time.sleep(0.01)

    for g in range(1, 13):
        batch = [TermDocument(f"b{g}-{j}", {1: 1.0, 3: float(j + 1)}, {"v": g}) for j in range(50)]
        batch += [TermDocument(f"r{j}", {1: 1.0 + g, 2: float(j + 1)}, {"v": g}) for j in range(20)]
        writer.upsert(batch)  # new documents and replacements in one commit
        if g % 4 == 0:
            writer.delete([f"b{g - 1}-{j}" for j in range(50)])  # a whole batch at once
        if g == 10:
            writer.compact()
        time.sleep(0.05)
    stop.touch()

    for _, proc in readers:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()[-3000:]
        report = json.loads(out.decode().strip().splitlines()[-1])
        assert report["iterations"] >= 3
        assert len(report["generations"]) >= 2, report  # it did read while the writer committed
    assert writer.count() == 20 + 50 * 12 - 50 * 3
