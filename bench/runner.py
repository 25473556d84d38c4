"""One run: every engine on the same documents and queries, size after size; rows of raw numbers.

At each size an exact oracle (``exact.StreamingOracle``: chunked sparse products, float64,
memory bounded) scores every query first; each engine's top-10 is checked against it.
Before each build, the runner extrapolates the engine's build time and memory from the previous
size (linear in postings) and skips it, with the reason recorded, when that would exceed the
budget or the free memory: a skipped engine is always a row that says why, never a missing row.
"""

from __future__ import annotations

import gc
import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import psutil

from vsparta.bench import exact, measure
from vsparta.bench.corpus import Corpus, Query
from vsparta.bench.engines.base import Adapter, Skip, cpu_count
from vsparta.bench.invert import document_frequency

log = logging.getLogger(__name__)

MEMORY_HEADROOM = 0.7  # use at most this share of available RAM (the machine is shared)


@dataclass
class RunConfig:
    n_queries: int = 500
    k: int = 10
    build_budget_s: float = 600.0
    query_budget_s: float = 30.0
    threads: int = field(default_factory=cpu_count)
    workdir: Path = Path(".cache/bench/runs")
    interleave: bool = False  # build every engine of a size, then time them query by query in turn


@dataclass
class _History:
    n_postings: int
    build_s: float
    peak_bytes: int


def _free_bytes() -> int:
    return int(psutil.virtual_memory().available * MEMORY_HEADROOM)


def _refuse_early(adapter: Adapter, history: dict[str, _History], corpus: Corpus, cfg: RunConfig) -> None:
    """Skip (``Skip``) an engine whose earlier sizes say it will not build within its budget, or
    that says the disk cannot hold it."""
    budget = getattr(adapter, "build_budget_s", None) or cfg.build_budget_s
    reason = _skip_by_history(history.get(adapter.name), corpus, budget)
    if reason:
        raise Skip(reason)
    adapter.check(corpus, _free_bytes())


def _skip_by_history(hist: _History | None, corpus: Corpus, budget_s: float) -> str | None:
    if hist is None or hist.n_postings == 0:
        return None
    scale = corpus.nnz / hist.n_postings
    est_build = hist.build_s * scale
    if est_build > budget_s:
        return (
            f"build would take ~{est_build:.0f} s (extrapolated from {hist.build_s:.1f} s at "
            f"{hist.n_postings:,} postings), over the {budget_s:.0f} s budget"
        )
    est_mem = hist.peak_bytes * scale
    if est_mem > _free_bytes():
        free = _free_bytes() / 2**30
        return f"build would need ~{est_mem / 2**30:.1f} GiB (extrapolated), {free:.1f} GiB free"
    return None


def postings_touched(corpus: Corpus, queries: list[Query]) -> float:
    """Mean over queries of sum(df of its distinct terms) / N: how much of the index a query reads."""
    df = document_frequency(corpus)
    return float(np.mean([sum(int(df[t]) for t in q) for q in queries]) / max(corpus.n_docs, 1))


def build_engine(adapter: Adapter, corpus: Corpus, queries: list[Query], workdir: Path) -> dict:
    """Build (timed, memory-sampled) and hand the queries over; the row's build figures."""
    row: dict = {"engine": adapter.name, "kind": adapter.kind, "n_docs": corpus.n_docs, "nnz": corpus.nnz}
    workdir.mkdir(parents=True, exist_ok=True)
    with measure.RssPeak() as mem:
        t0 = time.perf_counter()
        adapter.build(corpus, workdir)
        row["build_s"] = time.perf_counter() - t0
        adapter.set_queries(queries)
    if adapter.in_process:
        row["peak_mem_bytes"] = mem.peak_delta
        row["resident_bytes"] = mem.resident_delta
    return row | getattr(adapter, "build_info", {})  # e.g. a server's load docs/s and merge time


