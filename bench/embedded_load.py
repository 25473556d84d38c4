"""Write amplification and load time of the embedded engine under its merge policies.

Two parts, both printed and written to ``docs/embedded-load.{json,md}``:

- a simulation (``vsparta.termindex.embedded.policy.simulate``: the code the engine decides with) of
  loading N documents in commits of 256 under the previous policy (past 8 segments, merge the
  smallest n - 4) and the tiered one, with and without ``bulk_load``'s final merge;
- a real load through ``upsert_arrays`` (the indexer's path) in commits of 256 under each
  policy, timed, with the engine's own byte counters (``stats()["write_amplification"]``).

    vsparta bench embedded-load --docs 200000 --terms 300
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vsparta.bench import hardware
from vsparta.bench.embedded_quick import _sample_documents, zipf_cdf
from vsparta.termindex.embedded.index import EmbeddedIndex
from vsparta.termindex.embedded.policy import MergePolicy, TieredMergePolicy, simulate

log = logging.getLogger(__name__)

SIM_SIZES = (51_200, 1_000_000, 4_000_000)


@dataclass(frozen=True)
class LegacyMergePolicy:
    """The policy before the tiered one, kept only to measure against: past ``max_segments``,
    merge the smallest ``n - max_segments // 2`` (rewrites the big segments again and again)."""

    max_segments: int = 8

    def plan(self, sizes: Sequence[int]) -> list[int]:
        if len(sizes) <= self.max_segments:
            return []
        n = len(sizes) - self.max_segments // 2
        return sorted(sorted(range(len(sizes)), key=lambda i: sizes[i])[:n])


