"""``vsparta bench soak``: a local 3-node cluster loaded and searched for N minutes while a scheduler
breaks it at random, then held against the oracle.

    vsparta bench soak --minutes 15 --engine elasticsearch-7.17 --engine opensearch-2.19

Per engine line: a cluster (``fault_cluster``, every node on its own loopback address) behind this
run's netfilter chains (``fault_net``); a served index (``fault_run``); ``vsparta index`` loads of
new documents one after another, each resumed until it completes; two query streams through
``vsparta serve``; and every few seconds one fault (``fault_events``: SIGKILL and restart of any
node, the master or a primary holder cut off, a one-way cut, a slow link), held for a random
time, healed, waited out to green. At the end: every answer was 503 or the oracle's top-k over a
state the index held between loads, no acknowledged document was missing after its load, and the
index is exactly the oracle's documents. Results go to ``docs/cluster-faults.json`` (merged by
engine line) and ``docs/cluster-faults.md``.

Needs root (iptables, the nodes' users) and this checkout's ``scripts/elasticsearch.sh``.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from vsparta.bench.fault_cluster import LINES, LocalCluster
from vsparta.bench.fault_events import KINDS, Event, run_event
from vsparta.bench.fault_net import NetFaults
from vsparta.bench.fault_run import FaultRun

log = logging.getLogger(__name__)

LOAD_DOCS = 3000  # documents per load (a load takes ~20 s undisturbed on two shared cores)
BASE_DOCS = 1500


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--minutes", type=float, default=2.0, help="how long faults are injected (default 2)")
    parser.add_argument(
        "--engine",
        action="append",
        choices=list(LINES),
        help="engine line (repeatable; default elasticsearch-7.17 and opensearch-2.19)",
    )
    parser.add_argument(
        "--kinds", default=",".join(KINDS), help=f"fault kinds to draw from ({', '.join(KINDS)})"
    )
    parser.add_argument(
        "--hold", type=float, default=20.0, help="longest time a fault is held, s (default 20)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the fault schedule and the documents")
    parser.add_argument("--out-dir", type=Path, default=Path("docs"), help="cluster-faults.json/.md go here")
    parser.add_argument("--no-write", action="store_true", help="print only")


def _kinds(text: str) -> list[str]:
    kinds = [k.strip() for k in text.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        raise ValueError(f"--kinds takes a comma list of {', '.join(KINDS)}, got {text!r}")
    return kinds


def _answers_during(run: FaultRun, event: Event) -> dict[str, int]:
    end = event.healed + (event.heal_to_green_s or 0.0)
    report = run.answers(event.start, end)
    return {"answers": report.total, "503": report.statuses.get(503, 0), "500": report.statuses.get(500, 0),
            "other": sum(v for k, v in report.statuses.items() if k not in (200, 503)),
            "mismatched": len(report.mismatched)}  # fmt: skip


def run_soak(
    cluster: LocalCluster,
    faults: NetFaults,
    work: Path,
    open_index: Any,
    minutes: float,
    kinds: list[str],
    hold_s: float = 20.0,
    seed: int = 0,
) -> dict[str, Any]:
    """Faults for ``minutes`` over loads and query streams on a running cluster; the result."""
    rng = random.Random(seed)
    run = FaultRun(cluster, work, f"soak-{seed}-{int(time.time())}", open_index)
    run.prepare(BASE_DOCS, seed=seed)
    run.serve()
    t0 = time.monotonic()
    stop = threading.Event()
    errors: list[BaseException] = []

    def loads() -> None:
        k = 0
        try:
            while not stop.is_set():
                run.load(LOAD_DOCS, seed=seed * 1000 + k + 1, tag=f"load{k}")
                k += 1
        except BaseException as exc:  # noqa: BLE001 - reported with the result
            errors.append(exc)

    loader = threading.Thread(target=loads, name="soak-loads")
    loader.start()
    events: list[Event] = []
    try:
        while time.monotonic() - t0 < minutes * 60 and loader.is_alive():
            time.sleep(rng.uniform(3, 10))
            events.append(
                run_event(rng.choice(kinds), cluster, faults, run.name, rng, hold_s=rng.uniform(3, hold_s))
            )
    finally:
        stop.set()
        loader.join()
        run.stop_streams()
    final = run.final_check()
    answers = run.answers()
    rows = []
    for e in events:
        rows.append(e.row(t0) | _answers_during(run, e))
    return {
        "line": cluster.line,
        "minutes": round((time.monotonic() - t0) / 60, 1),
        "events": rows,
        "loads": [
            vars(o) | {"lost_acknowledged": len(o.lost_acknowledged), "lost_ids": o.lost_acknowledged[:20]}
            for o in run.loads
        ],
        "answers": answers.as_dict(),
        "index": final.as_dict(),
        "settings_after": run.settings,
        "left_behind": run.left_behind,
        "load_errors": [str(e) for e in errors],
    }


def soak_line(line: str, minutes: float, kinds: list[str], hold_s: float, seed: int) -> dict[str, Any]:
    """A fresh cluster of ``line`` (its own work dir, removed afterwards), soaked."""
    from vsparta.termindex import open_index

    home = Path(tempfile.mkdtemp(prefix="vsparta-soak-", dir="/var/tmp"))
    home.chmod(0o755)  # the nodes' users must reach it
    cluster = LocalCluster(line, home / "nodes")
    try:
        cluster.claim()
        with NetFaults(cluster.addresses()) as faults:
            faults.own_sources(cluster.users())  # before the nodes start: NAT decides per connection
            try:
                started = cluster.start()
                result = run_soak(cluster, faults, home / "work", open_index, minutes, kinds, hold_s, seed)
                return result | {"cluster_start_s": round(started, 1)}
            finally:
                cluster.stop()
    finally:
        shutil.rmtree(home, ignore_errors=True)


def run(args: argparse.Namespace) -> int:
    from vsparta.bench import soak_report

    if args.minutes <= 0:
        raise ValueError(f"--minutes must be > 0, got {args.minutes}")
    kinds = _kinds(args.kinds)
    if not shutil.which("iptables"):
        raise ValueError(
            "the soak cuts nodes apart with iptables, which is missing: apt-get install iptables"
        )

    if os.geteuid() != 0:
        raise ValueError("the soak needs root: it adds iptables rules and runs each node as its own user")
    lines = args.engine or ["elasticsearch-7.17", "opensearch-2.19"]
    results = [soak_line(line, args.minutes, kinds, args.hold, args.seed) for line in lines]
    print(soak_report.table(results))
    if not args.no_write:
        soak_report.write(results, args.out_dir)
    return 0
