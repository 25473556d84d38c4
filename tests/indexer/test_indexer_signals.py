"""Clean stop on SIGTERM/SIGINT, in process: the batch being encoded is finished and written,
nothing half-done is left behind, and --resume completes the job to the same documents."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pytest

from vsparta.indexer.runner import IndexConfig, run_index
from vsparta.model.config_parts import DEFAULT_TOP_N


class SignalDuringEncode:
    """Wraps the colour encoder; sends ``signum`` to this process during the ``at``-th batch."""

    def __init__(self, inner, signum: int, at: int) -> None:
        self.inner, self.signum, self.at = inner, signum, at
        self.preprocessor = inner.preprocessor
        self.id_to_token = inner.id_to_token
        self.calls = 0

    device_busy_seconds = None

    def start_pixels(self, batch: np.ndarray, top_n: int | None = DEFAULT_TOP_N):
        self.calls += 1
        if self.calls == self.at:
            os.kill(os.getpid(), self.signum)
        return self.inner.start_pixels(batch, top_n)

    def finish(self, pending):
        return self.inner.finish(pending)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_finishes_the_current_batch_and_resume_completes(
    image_folder: Path, tmp_path: Path, colour_encoder, read_export, signum: int
) -> None:
    def config(out: Path, **kw) -> IndexConfig:
        return IndexConfig(
            input=image_folder,
            export_jsonl=out,
            workers=0,
            batch_size=3,
            progress=False,
            max_pixels=200_000,
            **kw,
        )

    full = tmp_path / "full"
    run_index(config(full), encoder=colour_encoder)
    before = signal.getsignal(signum)  # SIG_IGN when the suite runs as a background job
    out = tmp_path / "out"
    stopped = run_index(config(out), encoder=SignalDuringEncode(colour_encoder, signum, at=2))
    assert stopped.interrupted_by == signal.Signals(signum).name
    assert stopped.indexed == 6  # batches 1 and 2 (the one being encoded) written, nothing after
    partial = read_export(out)
    assert len(partial) == 6
    assert signal.getsignal(signum) == before  # the handler in place before the run is restored
    resumed = run_index(config(out, resume=True), encoder=colour_encoder)
    assert resumed.skipped == 6 and resumed.indexed == 6 and resumed.interrupted_by is None
    assert read_export(out) == read_export(full)