def query_figures(
    adapter: Adapter, corpus: Corpus, timing: measure.Timing, cfg: RunConfig, oracle: exact.StreamingOracle
) -> dict:
    """The row's query figures from a single-query pass, then the parallel pass, agreement, size."""
    row: dict = {"qps_1": timing.qps_1, "p50_ms": timing.p50_ms, "p99_ms": timing.p99_ms}
    row["n_queries"] = timing.n_queries
    qis = list(range(len(adapter.queries)))
    if cfg.threads > 1:
        par_qis = qis[: max(cfg.threads * 4, int(timing.qps_1 * cfg.threads * min(cfg.query_budget_s, 10)))]
        row["qps_all"] = measure.time_parallel(adapter, par_qis, cfg.k, cfg.threads)
    else:
        row["qps_all"] = timing.qps_1
    if adapter.sparse:
        agree = [oracle.agreement(qi, res) for qi, res in enumerate(timing.results)]
        row["agreement"] = float(np.mean(agree))
    disk = adapter.disk_bytes()
    if disk is not None:
        row["index_bytes"] = disk
        row["bytes_per_image"] = disk / corpus.n_docs
        if adapter.sparse:
            row["bytes_per_term"] = disk / max(corpus.nnz, 1)
    return row


def measure_engine(
    adapter: Adapter,
    corpus: Corpus,
    queries: list[Query],
    cfg: RunConfig,
    workdir: Path,
    oracle: exact.StreamingOracle,
) -> dict:
    """Build, then time queries; returns one row of raw numbers."""
    row = build_engine(adapter, corpus, queries, workdir)
    timing = measure.time_single(adapter, list(range(len(queries))), cfg.k, cfg.query_budget_s)
    return row | query_figures(adapter, corpus, timing, cfg, oracle)


def run_sizes(
    corpora: list[tuple[str, Callable[[], Corpus]]],
    make_queries: Callable[[Corpus], list[Query]],
    make_adapters: Callable[[], list[Adapter]],
    cfg: RunConfig,
    on_row: Callable[[dict], None] = lambda r: None,
) -> list[dict]:
    """Measure every adapter at every size; ``corpora`` are (label, loader) pairs, smallest first."""
    rows: list[dict] = []
    history: dict[str, _History] = {}
    for label, load in corpora:
        corpus = load()
        queries = make_queries(corpus)
        touched = postings_touched(corpus, queries)
        log.info(
            "size %s: %d images, %d postings, a query touches %.2f x N postings",
            label,
            corpus.n_docs,
            corpus.nnz,
            touched,
        )
        workdir = cfg.workdir / f"n-{corpus.n_docs}"
        shutil.rmtree(workdir, ignore_errors=True)
        t0 = time.perf_counter()
        oracle = exact.StreamingOracle(corpus, queries, cfg.k)
        log.info("  exact oracle for %d queries in %.1f s", len(queries), time.perf_counter() - t0)
        base = {"n_docs": corpus.n_docs, "size": label, "postings_touched_per_query": touched}
        adapters = make_adapters()
        if cfg.interleave:
            for row in _interleaved(adapters, corpus, queries, cfg, workdir, oracle, base, history):
                rows.append(_emit(on_row, row))
            adapters = []
        for adapter in adapters:
            row_base = {
                "engine": adapter.name,
                "kind": adapter.kind,
                "n_docs": corpus.n_docs,
                "size": label,
                "postings_touched_per_query": touched,
            }
            followers = getattr(adapter, "followers", [])
            try:
                _refuse_early(adapter, history, corpus, cfg)
                log.info("  %s ...", adapter.name)
                row = row_base | measure_engine(
                    adapter,
                    corpus,
                    queries,
                    cfg,
                    workdir / _slug(adapter.name),
                    oracle,
                )
                history[adapter.name] = _History(corpus.nnz, row["build_s"], row.get("peak_mem_bytes", 0))
            except Skip as e:
                row = row_base | {"skipped": str(e)}
                log.warning("  %s skipped at %s: %s", adapter.name, label, e)
                follower_skip = f"backend skipped: {e}"
            except Exception as e:  # noqa: BLE001 - one broken engine must not sink the whole run
                log.exception("  %s failed at %s", adapter.name, label)
                row = row_base | {"skipped": f"failed: {type(e).__name__}: {e}"}
                follower_skip = "backend failed"
            else:
                follower_skip = None
            rows.append(_emit(on_row, row))
            for f in followers:
                if follower_skip is not None:
                    rows.append(
                        _emit(
                            on_row,
                            {
                                "engine": f.name,
                                "kind": f.kind,
                                "n_docs": corpus.n_docs,
                                "size": label,
                                "skipped": follower_skip,
                            },
                        )
                    )
                    continue
                frow = {
                    "engine": f.name,
                    "kind": f.kind,
                    "n_docs": corpus.n_docs,
                    "size": label,
                    "postings_touched_per_query": touched,
                }
                try:
                    f.check(corpus, _free_bytes())
                    log.info("  %s ...", f.name)
                    frow |= measure_engine(f, corpus, queries, cfg, workdir / _slug(f.name), oracle)
                except Skip as e:
                    frow["skipped"] = str(e)
                except Exception as e:  # noqa: BLE001
                    log.exception("  %s failed at %s", f.name, label)
                    frow["skipped"] = f"failed: {type(e).__name__}: {e}"
                finally:
                    _close(f)
                rows.append(_emit(on_row, frow))
            _close(adapter)
            gc.collect()
        del oracle
        del corpus
        gc.collect()
        shutil.rmtree(workdir, ignore_errors=True)
    return rows


