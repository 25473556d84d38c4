"""Does the indexer's fast JPEG decode change what a trained model indexes? Full vs draft decode.

    vsparta scenes --out /tmp/scenes512 --train 1 --val 1 --test 400 --size 512
    python -m bench.decode_agreement --model demo-data/model/final \
        --manifest /tmp/scenes512/test.jsonl --json docs/indexing/decode-agreement.json

Both pictures come from the indexer's own decoder (``indexer.decoder.decode_chunk`` with and
without ``fast_decode``): draft decodes a JPEG at 1/2, 1/4 or 1/8 scale (libjpeg's DCT scaling)
while both sides stay >= the model's size, then resizes with Pillow's ``reducing_gap``. Per image
it compares the model's term sets (Jaccard), the weights of terms only one side has and the
largest change of a shared weight; over the manifest's captions, Recall@1/5/10 of both indexes
(scored as the engines score: Σ log(1 + φ)). Only JPEG files are compared: draft mode touches
nothing else. A random model's top-1000 of 30K near-tied weights (the unit test's stress case)
is far more sensitive than any trained model's positive terms; this measures the trained one.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from vsparta.bench.hardware import write_result
from vsparta.bench.query_cost import term_matrix


def compare(model: Path, manifest: Path, top_n: int = 1000, batch: int = 64) -> dict:
    """Per-image agreement and recall of full vs draft decode for the JPEGs in ``manifest``."""
    from vsparta.core.manifest import read_manifest
    from vsparta.indexer.decoder import decode_chunk
    from vsparta.indexer.items import WorkItem
    from vsparta.model.encode import TermEncoder
    from vsparta.model.evaluate import KS, build_queries, query_matrix, sparse_scores
    from vsparta.model.metrics import recall_at_k
    from vsparta.model.topn import csr_to_dicts

    enc = TermEncoder.from_pretrained(model, device="cpu")
    records = [r for r in read_manifest(manifest) if Path(r.image).suffix.lower() in (".jpg", ".jpeg")]
    if len(records) < 2:
        raise ValueError(f"{manifest}: fewer than 2 JPEG images with captions")
    items = [WorkItem(id=str(i), location=str(r.image), image=Path(r.image)) for i, r in enumerate(records)]
    queries = build_queries(records, enc.tokenize)
    qmat = query_matrix(queries, enc.config.vocab_size)
    out: dict = {"images": len(records), "queries": len(queries.texts)}
    docs, pixels = {}, {}
    for name, fast in (("full", False), ("draft", True)):
        chunks = [
            decode_chunk(items[s : s + batch], enc.preprocessor, None, fast)
            for s in range(0, len(items), batch)
        ]
        pixels[name] = np.concatenate([c.pixels for c in chunks])
        csr = enc.encode_uint8(pixels[name], top_n)
        docs[name] = csr_to_dicts(*csr)
        scores = sparse_scores(term_matrix(*csr, enc.config.vocab_size), qmat)
        out[name] = {
            "recall": recall_at_k(scores, queries.targets, KS),
            "terms_per_image": float(np.diff(csr[0]).mean()),
        }
    out["pixel_mean_abs_diff"] = float(np.abs(pixels["full"].astype(np.int16) - pixels["draft"]).mean())
    out["agreement"] = agreement(docs["full"], docs["draft"])
    return out


def agreement(full: list[dict[int, float]], draft: list[dict[int, float]]) -> dict:
    """How far two decodes' documents of the same images are apart."""
    pairs = list(zip(full, draft, strict=True))
    jaccard = np.array([len(a.keys() & b.keys()) / max(1, len(a.keys() | b.keys())) for a, b in pairs])
    one_side = [w for a, b in pairs for x, y in ((a, b), (b, a)) for t, w in x.items() if t not in y]
    changes = [[abs(a[t] - b[t]) for t in a.keys() & b.keys()] for a, b in pairs]
    relative = [max(c, default=0.0) / max(a.values()) for c, (a, _) in zip(changes, pairs, strict=True) if a]
    flat = [c for row in changes for c in row]
    return {
        "jaccard_mean": float(jaccard.mean()),
        "jaccard_min": float(jaccard.min()),
        "images_identical_sets": int((jaccard == 1).sum()),
        "terms_on_one_side": len(one_side),
        "largest_weight_on_one_side": float(max(one_side, default=0.0)),
        "mean_shared_weight_change": float(np.mean(flat)) if flat else 0.0,
        "largest_shared_weight_change": float(max(flat, default=0.0)),
        "largest_change_relative_to_heaviest": float(max(relative, default=0.0)),
    }


def _print(res: dict) -> None:
    a = res["agreement"]
    change = res["pixel_mean_abs_diff"]
    print(f"{res['images']} JPEGs, {res['queries']} captions; mean pixel change {change:.2f}/255")
    print("decode | terms/img |  R@1 |  R@5 | R@10")
    for name in ("full", "draft"):
        r = res[name]["recall"]
        terms = res[name]["terms_per_image"]
        print(f"{name:>6} | {terms:9.1f} | {r['R@1']:4.1f} | {r['R@5']:4.1f} | {r['R@10']:4.1f}")
    print(
        f"term sets: Jaccard mean {a['jaccard_mean']:.4f}, min {a['jaccard_min']:.4f}, identical in "
        f"{a['images_identical_sets']}/{res['images']} images; {a['terms_on_one_side']} terms on one side "
        f"only (largest weight {a['largest_weight_on_one_side']:.3f}); shared weights change by "
        f"{a['mean_shared_weight_change']:.4f} on average, {a['largest_shared_weight_change']:.3f} at most "
        f"({100 * a['largest_change_relative_to_heaviest']:.1f}% of that image's heaviest weight)"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", type=Path, required=True, help="saved VisualSparta model folder")
    p.add_argument("--manifest", type=Path, required=True, help="scene manifest JSONL (JPEGs with captions)")
    p.add_argument("--top-n", type=int, default=1000, help="terms kept per image (default 1000, as indexing)")
    p.add_argument("--json", type=Path, help="write the figures here")
    args = p.parse_args(argv)
    for path in (args.model, args.manifest):
        if not path.exists():
            print(f"error: {path} does not exist", file=sys.stderr)
            return 2
    try:
        res = compare(args.model, args.manifest, args.top_n)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    _print(res)
    if args.json:
        write_result(args.json, res, "decode_agreement", argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