POLICIES: dict[str, tuple[MergePolicy, bool]] = {
    "previous (8 segments, merge smallest n-4)": (LegacyMergePolicy(), False),
    "tiered (factor 10)": (TieredMergePolicy(), False),
    "tiered + bulk_load final merge": (TieredMergePolicy(), True),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--docs", type=int, default=200_000, help="documents in the real load")
    parser.add_argument("--terms", type=int, default=300, help="distinct terms per document")
    parser.add_argument("--commit", type=int, default=256, help="documents per upsert (the indexer's)")
    parser.add_argument("--vocab", type=int, default=30_522, help="term ids of the generated documents")
    parser.add_argument(
        "--policies",
        default="all",
        help="real loads to run: 'all', 'none' (simulation only) or a comma list of: previous,tiered,bulk",
    )
    parser.add_argument("--work-dir", type=Path, default=None, help="where indexes are built (default: tmp)")
    parser.add_argument("--out-dir", type=Path, default=Path("docs"), help="where the report is written")
    parser.add_argument("--no-write", action="store_true", help="print only")


def _simulations(commit: int) -> list[dict]:
    rows = []
    for n in SIM_SIZES:
        for name, (policy, bulk) in POLICIES.items():
            sim = simulate(n, commit, policy, bulk=bulk)
            rows.append(
                {
                    "documents": n,
                    "policy": name,
                    "write_amplification": round(sim.write_amplification, 2),
                    "merges": sim.merges,
                    "max_segments": sim.max_segments_seen,
                    "segments_after": len(sim.final_sizes),
                }
            )
    return rows


def _real_load(name: str, args: argparse.Namespace, root: Path) -> dict:
    policy, bulk = POLICIES[name]
    path = root / "idx"
    shutil.rmtree(path, ignore_errors=True)
    index = EmbeddedIndex(path, create=True, vocab_size=args.vocab, merge_policy=policy)
    cdf, _ = zipf_cdf(args.vocab, 1.0, 0)
    rng = np.random.default_rng(0)
    seconds = 0.0
    cpu0 = time.process_time()  # beside wall time: this machine is shared, CPU time is steadier
    with index.bulk_load() if bulk else contextlib.nullcontext():
        for start in range(0, args.docs, args.commit):
            stop = min(start + args.commit, args.docs)
            indptr, terms = _sample_documents(stop - start, args.terms, cdf, start + 1)
            weights = rng.lognormal(0.0, 0.6, size=len(terms)) * 0.5
            ids = [f"img{i:08d}" for i in range(start, stop)]
            t0 = time.perf_counter()
            index.upsert_arrays(ids, indptr, terms, weights)
            seconds += time.perf_counter() - t0
        t0 = time.perf_counter()
    seconds += time.perf_counter() - t0  # bulk_load's final merge
    cpu = time.process_time() - cpu0  # includes generating the documents (same for every policy)
    stats = index.stats()
    index.close()
    shutil.rmtree(path, ignore_errors=True)
    sim = simulate(args.docs, args.commit, policy, bulk=bulk)
    return {
        "policy": name,
        "documents": stats["documents"],
        "seconds": round(seconds, 1),
        "cpu_seconds_incl_generation": round(cpu, 1),
        "docs_per_s": round(stats["documents"] / seconds),
        "write_amplification": round(stats["write_amplification"], 2),
        "doc_write_amplification": round(stats["doc_write_amplification"], 2),
        "simulated_doc_write_amplification": round(sim.write_amplification, 2),
        "bytes_written": stats["bytes_written"],
        "bytes_ingested": stats["bytes_ingested"],
        "segments_after": stats["segments"],
    }


def _markdown(report: dict) -> str:
    lines = [
        "# Embedded engine: write amplification of the merge policies",
        "",
        f"Command: `{report['command']}`  ",
        f"Machine: {hardware.one_line(report['machine'])}",
        "",
        f"## Simulation (commits of {report['commit']} documents; amplification in documents written per "
        "document loaded)",
        "",
        "| documents | policy | write amplification | merges | most segments | segments after |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for r in report["simulation"]:
        lines.append(
            f"| {r['documents']:,} | {r['policy']} | {r['write_amplification']}x | {r['merges']} | "
            f"{r['max_segments']} | {r['segments_after']} |"
        )
    if report["real"]:
        lines += [
            "",
            f"## Real load: {report['docs']:,} documents x {report['terms']} terms, `upsert_arrays` in "
            f"commits of {report['commit']}",
            "",
            "| policy | seconds (wall, writes only) | CPU s (incl. generation) | documents/s | "
            "write amplification (bytes) | (documents) | simulated | segments after |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in report["real"]:
            lines.append(
                f"| {r['policy']} | {r['seconds']} | {r['cpu_seconds_incl_generation']} | "
                f"{r['docs_per_s']:,} | "
                f"{r['write_amplification']}x | "
                f"{r['doc_write_amplification']}x | {r['simulated_doc_write_amplification']}x | "
                f"{r['segments_after']} |"
            )
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    from vsparta.bench.options import command_line

    keys = {"previous": 0, "tiered": 1, "bulk": 2}
    names = list(POLICIES)
    if args.policies == "all":
        chosen = names
    elif args.policies == "none":
        chosen = []
    else:
        try:
            chosen = [names[keys[p.strip()]] for p in args.policies.split(",") if p.strip()]
        except KeyError as e:
            log.error("unknown policy %s: choose from previous, tiered, bulk", e)
            return 2
    report = {
        "command": command_line("embedded-load"),
        "machine": hardware.describe(),
        "commit": args.commit,
        "docs": args.docs,
        "terms": args.terms,
        "simulation": _simulations(args.commit),
        "real": [],
    }
    with tempfile.TemporaryDirectory(dir=args.work_dir) as tmp:
        for name in chosen:
            log.info("loading %d documents: %s", args.docs, name)
            report["real"].append(_real_load(name, args, Path(tmp)))
    text = _markdown(report)
    print(text)
    if not args.no_write:
        args.out_dir.mkdir(parents=True, exist_ok=True)
        (args.out_dir / "embedded-load.json").write_text(json.dumps(report, indent=1) + "\n")
        (args.out_dir / "embedded-load.md").write_text(text)
    return 0
