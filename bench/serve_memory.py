"""The serving process's memory: a command that ends up serving (``vsparta demo``, ``vsparta serve``)
is started, asked the web page's example queries, and its resident memory read (issue 31 item 4).

Each run is one ``LABEL=COMMAND`` (a shell command line, started with ``exec`` so that the process
sampled is the command's own, the one that answers: ``vsparta demo`` becomes ``vsparta serve`` in
place). ``VmRSS`` (resident: the interpreter, libraries, mapped index pages touched) and ``RssAnon``
(the process's own heap) of /proc/PID/status are read once ``/health`` answers, then every 0.2 s
while the queries run; the table gives both at the end and the peaks.

    python -m bench.serve_memory --port 18231 \\
        --run "demo (this checkout)=.venv/bin/vsparta demo --out demo-data --port 18231 --no-progress" \\
        --json docs/demo-serve-memory.json
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from vsparta.bench.hardware import one_line, write_result
from vsparta.bench.listing_memory import status_kib
from vsparta.service.routes import page_examples

# The search page's example queries (service/static/index.html) and a few longer captions.
QUERIES = [*page_examples(), "a banana next to a cupcake", "two cars next to a pizza", "a pear on a table"]


def _get(url: str, body: dict | None = None, timeout: float = 10) -> int:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data, {"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as resp:
        resp.read()
        return resp.status


def _wait_healthy(url: str, proc: subprocess.Popen, timeout_s: float) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        if proc.poll() is not None:
            raise RuntimeError(f"the command exited ({proc.returncode}) before serving")
        try:
            if _get(url + "health", timeout=2) == 200:
                return time.monotonic() - start
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)
    raise RuntimeError(f"nothing answered {url}health within {timeout_s:.0f} s")


def measure(label: str, command: str, url: str, rounds: int, timeout_s: float) -> dict:
    """Start ``command``, wait for it to serve, send the queries ``rounds`` times, read its memory."""
    quiet = subprocess.DEVNULL
    proc = subprocess.Popen(["bash", "-c", f"exec {command}"], stdout=quiet, stderr=quiet)
    samples: list[tuple[int, int]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.2):
            rss, anon = status_kib(proc.pid, "VmRSS"), status_kib(proc.pid, "RssAnon")
            if rss is not None and anon is not None:
                samples.append((rss, anon))

    try:
        started_s = _wait_healthy(url, proc, timeout_s)
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        torch = "torch" in Path(f"/proc/{proc.pid}/maps").read_text()
        at_start = (status_kib(proc.pid, "VmRSS"), status_kib(proc.pid, "RssAnon"))
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        for _ in range(rounds):
            for query in QUERIES:
                assert _get(url + "search", {"query": query, "k": 20, "explain": True}) == 200
        stop.set()
        sampler.join()
        at_end = (status_kib(proc.pid, "VmRSS"), status_kib(proc.pid, "RssAnon"))
    finally:
        stop.set()
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    mb = 1024.0
    return {
        "label": label,
        "command": command,
        "serving_process": cmdline,
        "torch_mapped": torch,
        "seconds_to_serve": round(started_s, 1),
        "queries": rounds * len(QUERIES),
        "vmrss_mb_at_start": round(at_start[0] / mb, 1),
        "rssanon_mb_at_start": round(at_start[1] / mb, 1),
        "vmrss_mb_after_queries": round(at_end[0] / mb, 1),
        "rssanon_mb_after_queries": round(at_end[1] / mb, 1),
        "vmrss_mb_peak": round(max([at_end[0], *(s[0] for s in samples)]) / mb, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.serve_memory", description=__doc__.split("\n")[0])
    parser.add_argument("--run", action="append", required=True, metavar="LABEL=COMMAND",
                        help="a command that ends up serving on --port (repeat to compare)")  # fmt: skip
    parser.add_argument("--port", type=int, required=True, help="the port the commands serve on")
    parser.add_argument("--rounds", type=int, default=5, help="times the queries are sent (default 5)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds a command may take to serve")
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args(argv)
    url = f"http://127.0.0.1:{args.port}/"
    rows = []
    for run in args.run:
        label, sep, command = run.partition("=")
        if not sep:
            parser.error(f"--run {run!r}: LABEL=COMMAND")
        rows.append(measure(label, command, url, args.rounds, args.timeout))
    out = sys.stdout
    out.write("| run | torch in the serving process | VmRSS after start | after queries | peak | RssAnon |\n")
    out.write("|---|---|---:|---:|---:|---:|\n")
    for r in rows:
        torch = "yes" if r["torch_mapped"] else "no"
        out.write(f"| {r['label']} | {torch} | {r['vmrss_mb_at_start']:.0f} MB | "
                  f"{r['vmrss_mb_after_queries']:.0f} MB | {r['vmrss_mb_peak']:.0f} MB | "
                  f"{r['rssanon_mb_after_queries']:.0f} MB |\n")  # fmt: skip
    if args.json:
        write_result(args.json, {"rows": rows}, "serve_memory", argv)
        out.write(f"{one_line(json.loads(args.json.read_text())['machine'])}; wrote {args.json}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
