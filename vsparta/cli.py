"""The `vsparta` console script.

Each subcommand lives next to the code it drives (``model/cli.py``, ``indexer/cli.py`` ...) and is
imported only when chosen, so that ``vsparta serve`` never imports torch and ``--help`` is instant.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

# subcommand -> (module with `add_arguments(parser)` and `run(args) -> int`, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("vsparta.demo", "Generate scenes, train a small model, index them and serve search."),
    "scenes": ("vsparta.scenes_cli", "Generate the synthetic scene benchmark (images + manifests)."),
    "train": ("model.cli_train", "Train a VisualSparta (or dense baseline) model on a manifest."),
    "index": ("indexer.cli", "Encode images into weighted-term documents and write them to an engine."),
    "serve": ("service.cli", "Run the HTTP query service and web page."),
    "search": ("service.cli_search", "Query an index from the command line."),
    "eval": ("model.cli_eval", "Recall@K, NDCG@25 and the top-n trade-off on a held-out split."),
    "bench": ("bench.cli", "Benchmarks: engines vs peers, indexing throughput."),
}


def build_parser(argv: list[str]) -> tuple[argparse.ArgumentParser, str | None]:
    parser = argparse.ArgumentParser(prog="vsparta", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = next((a for a in argv if a in SUBCOMMANDS), None)
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name == chosen:
            importlib.import_module(module_name).add_arguments(p)
    return parser, chosen


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser, chosen = build_parser(argv)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if chosen is None or args.command is None:
        parser.print_help()
        return 2
    module = importlib.import_module(SUBCOMMANDS[chosen][0])
    return int(module.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
