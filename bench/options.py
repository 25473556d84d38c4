"""Option values shared by the bench commands (sizes, engine lists, budgets, the command line).

Its own module so that each benchmark (bench/topn.py ...) and bench/cli.py, which wires them into
`vsparta bench`, import it rather than each other.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from vsparta.model.resolve import existing_path

ENGINES = [
    "scipy",
    "embedded",
    "elasticsearch",
    "elasticsearch-wand",
    "opensearch-2.19",
    "opensearch-3.x",
    "service",
    "pisa",
    "seismic",
    "dense-numpy",
    "dense-faiss",
]
_SUFFIX = {"K": 1_000, "M": 1_000_000}


def parse_size(text: str) -> tuple[str, int]:
    """``1K`` -> 1000, ``113K`` -> 113,287 (the paper's COCO index), ``1M``, or a plain integer."""
    t = text.strip().upper()
    if t == "113K":
        return "113K", 113_287
    try:
        n = int(float(t[:-1]) * _SUFFIX[t[-1]]) if t[-1] in _SUFFIX else int(t)
    except (ValueError, IndexError):
        raise ValueError(f"bad size {text!r}: use e.g. 1K, 5K, 113K, 1M or an integer") from None
    if n < 1:
        raise ValueError(f"size must be >= 1, got {text!r}")
    return t, n


def parse_zipf(text: str) -> tuple[float, float]:
    try:
        s, b = (float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected S,B (e.g. 1.0,100), got {text!r}") from None
    if s <= 0 or b < 0:
        raise argparse.ArgumentTypeError(f"need S > 0 and B >= 0, got {text!r}")
    return s, b


def command_line(task: str) -> str:
    """How this benchmark was invoked, for its report (``vsparta bench TASK`` when not from a CLI)."""
    if "bench" not in sys.argv:
        return f"vsparta bench {task}"
    return "vsparta bench " + " ".join(shlex.quote(a) for a in sys.argv[sys.argv.index("bench") + 1 :])


def parse_engine_budget(text: str) -> tuple[str, float]:
    name, _, seconds = text.partition("=")
    try:
        value = float(seconds)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected ENGINE=SECONDS, got {text!r}") from None
    if name not in ENGINES or value <= 0:
        raise argparse.ArgumentTypeError(f"expected ENGINE=SECONDS with ENGINE in {', '.join(ENGINES)}")
    return name, value


def parse_engines(text: str) -> list[str]:
    names = [e.strip() for e in text.split(",") if e.strip()]
    bad = [e for e in names if e not in ENGINES]
    if bad:
        raise ValueError(f"unknown engine(s) {bad}; choose from {', '.join(ENGINES)}")
    return names


def saved_model(spec: str) -> tuple[str, Path]:
    """``--model NAME=PATH``: a saved model folder of either kind and the name its rows carry
    (``PATH`` alone: named after its run folder)."""
    name, _, path = spec.partition("=") if "=" in spec else ("", "", spec)
    if not (Path(path) / "config.json").is_file():
        raise argparse.ArgumentTypeError(f"{path} is not a saved model folder (no config.json)")
    return name or Path(path).parent.name, Path(path)


def add_models_argument(parser: argparse.ArgumentParser) -> None:
    """``--model NAME=PATH``, once per model to measure (``saved_model``)."""
    parser.add_argument(
        "--model",
        action="append",
        required=True,
        type=saved_model,
        help="NAME=PATH of a saved model (either kind)",
    )


def input_file(text: str) -> Path:
    """argparse ``type=`` for a file a benchmark reads: checked before a long run, not after it."""
    return Path(existing_path(text))