def _interleaved(
    adapters: list[Adapter],
    corpus: Corpus,
    queries: list[Query],
    cfg: RunConfig,
    workdir: Path,
    oracle: exact.StreamingOracle,
    base: dict,
    history: dict[str, _History],
) -> list[dict]:
    """One size with ``cfg.interleave``: each engine (and its followers) built in turn, one load
    at a time; then all timed together (``measure.time_interleaved``), so that the shared
    machine's bursts of load fall on every engine alike; then each one's remaining figures."""
    slots: list[tuple[Adapter | None, dict]] = []  # row order: each backend, then its followers
    built: list[Adapter] = []
    for adapter in adapters:
        group = [adapter, *getattr(adapter, "followers", [])]
        for n, a in enumerate(group):
            row = {"engine": a.name, "kind": a.kind} | base
            if n and (not slots or slots[-n][0] is None):
                slots.append((None, row | {"skipped": "backend skipped or failed"}))
                continue
            try:
                _refuse_early(a, history, corpus, cfg)
                log.info("  %s: building ...", a.name)
                row |= build_engine(a, corpus, queries, workdir / _slug(a.name))
                history[a.name] = _History(corpus.nnz, row["build_s"], row.get("peak_mem_bytes", 0))
                built.append(a)
                slots.append((a, row))
            except Skip as e:
                log.warning("  %s skipped at %s: %s", a.name, base["size"], e)
                slots.append((None, row | {"skipped": str(e)}))
            except Exception as e:  # noqa: BLE001 - one broken engine must not sink the whole run
                log.exception("  %s failed at %s", a.name, base["size"])
                slots.append((None, row | {"skipped": f"failed: {type(e).__name__}: {e}"}))
    try:
        log.info("  timing %s query by query, in turn", ", ".join(a.name for a in built))
        qis = list(range(len(queries)))
        timed = measure.time_interleaved(built, qis, cfg.k, cfg.query_budget_s) if built else []
        timings = dict(zip(built, timed, strict=True))
        for a, row in slots:
            if a is None:
                continue
            try:
                row |= query_figures(a, corpus, timings[a], cfg, oracle)
            except Exception as e:  # noqa: BLE001
                log.exception("  %s failed at %s", a.name, base["size"])
                row["skipped"] = f"failed: {type(e).__name__}: {e}"
    finally:
        for a in reversed(adapters):
            for f in getattr(a, "followers", []):
                _close(f)
            _close(a)
        gc.collect()
    return [row for _, row in slots]


def _close(adapter: Adapter) -> None:
    """Close without letting a cleanup failure end the run (it is logged: e.g. an ES index left over)."""
    try:
        adapter.close()
    except Exception:  # noqa: BLE001
        log.exception("closing %s failed", adapter.name)


def _emit(on_row: Callable[[dict], None], row: dict) -> dict:
    on_row(row)
    return row


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-")[:60]
