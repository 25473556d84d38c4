"""Where a benchmark's results go: the printed table as Markdown and every figure as JSON, one name.

One home for the pair, so each benchmark writes them the same way (UTF-8, indented JSON).
"""

from __future__ import annotations

import json
import logging
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
