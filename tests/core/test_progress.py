"""core/progress.py: a bar on a terminal, one plain line per interval in a log, nothing when off."""

from __future__ import annotations

import io

from vsparta.core.progress import progress_bar


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_redirected_stream_gets_plain_lines_without_carriage_returns() -> None:
    log = io.StringIO()
    bar = progress_bar(range(5), total=5, desc="scenes", unit="img", stream=log, log_interval=0.0)
    assert list(bar) == [0, 1, 2, 3, 4]
    bar.close()
    text = log.getvalue()
    assert "\r" not in text
    lines = text.splitlines()
    assert [ln.split(" [")[0] for ln in lines] == [f"scenes: {i}/5 img" for i in range(6)]  # no repeat


def test_a_redirected_stream_is_written_once_per_interval() -> None:
    log = io.StringIO()
    bar = progress_bar(total=1000, desc="index", stream=log, log_interval=3600.0)
    for _ in range(1000):
        bar.update(1)
    bar.close()
    assert [ln.split(" [")[0] for ln in log.getvalue().splitlines()] == [
        "index: 0/1000 it",
        "index: 1000/1000 it",
    ]


def test_disabled_writes_nothing_but_still_counts() -> None:
    log = io.StringIO()
    bar = progress_bar(range(3), total=3, stream=log, enabled=False)
    assert list(bar) == [0, 1, 2]
    bar.close()
    assert log.getvalue() == ""


def test_a_terminal_gets_a_redrawn_bar() -> None:
    term = _Terminal()
    bar = progress_bar(total=3, desc="train", stream=term)
    bar.update(3)
    bar.close()
    assert "\r" in term.getvalue() and "100%" in term.getvalue()
