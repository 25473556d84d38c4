"""The embedded engine of two or more source trees on one corpus, timed query by query in turn.

Why: a change to the engine's layout or kernels is judged against the code before it, on the
same documents and queries, in the same run (this machine is shared: absolute times move between
runs, ratios much less). Each tree runs in its own worker process (its ``vsparta`` package is the
tree itself, through a symlink), builds one compacted index from the corpus's arrays, then
answers every query once per round when the parent asks; rounds rotate the trees' order. The
parent reports p50/p99 wall time and CPU time per query, index bytes per image, and whether each
tree returned the same top-10 (ids and scores) as the first.

    git worktree add /tmp/before HEAD~1     # or: git archive REV | tar -x -C /tmp/before
    python -m bench.embedded_trees --tree before=/tmp/before --tree after=. \\
        --profile docs/model-profile-objects-16k.npz --captions DATA/test.jsonl --model RUN/best \\
        --docs 1000000 --out-dir docs/objects-engines/layout-1m
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np


def _worker(
    tree: str, corpus_dir: str, n_docs: str, vocab_size: str, queries_path: str, index_dir: str
) -> None:
    """Build (or reopen) ``tree``'s index of the corpus's first ``n_docs`` images, then answer one
    round of queries per line of stdin."""
    root = Path(index_dir + "-import")  # holds one symlink, vsparta -> the tree, beside the index
    root.mkdir(parents=True, exist_ok=True)
    link = root / "vsparta"
    if link.is_symlink():
        link.unlink()
    link.symlink_to(Path(tree).resolve())
    sys.path.insert(0, str(root))
    from vsparta.termindex.embedded.index import EmbeddedIndex  # noqa: PLC0415 (the tree's own)

    path = Path(index_dir)
    t0 = time.perf_counter()
    if not (path / "built").exists():
        indptr = np.load(Path(corpus_dir) / "indptr.npy", mmap_mode="r")
        indices = np.load(Path(corpus_dir) / "indices.npy", mmap_mode="r")
        weights = np.load(Path(corpus_dir) / "weights.npy", mmap_mode="r")
        n = int(n_docs)
        index = EmbeddedIndex(path, create=True, vocab_size=int(vocab_size))
        for s in range(0, n, 20_000):
            e = min(n, s + 20_000)
            a, b = int(indptr[s]), int(indptr[e])
            index.upsert_arrays(
                [f"img{i:07d}" for i in range(s, e)], np.asarray(indptr[s : e + 1]) - a,
                np.asarray(indices[a:b]), np.asarray(weights[a:b]),
            )  # fmt: skip
        index.compact()
        index.close()
        (path / "built").touch()
    build_s = time.perf_counter() - t0
    index = EmbeddedIndex(path)
    queries = [{int(t): float(w) for t, w in q} for q in json.loads(Path(queries_path).read_text())]
    for q in queries[: min(50, len(queries))]:  # compile and warm the pages
        index.search(q, k=10)
    disk = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    print(json.dumps({"ready": True, "build_s": build_s, "bytes": disk, "docs": index.count()}), flush=True)
    for _ in sys.stdin:
        wall, cpu, digest = [], [], hashlib.sha1()
        for q in queries:
            w0, c0 = time.perf_counter_ns(), time.thread_time_ns()
            hits = index.search(q, k=10)
            cpu.append((time.thread_time_ns() - c0) / 1e6)
            wall.append((time.perf_counter_ns() - w0) / 1e6)
            digest.update(repr([(h.id, h.score) for h in hits]).encode())
        print(json.dumps({"wall_ms": wall, "cpu_ms": cpu, "top10": digest.hexdigest()}), flush=True)


def _engine_digest(tree: Path) -> str:
    """Hash of the tree's engine sources: an index built by other code is never reused."""
    h = hashlib.sha1()
    for f in sorted((tree / "termindex" / "embedded").glob("*.py")):
        h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()[:10]


def _queries(args: argparse.Namespace) -> list[dict[int, float]]:
    from vsparta.bench.termdocs import queries_from_captions
    from vsparta.model.query_tokenizer import QueryTokenizer

    tok = QueryTokenizer.from_pretrained(args.model)
    return queries_from_captions(args.captions, tok.query_weights, args.queries, seed=args.seed)


def _answer(proc: subprocess.Popen, name: str) -> dict:
    """The worker's next JSON line; a worker that died (its traceback is on stderr above) ends the
    run with one sentence instead of a JSON error."""
    line = proc.stdout.readline()
    if not line:
        raise SystemExit(f"embedded_trees: the worker for tree {name!r} exited with code {proc.wait()}")
    return json.loads(line)


