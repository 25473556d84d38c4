"""Which objects of the catalog a served index finds by name: each object's own name as the whole
query, a hit when one of the top ``k`` images shows that object.

Why: the demo's figure of merit is how much of the catalog a user can find, not R@1 on captions;
"a dog" should bring dogs. The queries go to the real index (any ``--backend`` spec) through the
model's own query tokenizer, as ``POST /search`` sends them; an image shows an object when its
manifest's ``metadata.objects`` lists it. Only objects that some indexed image shows can be found;
both counts are reported.

    python -m bench.catalog_recall --backend embedded:demo-data/index --model demo-data/model/final \\
        --manifest demo-data/scenes/train.jsonl --manifest demo-data/scenes/test.jsonl --out-dir docs/demo
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from vsparta.bench.written import publish

log = logging.getLogger("vsparta.bench.catalog_recall")


def catalog_recall(backend: str, model: Path, manifests: list[Path], k: int) -> dict[str, Any]:
    from vsparta.core.manifest import read_manifest
    from vsparta.model.query_tokenizer import QueryTokenizer
    from vsparta.termindex.registry import open_index

    shows: dict[str, set[str]] = defaultdict(set)  # object name -> ids of the images showing it
    for manifest in manifests:
        for record in read_manifest(manifest):
            for obj in record.metadata.get("objects", []):
                shows[obj["name"]].add(record.id)
    tokenizer = QueryTokenizer.from_pretrained(model)
    index = open_index(backend)
    found, missed = [], []
    for name in sorted(shows):
        hits = index.search(tokenizer.query_weights(name), k=k)
        (found if any(hit.id in shows[name] for hit in hits) else missed).append(name)
    return {
        "backend": backend,
        "model": str(model),
        "k": k,
        "images": len({i for ids in shows.values() for i in ids}),
        "objects_shown": len(shows),
        "objects_found": len(found),
        "found": found,
        "missed": missed,
    }


def markdown(result: dict[str, Any], command: str) -> str:
    shown, found, k = result["objects_shown"], result["objects_found"], result["k"]
    return "\n".join(
        [
            "# Objects found by their own name",
            "",
            f"Command: `{command}`",
            "",
            f"Each object's name is the whole query to `{result['backend']}`; found = one of the top "
            f"{k} of the {result['images']:,} indexed images shows it. **{found:,} of the {shown:,} "
            f"objects** the index shows are found ({100 * found / max(1, shown):.1f} %).",
            "",
            f"Found, first 40: {', '.join(result['found'][:40])}",
            "",
            f"Missed, first 40: {', '.join(result['missed'][:40])}",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", required=True, help="the index to ask (a backend spec)")
    p.add_argument("--model", type=Path, required=True, help="the model folder (its query tokenizer)")
    p.add_argument(
        "--manifest", type=Path, action="append", required=True, help="a manifest of what is indexed"
    )
    p.add_argument("-k", type=int, default=10, help="results looked at per query (default 10)")
    p.add_argument("--out-dir", type=Path, help="write catalog-recall.{md,json} here")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for path in [*args.manifest, args.model / "tokenizer.json"]:
        if not path.is_file():
            p.error(f"{path}: no such file")
    result = catalog_recall(args.backend, args.model, args.manifest, args.k)
    return publish("catalog_recall", "catalog-recall", result, markdown, argv, args.out_dir)


if __name__ == "__main__":
    sys.exit(main())
