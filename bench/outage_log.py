"""How much a `vsparta serve` logs while its engine is unreachable, for a number of clients.

    python -m bench.outage_log --clients 8,48 --seconds 12 --json docs/outage-log.json
    python -m bench.outage_log --compare /tmp/old/.venv/bin/python   # another checkout, same run

A real server is started per row with an Elasticsearch backend URL on which nothing listens (a
real unreachable engine: connection refused), then N client threads send ``POST /search`` on
kept-alive connections for the given seconds. The figure is the bytes the server's log (stdout
and stderr) grew by while they asked, per minute. ``--compare PYTHON`` runs the same rows with
another interpreter whose ``vsparta`` is another checkout (e.g. ``git archive`` of an older
commit, installed with ``pip install --no-deps -e``), so both are measured in one run.
Target (issue 24): under 10 KB per minute for any number of clients.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from vsparta.bench.engines.service import default_model_dir, free_port
from vsparta.bench.hardware import describe, one_line, write_result


def _client(port: int, stop: threading.Event, statuses: list[int]) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    body = json.dumps({"query": "red cube", "k": 3})
    while not stop.is_set():
        conn.request("POST", "/search", body=body, headers={"content-type": "application/json"})
        response = conn.getresponse()
        response.read()
        statuses.append(response.status)
    conn.close()


def measure(
    python: str, model: str, clients: int, seconds: float, work: Path, ports: tuple[int, int] | None = None
) -> dict:
    """One row: a fresh server, ``clients`` threads for ``seconds``, the log's growth.

    ``ports``: (the server's, the unreachable engine's); free ones when None."""
    port, dead = ports or (free_port(), free_port())  # nothing listens on ``dead``
    log = work / f"serve-{port}.log"
    with log.open("wb") as fh:
        server = subprocess.Popen(
            [python, "-m", "vsparta.cli", "serve", "--backend", f"http://127.0.0.1:{dead}/vsparta"]
            + ["--model", model, "--port", str(port), "--engine-timeout", "2"],
            stdout=fh,
            stderr=subprocess.STDOUT,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"server did not start: {log.read_text()[-2000:]}") from None
                time.sleep(0.2)
        time.sleep(0.5)
        before = log.stat().st_size
        stop, statuses = threading.Event(), []  # list.append is atomic
        threads = [threading.Thread(target=_client, args=(port, stop, statuses)) for _ in range(clients)]
        start = time.monotonic()
        for t in threads:
            t.start()
        time.sleep(seconds)
        stop.set()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - start
        time.sleep(0.5)
        grown = log.stat().st_size - before
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    return {
        "python": python,
        "clients": clients,
        "seconds": round(elapsed, 2),
        "answers_503": statuses.count(503),
        "other_answers": len(statuses) - statuses.count(503),
        "log_bytes": grown,
        "log_bytes_per_minute": round(grown * 60 / elapsed),
    }


def table(rows: list[dict]) -> str:
    lines = [
        "| interpreter | clients | 503 answers | seconds | log bytes | bytes per minute |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['python']} | {r['clients']} | {r['answers_503']:,} | {r['seconds']:.1f} | "
            f"{r['log_bytes']:,} | {r['log_bytes_per_minute']:,} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clients", default="8,48", help="comma list of client counts (default 8,48)")
    p.add_argument("--seconds", type=float, default=12.0, help="how long the clients ask, per row")
    p.add_argument("--model", default=default_model_dir(), help="a folder with tokenizer.json")
    p.add_argument("--compare", metavar="PYTHON", help="also run each row with this interpreter")
    p.add_argument("--json", type=Path, help="write the rows here")
    p.add_argument("--base-port", type=int, help="use ports from here up (2 per row); default: free ones")
    args = p.parse_args(argv)
    if not args.model:
        p.error("--model: give a folder with tokenizer.json")
    pythons = [sys.executable, *([args.compare] if args.compare else [])]
    rows = []
    with tempfile.TemporaryDirectory(prefix="vsparta-outage-") as work:
        for clients in (int(c) for c in args.clients.split(",")):
            for python in reversed(pythons):  # the comparison first, ours right after it
                base = args.base_port + 2 * len(rows) if args.base_port else None
                ports = (base, base + 1) if base else None
                rows.append(measure(python, args.model, clients, args.seconds, Path(work), ports))
                print(table(rows[-1:]).splitlines()[-1], flush=True)  # noqa: T201 - progress
    print(table(rows))  # noqa: T201 - the benchmark's output
    print(one_line(describe()))  # noqa: T201
    if args.json:
        write_result(args.json, {"rows": rows, "target_bytes_per_minute": 10_240}, "outage_log", argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
