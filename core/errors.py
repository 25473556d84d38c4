"""The mistake a user can fix: one home, below every command's module.

``vsparta.cli.main`` reports it as one sentence with exit code 2 (a traceback only with ``-v``).
It lives here, not in ``vsparta/cli.py``, because the subcommands (``indexer/cli.py``, ...) raise
it and ``vsparta.cli`` imports them: an import from there would be a cycle.
"""

from __future__ import annotations


class UsageError(ValueError):
    """A mistake in a command's arguments, found by its ``run()`` (argparse finds the rest)."""