def _summary(name: str, info: dict, rounds: list[dict]) -> dict:
    wall = np.concatenate([r["wall_ms"] for r in rounds])
    cpu = np.concatenate([r["cpu_ms"] for r in rounds])
    return {
        "tree": name,
        "p50_ms": float(np.median(wall)),
        "p99_ms": float(np.percentile(wall, 99)),
        "mean_ms": float(wall.mean()),
        "cpu_p50_ms": float(np.median(cpu)),
        "bytes_per_image": info["bytes"] / info["docs"],
        "build_s": info["build_s"],
        "top10": rounds[0]["top10"],
    }


def _table(rows: list[dict]) -> str:
    base = rows[0]
    lines = [
        "| tree | p50 ms | p99 ms | mean ms | CPU p50 ms | x first (p50) | B/image | same top-10 as first |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['tree']} | {r['p50_ms']:.3f} | {r['p99_ms']:.1f} | {r['mean_ms']:.3f} "
            f"| {r['cpu_p50_ms']:.3f} | {r['p50_ms'] / base['p50_ms']:.2f} | {r['bytes_per_image']:.0f} | "
            f"{'yes' if r['top10'] == base['top10'] else 'NO'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--tree", action="append", required=True, help="NAME=PATH of a source tree (first = reference)"
    )
    p.add_argument("--profile", type=Path, required=True, help="a model profile (bench.model_shaped)")
    p.add_argument("--captions", type=Path, required=True, help="a manifest whose captions are the queries")
    p.add_argument("--model", required=True, help="model folder whose tokenizer made the profile")
    p.add_argument("--docs", type=int, default=1_000_000)
    p.add_argument("--queries", type=int, default=300)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workdir", type=Path, default=Path("/var/tmp/vsparta-embedded-trees"))
    p.add_argument("--out-dir", type=Path, help="write embedded-trees.{json,md} here")
    args = p.parse_args(argv)
    trees = [t.split("=", 1) for t in args.tree]
    for name, path in trees:
        if not (Path(path) / "termindex" / "embedded").is_dir():
            p.error(f"--tree {name}={path}: no termindex/embedded folder there")

    from vsparta.bench.model_shaped import load_or_generate

    corpus = load_or_generate(args.profile, args.docs, args.workdir / "cache", seed=args.seed)
    corpus_dir = Path(corpus.indices.filename).parent  # memory-mapped .npy files; a head reads a prefix
    queries = _queries(args)
    qfile = args.workdir / f"queries-{args.docs}.json"
    qfile.write_text(json.dumps([sorted(q.items()) for q in queries]))

    workers, infos = {}, {}
    for name, path in trees:  # one build at a time
        index_dir = args.workdir / f"index-{name}-{_engine_digest(Path(path))}-{args.docs}"
        cmd = [
            sys.executable, __file__, "--worker", path, str(corpus_dir), str(args.docs),
            str(corpus.vocab_size), str(qfile), str(index_dir),
        ]  # fmt: skip
        env = dict(os.environ, NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1")
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        workers[name] = proc
        infos[name] = _answer(proc, name)
        print(f"{name}: ready ({infos[name]['docs']:,} images, {infos[name]['build_s']:.0f} s)", flush=True)
    results: dict[str, list[dict]] = {name: [] for name, _ in trees}
    names = [name for name, _ in trees]
    for r in range(args.rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            workers[name].stdin.write("run\n")
            workers[name].stdin.flush()
            results[name].append(_answer(workers[name], name))
    for proc in workers.values():
        proc.stdin.close()
        proc.wait()
    rows = [_summary(name, infos[name], results[name]) for name in names]
    table = _table(rows)
    print(table)
    if args.out_dir:
        args.out_dir.mkdir(parents=True, exist_ok=True)
        load = os.getloadavg()
        header = (
            f"# The embedded engine, tree against tree\n\nCommand: `python -m bench.embedded_trees "
            f"{' '.join(sys.argv[1:] if argv is None else argv)}`\n\n{corpus.n_docs:,} images sampled from "
            f"{args.profile}; {len(queries)} caption queries from {args.captions}, each asked once per "
            f"round, {args.rounds} rounds in rotating tree order, one thread; load average at the end "
            f"{load[0]:.1f}.\n\n"
        )
        (args.out_dir / "embedded-trees.md").write_text(header + table + "\n")
        (args.out_dir / "embedded-trees.json").write_text(
            json.dumps({"rows": rows, "args": vars(args)}, default=str, indent=1)
        )
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        _worker(*sys.argv[2:8])
    else:
        sys.exit(main())
