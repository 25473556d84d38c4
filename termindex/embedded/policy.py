"""When the embedded engine merges segments: a tiered policy, and a simulation of it.

Every commit adds a segment; merging keeps the count (and so the per-query cost) bounded.
The previous rule (past 8 segments, merge the smallest n - 4) rewrote the big segments on
almost every merge: write amplification grew linearly with the index (6.3x at 51K documents,
99x simulated at 1M). The tiered rule, as in Lucene's ``TieredMergePolicy``, groups segments by
size into tiers a factor ``F`` apart (tier = floor(log_F(live documents))) and merges a tier
once it holds ``F`` segments, so the result lands in a higher tier and a document is rewritten
at most once per tier: write amplification <= 1 + log_F(N), and at most ``F - 1`` segments per
tier stay (about ``(F - 1) * log_F(N)`` segments in all).

The engine and ``simulate`` call the same ``plan`` methods, so the simulation predicts the
engine's merges exactly (the tests check that) and can be run at sizes too big to load here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

MERGE_FACTOR = 10


class MergePolicy(Protocol):
    """Chooses segments to merge from their live document counts (manifest order)."""

    def plan(self, sizes: Sequence[int]) -> list[int]:
        """Indices of the segments to merge now (ascending), or [] for none."""
        ...


def tier(size: int, factor: int) -> int:
    """floor(log_factor(size)) in integers (0 for sizes below ``factor``): no float rounding."""
    t = 0
    while size >= factor:
        size //= factor
        t += 1
    return t


@dataclass(frozen=True)
class TieredMergePolicy:
    """Merge the lowest tier holding ``factor`` segments; ``max_segments`` (optional) is a hard
    cap on top of that, merging the smallest segments, for tests and tiny indexes only: a low
    cap brings back the quadratic rewrites the tiers avoid."""

    factor: int = MERGE_FACTOR
    max_segments: int | None = None

    def __post_init__(self) -> None:
        if self.factor < 2:
            raise ValueError(f"merge factor must be >= 2, got {self.factor}")
        if self.max_segments is not None and self.max_segments < 1:
            raise ValueError(f"max_segments must be >= 1, got {self.max_segments}")

    def plan(self, sizes: Sequence[int]) -> list[int]:
        tiers: dict[int, list[int]] = {}
        for i, size in enumerate(sizes):
            tiers.setdefault(tier(size, self.factor), []).append(i)
        for t in sorted(tiers):
            if len(tiers[t]) >= self.factor:
                return tiers[t]
        if self.max_segments is not None and len(sizes) > self.max_segments:
            n = len(sizes) - self.max_segments + 1
            return sorted(sorted(range(len(sizes)), key=lambda i: (sizes[i], i))[:n])
        return []


def live_sizes(manifest: dict[str, Any]) -> list[int]:
    """Live documents of each segment, in manifest order: what merge policies decide on."""
    return [int(s["n_docs"]) - int(s.get("n_deleted", 0)) for s in manifest["segments"]]


def plan_final_merge(sizes: Sequence[int], loaded: int) -> list[int]:
    """At the end of a bulk load: merge every segment no bigger than what the load wrote.

    A full load ends as one segment (fastest searches); a small load into a big index merges
    only the small segments it made, never rewriting the big ones.
    """
    chosen = [i for i, size in enumerate(sizes) if size <= loaded]
    return chosen if len(chosen) > 1 else []


@dataclass
class Simulation:
    """What loading ``documents`` in commits of ``commit`` writes under a policy (in documents)."""

    documents: int
    commit: int
    docs_written: int = 0
    merges: int = 0
    max_segments_seen: int = 0
    final_sizes: list[int] = field(default_factory=list)

    @property
    def write_amplification(self) -> float:
        return self.docs_written / self.documents if self.documents else float("nan")


def settle(sizes: list[int], policy: MergePolicy, sim: Simulation | None = None) -> list[int]:
    """Apply ``policy`` until it asks for nothing; merged segments go last, as in the engine."""
    while len(chosen := policy.plan(sizes)) > 1:
        merged = sum(sizes[i] for i in chosen)
        picked = set(chosen)
        sizes = [s for i, s in enumerate(sizes) if i not in picked] + [merged]
        if sim is not None:
            sim.docs_written += merged
            sim.merges += 1
    return sizes


def simulate(documents: int, commit: int, policy: MergePolicy, *, bulk: bool = False) -> Simulation:
    """Load ``documents`` new ids in commits of ``commit`` (``bulk``: inside ``bulk_load``, which
    ends with ``plan_final_merge``)."""
    sim = Simulation(documents, commit)
    sizes: list[int] = []
    done = 0
    while done < documents:
        n = min(commit, documents - done)
        done += n
        sizes.append(n)
        sim.docs_written += n
        sim.max_segments_seen = max(sim.max_segments_seen, len(sizes))
        sizes = settle(sizes, policy, sim)
    if bulk:
        final = plan_final_merge(sizes, documents)
        if final:
            merged = sum(sizes[i] for i in final)
            sizes = [s for i, s in enumerate(sizes) if i not in set(final)] + [merged]
            sim.docs_written += merged
            sim.merges += 1
    sim.final_sizes = sizes
    return sim
