"""The indexing job's summary: what it did and which stage the time went to.

Kept apart from the runner because benchmarks and the CLI read it too, and its arithmetic (solo
rates, busy shares, no NaN when a stage did nothing) is a rule of its own with its own tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class IndexSummary:
    """What the job did and where the time went; logged at the end and returned to callers.

    Solo rates are items per second of a stage's own busy time (decode: per worker process);
    busy shares are that time over the job's wall time (decode: over workers x wall time), so
    the stage near 100% is the bottleneck. Figures with nothing measured are None, never NaN.
    """

    total: int = 0  # items of this shard listed (all of them unless the job stopped early)
    listing_complete: bool = True  # False when the job stopped before the folder walk ended
    indexed: int = 0
    skipped: int = 0
    changed: int = 0  # --resume: held, but their file changed since; written again (in indexed)
    removed: int = 0  # --prune: documents whose id the input no longer lists, deleted
    failed: int = 0
    failures_by_reason: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    decoded: int = 0
    decode_seconds: float = 0.0  # summed over worker processes
    decode_workers: int = 0
    encoded: int = 0
    encode_seconds: float = 0.0
    write_seconds: float = 0.0
    commits: int = 0
    device_busy_seconds: float | None = None  # CUDA events; None on CPU
    gpu_decode_seconds: float | None = None  # main-thread time of nvJPEG batches; None without
    decoded_chunks_ready: float | None = None  # mean, when the encoder asked for the next chunk
    writer_backlog: float | None = None  # mean batches waiting for the writer
    interrupted_by: str | None = None
    engine_notes: list[str] = field(default_factory=list)  # e.g. the force-merge after a full load

    @staticmethod
    def _rate(n: int, seconds: float) -> float | None:
        return n / seconds if n and seconds > 0 else None

    def _share(self, seconds: float | None, lanes: int = 1) -> float | None:
        if seconds is None or self.seconds <= 0:
            return None
        return seconds / (self.seconds * max(1, lanes))

    @property
    def images_per_second(self) -> float | None:
        return self._rate(self.indexed + self.failed, self.seconds)

    def stage_rates(self) -> dict[str, float | None]:
        """Items per second of each stage alone (decode: per worker process)."""
        return {
            "decode": self._rate(self.decoded, self.decode_seconds),
            "encode": self._rate(self.encoded, self.encode_seconds),
            "write": self._rate(self.indexed, self.write_seconds),
        }

    def busy_shares(self) -> dict[str, float | None]:
        """Share of the wall time each stage was working (decode: of all workers' time)."""
        return {
            "decode": self._share(self.decode_seconds, self.decode_workers) if self.decoded else None,
            "encode": self._share(self.encode_seconds) if self.encoded else None,
            "write": self._share(self.write_seconds) if self.indexed else None,
            "gpu": self._share(self.device_busy_seconds),
        }

    def figures(self) -> dict[str, object]:
        """Everything as one JSON-ready mapping (benchmarks write it)."""
        return {
            "images_per_s": self.images_per_second,
            "stage_rates": self.stage_rates(),
            "busy_shares": self.busy_shares(),
            "decoded_chunks_ready": self.decoded_chunks_ready,
            "writer_backlog": self.writer_backlog,
            "commits": self.commits,
            "decode_workers": self.decode_workers,
            "gpu_decode_seconds": self.gpu_decode_seconds,
            "seconds": self.seconds,
            "indexed": self.indexed,
            "failed": self.failed,
            "skipped": self.skipped,
            "changed": self.changed,
            "removed": self.removed,
        }

    def lines(self) -> list[str]:
        rate = self.images_per_second
        out = [
            f"indexed {self.indexed}, skipped (resume) {self.skipped}, failed {self.failed}"
            f" of {self.total}{'' if self.listing_complete else ' listed so far'} in {self.seconds:.1f}s"
            + (f" ({rate:.1f} images/s)" if rate is not None else "")
        ]
        if self.changed:
            out.append(f"of those indexed, {self.changed} written again: their file changed since")
        if self.removed:
            out.append(f"removed {self.removed} document(s) the input no longer lists (--prune)")
        shares = self.busy_shares()
        stages = []
        for name, value in self.stage_rates().items():
            if value is None:
                continue
            per = (
                f"/s per worker x{self.decode_workers}" if name == "decode" and self.decode_workers else "/s"
            )
            share = shares[name]
            stages.append(f"{name} {value:.1f}{per}" + (f" (busy {share:.0%})" if share is not None else ""))
        if stages:
            out.append("per stage, alone: " + ", ".join(stages))
        waits = []
        if self.decoded_chunks_ready is not None:
            waits.append(f"decoded chunks ready {self.decoded_chunks_ready:.1f}")
        if self.writer_backlog is not None:
            waits.append(f"writer backlog {self.writer_backlog:.1f} batches")
        if shares["gpu"] is not None:
            waits.append(f"GPU busy {shares['gpu']:.0%}")
        if self.gpu_decode_seconds is not None:
            waits.append(f"GPU JPEG decode {self.gpu_decode_seconds:.1f}s (main thread)")
        if waits:
            out.append("queues: " + ", ".join(waits))
        if self.failures_by_reason:
            reasons = ", ".join(f"{k} {v}" for k, v in sorted(self.failures_by_reason.items()))
            out.append(f"failures: {reasons}")
        if self.interrupted_by:
            out.append(f"interrupted by {self.interrupted_by}: rerun with --resume to finish")
        out.extend(f"engine: {note}" for note in self.engine_notes)
        return out
