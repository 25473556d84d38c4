"""R@1 of one model on the test pool, the shift split, and the shift split with its sizes or its
backgrounds alone, split by the size words of the objects each caption names (small, large, both).

Why: the shift split's sizes cost most of its recall (docs/shift-parts); this says which sizes.
Pools and feature caches are those `python -m bench.shift_parts` draws (its --cache-dir, its model
label). Run from the repository root:

    .venv/bin/python docs/shift-parts-varied/by_size.py CACHE_DIR/parts-224-1000-0 RUN/best LABEL
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from vsparta.core.manifest import read_manifest
from vsparta.model.data import ImageStore
from vsparta.model.dense import load_model
from vsparta.model.evaluate import build_queries, encode_sparse, query_matrix, sparse_scores
from vsparta.model.feature_cache import attach

POOLS = {
    "test": "test/test.jsonl",
    "only sizes": "only-sizes/shift.jsonl",
    "only background": "only-background/shift.jsonl",
    "shift": "shift/shift.jsonl",
}


def size_of_caption(record, mention) -> str:
    """small / large when every named object is drawn at that size word, else both."""
    sizes: dict[str, set[str]] = {}
    for drawn in record.metadata["objects"]:
        sizes.setdefault(drawn["name"], set()).add(drawn["size"])
    words = set().union(*(sizes.get(m["name"], set()) for m in mention))
    return next(iter(words)) if len(words) == 1 else "both"


def main(root: Path, model_path: str, label: str) -> None:
    model = load_model(model_path).eval()
    device = torch.device("cpu")
    print(f"| {label} | all | captions naming small objects | large | both |")
    print("|---|---|---|---|---|")
    for pool, manifest in POOLS.items():
        records = [r for r in read_manifest(root / manifest) if r.captions]
        tokenizer = model.query_tokenizer()
        store = ImageStore(records, model.config, tokenizer.tokenize, cache=False)
        attach(store, model, root / "features" / label / pool, device, False)
        queries = build_queries(records, tokenizer.tokenize)
        images = encode_sparse(model, store, 64, device, False)
        scores = sparse_scores(
            images.term_matrix(model.config.top_n), query_matrix(queries, images.vocab_size)
        )
        hits = scores.argmax(axis=1) == queries.targets
        groups = [size_of_caption(r, m) for r in records for m in r.metadata["mentions"]]
        cells = [f"{100 * hits.mean():.1f}"]
        for size in ("small", "large", "both"):
            chosen = hits[[g == size for g in groups]]
            cells.append(f"{100 * chosen.mean():.1f} (n={len(chosen)})")
        print(f"| {pool} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], sys.argv[3])
