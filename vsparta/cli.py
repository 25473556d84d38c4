"""The `vsparta` console script.

Each subcommand lives next to the code it drives (model/cli_train.py, indexer/cli.py ...) and is
imported only when chosen, so that `vsparta serve` never imports torch and `--help` is instant.
Mistakes a user can fix (a wrong path, a missing index, a model folder that is not one) end in one
plain sentence and exit code 2, never a traceback; tracebacks are for bugs.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import logging
import sys
from collections.abc import Iterator
from typing import NoReturn

from vsparta.core.errors import UsageError
from vsparta.core.progress import quiet_library_bars
from vsparta.extras import missing_install_message

DESCRIPTION = (
    "VisualSparta text-to-image search. Images become weighted bags of word-pieces offline (train, "
    "index); text queries are looked up in an inverted index, embedded on disk or in Elasticsearch "
    "(search, serve). `vsparta demo` runs the whole chain on generated scenes."
)
EPILOG = "Run `vsparta COMMAND --help` for a command's options."

# subcommand -> (module with `add_arguments(parser)` and `run(args) -> int`, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("vsparta.demo", "Generate scenes, train a small model, index them and serve search."),
    "scenes": ("vsparta.scenes_cli", "Generate the synthetic scene benchmark (images + manifests)."),
    "train": ("vsparta.model.cli_train", "Train a VisualSparta (or dense baseline) model on a manifest."),
    "index": (
        "vsparta.indexer.cli",
        "Encode images into weighted-term documents and write them to an engine.",
    ),
    "serve": ("vsparta.service.cli", "Run the HTTP query service and web page."),
    "search": ("vsparta.service.cli_search", "Query an index from the command line."),
    "calibrate": (
        "vsparta.service.cli_calibrate",
        "A floor per word for the match rule, from captioned images outside the index.",
    ),
    "complete-words": (
        "vsparta.model.cli_complete",
        "Give words no training caption used the vector of their nearest caption word (floor from --val).",
    ),
    "eval": ("vsparta.model.cli_eval", "Recall@K, NDCG@25 and the top-n trade-off on a held-out split."),
    "bench": ("vsparta.bench.cli", "Benchmarks: engines vs peers, the top-n trade-off, indexing throughput."),
}

USER_ERROR_EXIT = 2
_OS_ERRORS = {
    errno.ENOENT: "{path}: no such file or folder",
    errno.EEXIST: "{path} exists and is a file, not a folder",
    errno.ENOTDIR: "{path}: part of this path is a file, not a folder",
    errno.EISDIR: "{path} is a folder, not a file",
    errno.EACCES: "{path}: permission denied",
    errno.EPERM: "{path}: operation not permitted",
    errno.ENOSPC: "{path}: no space left on the device",
    errno.EROFS: "{path}: read-only file system",
}


class _Parser(argparse.ArgumentParser):
    """argparse, minus the usage block before a mistake: the one sentence is what the user needs."""

    def error(self, message: str) -> NoReturn:
        self.exit(USER_ERROR_EXIT, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _chosen(argv: list[str]) -> str | None:
    """The subcommand named on the command line (its module is imported only then)."""
    return next((a for a in argv if a in SUBCOMMANDS), None)


def build_parser(argv: list[str]) -> tuple[argparse.ArgumentParser, str | None]:
    parser = _Parser(prog="vsparta", description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="debug logging; tracebacks for every error"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    chosen = _chosen(argv)
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(run_command=main)  # a command that runs others (the demo) gets the entry point
        if name == chosen:
            try:
                importlib.import_module(module_name).add_arguments(p)
            except ModuleNotFoundError as exc:  # an install without this command's packages
                message = missing_install_message(name, exc)
                if message is None:
                    raise
                raise UsageError(message) from exc
    return parser, chosen


def iter_parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """A parser and all its nested subcommand parsers (for checking every --help)."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                yield from iter_parsers(child)


def user_error_message(exc: BaseException, command: str = "") -> str | None:
    """The one sentence to show for a mistake the user can fix, or None for a bug (traceback)."""
    from vsparta.model.resolve import ModelPathError

    if isinstance(exc, UsageError | ModelPathError):
        return str(exc)
    if isinstance(exc, ModuleNotFoundError):
        return missing_install_message(command, exc)
    if isinstance(exc, OSError) and exc.filename is not None and exc.errno is not None:
        # FileNotFoundError, NotADirectoryError, PermissionError ... raised by open()/mkdir() on a
        # user's path: the path and what is wrong with it is the sentence, the traceback is noise.
        return _OS_ERRORS.get(exc.errno, "{path}: " + (exc.strerror or "error").lower()).format(
            path=exc.filename
        )
    if isinstance(exc, FileNotFoundError | NotADirectoryError | IsADirectoryError):
        return str(exc)
    termindex_errors = sys.modules.get("vsparta.termindex.errors")
    if termindex_errors is not None and isinstance(
        exc, termindex_errors.IndexNotFound | termindex_errors.WrongBackend
    ):
        return str(exc)
    return None


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        parser, chosen = build_parser(argv)
    except UsageError as exc:  # the command's packages are not installed (its --help included)
        command = _chosen(argv)
        if {"-v", "--verbose"} & set(argv[: argv.index(command)] if command else argv):
            raise
        sys.stderr.write(f"vsparta {command}: error: {exc}\n")
        return USER_ERROR_EXIT
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if chosen is None or args.command is None:
        parser.print_help()
        return USER_ERROR_EXIT
    quiet_library_bars()
    if not args.verbose:  # engine clients log every request, and a traceback per failed connection
        from vsparta.termindex.registry import quiet_client_loggers

        quiet_client_loggers(logging.ERROR)
    module = importlib.import_module(SUBCOMMANDS[chosen][0])
    try:
        return int(module.run(args) or 0)
    except Exception as exc:
        message = user_error_message(exc, chosen)
        if message is None or args.verbose:
            raise
        sys.stderr.write(f"vsparta {chosen}: error: {message}\n")
        return USER_ERROR_EXIT


if __name__ == "__main__":
    sys.exit(main())
