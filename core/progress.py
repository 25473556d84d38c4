"""Progress bars for every command: one home for how progress looks on a terminal and in a log.

On a terminal, a normal tqdm bar. When stderr is redirected (a log file, CI, `nohup`), a bar's
carriage returns turn the log into one enormous line; there the same bar writes one plain line
per ``log_interval`` seconds instead. Disabled, it writes nothing. Torch-free.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import Any, TextIO

from tqdm import tqdm

LOG_INTERVAL_S = 30.0
_PLAIN_FORMAT = "{desc}{n_fmt}/{total_fmt} {unit} [{elapsed}<{remaining}, {rate_fmt}{postfix}]"


class _LineWriter:
    """A file for tqdm that turns each redraw ("\\rtext   ") into one line ("text\\n"); the redraw
    tqdm makes on close repeats the last count and is dropped."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._last_count = ""

    def write(self, text: str) -> None:
        line = text.replace("\r", "").strip()
        count = line.split(" [", 1)[0]
        if line and count != self._last_count:
            self._last_count = count
            self._stream.write(line + "\n")

    def flush(self) -> None:
        self._stream.flush()


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, OSError, ValueError):
        return False


def progress_bar(
    iterable: Iterable[Any] | None = None,
    *,
    total: float | None = None,
    desc: str | None = None,
    unit: str = "it",
    enabled: bool = True,
    log_interval: float = LOG_INTERVAL_S,
    stream: TextIO | None = None,
    **kwargs: Any,
) -> tqdm:
    """A tqdm bar that suits where stderr goes; use it like ``tqdm(...)`` (iterate, ``update``, close)."""
    stream = stream if stream is not None else sys.stderr
    if not enabled:
        return tqdm(iterable, total=total, desc=desc, unit=unit, disable=True, **kwargs)
    if _is_terminal(stream):
        return tqdm(iterable, total=total, desc=desc, unit=unit, file=stream, dynamic_ncols=True, **kwargs)
    return tqdm(
        iterable,
        total=total,
        desc=f"{desc}: " if desc else "",
        unit=unit,
        file=_LineWriter(stream),
        bar_format=_PLAIN_FORMAT,
        mininterval=log_interval,
        maxinterval=max(log_interval, 10.0),
        miniters=1,
        ascii=True,
        **kwargs,
    )


def quiet_library_bars() -> None:
    """No Hugging Face bars ("Loading weights", "Writing model shards") beside our own progress.

    They redraw with carriage returns whatever stderr is, so a log would fill with them; a user can
    still ask for them with HF_HUB_DISABLE_PROGRESS_BARS=0 (read by huggingface_hub on import).
    Torch-free: transformers is only touched if something imported it already.
    """
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
