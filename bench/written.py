"""Where a benchmark's results go: the printed table as Markdown and every figure as JSON, one name.

One home for the pair, so each benchmark writes them the same way (UTF-8, indented JSON).
"""

from __future__ import annotations

import json
import logging
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def write_report(out_dir: Path | None, name: str, text: str, data: Any) -> None:
    """``text`` and ``data`` into ``out_dir`` as ``name`` + ".md" and ".json" (nothing when
    ``out_dir`` is None)."""
    if out_dir is None:
        return
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{name}.md").write_text(text, encoding="utf-8")
    (out_dir / f"{name}.json").write_text(json.dumps(data, indent=1), encoding="utf-8")
    log.info("wrote %s/%s.{md,json}", out_dir, name)


def publish(
    script: str,
    name: str,
    result: Any,
    markdown: Callable[[Any, str], str],
    argv: list[str] | None,
    out_dir: Path | None,
) -> int:
    """Print a ``python -m bench.SCRIPT`` run's table (which names the command line) and write it
    with its figures (``write_report``); the run's exit status."""
    command = f"python -m bench.{script} " + shlex.join(sys.argv[1:] if argv is None else argv)
    text = markdown(result, command)
    print(text)  # noqa: T201 - the command's output
    write_report(out_dir, name, text, result)
    return 0
