"""Load speed of Elasticsearch and OpenSearch on the same documents, rounds in rotating order,
with what each node was busy with while it loaded.

    python -m bench.engine_loads --docs 113287 --rounds 3 \\
        --engine es=http://127.0.0.1:43010 --engine os2=opensearch+http://127.0.0.1:43020 ...

Why: ``vsparta bench engines`` loads each engine once, one after the other; on a shared machine
one load can meet a burst another does not. Here every engine loads the same model-shaped
corpus (``bench.model_shaped``) ``--rounds`` times, the order rotating each round, into a fresh
index through the engine's own bulk path (``upsert_arrays`` inside ``bulk_load``, as the
indexer), then force-merged (``finish_load``). Half-way through each load it reads the node's
``_nodes/hot_threads`` (the busiest threads' top frames) and, after it, the index's segment and
merge statistics: the evidence for why one engine loads slower than another. Appends one row per
load to ``--json``.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from vsparta.bench.corpus import Corpus
from vsparta.bench.hardware import describe
from vsparta.termindex import open_index
from vsparta.termindex.registry import quiet_client_loggers

log = logging.getLogger(__name__)
SLICE = 10_000  # documents per upsert_arrays call, as the benchmark adapter


def get(url: str, raw: bool = False) -> Any:
    with urllib.request.urlopen(url, timeout=120) as resp:
        body = resp.read()
    return body.decode() if raw else json.loads(body)


def hot_frames(text: str, top: int = 4) -> list[str]:
    """The first frames of each hot thread in a ``_nodes/hot_threads`` answer, one line each:
    'cpu% thread-name: frame <- frame <- ...'."""
    out, current = [], None
    for line in text.splitlines():
        s = line.strip()
        if "cpu usage by thread" in s:  # "93.1% (465ms out of 500ms) ..." or "93.1% [cpu=...] (...) ..."
            if current:
                out.append(current[0] + ": " + " <- ".join(current[1][:top]))
            name = s.split("thread '")[-1].rstrip("'")
            current = (s.split("%")[0] + "% " + name, [])
        elif current is not None and re.fullmatch(r"\S+\(.*\)", s):
            # app//org.apache.lucene.X.y(X.java:12) or java.base@17/java.lang.Z.w(...) -> the method
            current[1].append(s.split("(")[0].rsplit("/", 1)[-1])
    if current:
        out.append(current[0] + ": " + " <- ".join(current[1][:top]))
    return out


def load_once(name: str, spec: str, corpus: Corpus, hot_after_s: float = 5.0) -> dict:
    url = spec.removeprefix("opensearch+")
    alias = f"bench-load-{uuid.uuid4().hex[:8]}"
    index = open_index(f"{spec}/{alias}", create=True)
    sampled: dict[str, Any] = {}

    def sample() -> None:  # half-way through the expected load: what the node is busy with
        time.sleep(sampled["after_s"])
        sampled["hot"] = hot_frames(get(f"{url}/_nodes/hot_threads?threads=4&interval=500ms", raw=True))

    try:
        t0 = time.perf_counter()
        sampled["after_s"] = hot_after_s
        probe = threading.Thread(target=sample, daemon=True)
        probe.start()
        with index.bulk_load():
            corpus.upsert_into(index, SLICE)
        load_s = time.perf_counter() - t0
        probe.join(timeout=30)
        stats = get(f"{url}/{alias}/_stats/segments,merge,indexing,store")["_all"]["primaries"]
        t1 = time.perf_counter()
        merged = index.finish_load()
        merge_s = time.perf_counter() - t1
        version = get(url)["version"]
        return {
            "engine": name,
            "server": f"{version.get('distribution', 'elasticsearch')} {version['number']}",
            "docs": corpus.n_docs,
            "terms_per_doc": round(corpus.nnz / corpus.n_docs, 1),
            "load_s": round(load_s, 2),
            "load_docs_per_s": round(corpus.n_docs / load_s, 1),
            "merge_s": round(merge_s, 2),
            "finish_load": merged,
            "segments_loaded": int(stats["segments"]["count"]),
            "merges_during_load": int(stats["merges"]["total"]),
            "merge_time_during_load_s": round(int(stats["merges"]["total_time_in_millis"]) / 1000, 2),
            "indexing_time_s": round(int(stats["indexing"]["index_time_in_millis"]) / 1000, 2),
            "bytes_per_term": round(int(stats["store"]["size_in_bytes"]) / corpus.nnz, 2),
            "hot_threads": sampled.get("hot", []),
        }
    finally:
        index.drop()
        index.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--engine", action="append", required=True, metavar="NAME=SPEC",
                   help="es=http://HOST:PORT or os2=opensearch+http://HOST:PORT (repeatable)")  # fmt: skip
    p.add_argument("--profile", type=Path, default=Path("docs/model-profile-sparse.npz"))
    p.add_argument("--docs", type=int, default=113_287)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--hot-after", type=float, default=5.0, help="seconds into a load to read hot threads")
    p.add_argument("--cache-dir", type=Path, default=Path(".cache/bench"))
    p.add_argument("--json", type=Path, default=Path("docs/opensearch/loads.json"))
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    quiet_client_loggers(logging.WARNING)
    from vsparta.bench.model_shaped import load_or_generate

    engines = [tuple(e.split("=", 1)) for e in args.engine]
    corpus = load_or_generate(args.profile, args.docs, args.cache_dir / "model-shaped")
    meta = {
        "machine": describe(),
        "command": "python -m bench.engine_loads " + " ".join(sys.argv[1:] if argv is None else argv),
    }
    rows = []
    for r in range(args.rounds):
        for name, spec in engines[r % len(engines) :] + engines[: r % len(engines)]:
            row = load_once(name, spec, corpus, args.hot_after) | {"round": r} | meta
            rows.append(row)
            log.info("round %d %s: %.0f docs/s, %d segments, merge %.1fs", r, name,
                     row["load_docs_per_s"], row["segments_loaded"], row["merge_s"])  # fmt: skip
            for line in row["hot_threads"]:
                log.info("    %s", line)
    old = json.loads(args.json.read_text()) if args.json.exists() else []
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps([*old, *rows], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
