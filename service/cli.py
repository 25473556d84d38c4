"""Placeholder: this subcommand is not built yet (see the open issues)."""

from __future__ import annotations

import argparse
import logging

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """No options yet."""


def run(args: argparse.Namespace) -> int:
    log.error("`vsparta %s` is not built yet; see the open issues.", args.command)
    return 2
