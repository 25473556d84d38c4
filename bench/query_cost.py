"""What an index costs a query, and what a minimum weight buys: postings read vs recall.

    vsparta index scenes/test.jsonl --model M --backend embedded:/tmp/ix --export-jsonl /tmp/export
    python -m bench.query_cost /tmp/export --model M --manifest scenes/test.jsonl \
        --min-weights 0,0.1,0.5,1 --json docs/query-cost.json

An inverted index answers a query by reading the posting list of each of its tokens, so its cost
grows with Σ over the query's distinct tokens of df (the share of images that hold the token):
"postings per query per image" below, times the index size, is what every engine reads before
any dynamic pruning. A model that keeps the same common words in nearly every image (the demo's
does: docs/elasticsearch.md) makes every query read most of the index. Dropping weights below
a threshold at index time shortens those lists; the table shows what that costs in recall on
the manifest's captions (every caption a query, its own image the answer, scored Σ log(1 + w)
as the engines score).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from vsparta.bench.corpus import Corpus
from vsparta.bench.hardware import write_result
from vsparta.termindex.scoring import saturate_array


def caption_queries(corpus: Corpus, manifest: Path, tokenize) -> tuple[sp.csr_matrix, np.ndarray]:
    """``[Q, V]`` token counts of every caption of the corpus's images, and each one's image row."""
    captions = {}
    with open(manifest, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                rec = json.loads(line)
                captions[str(rec["id"])] = rec.get("captions", [])
    rows, cols, targets = [], [], []
    for i in range(corpus.n_docs):
        for text in captions.get(corpus.id_of(i), []):
            toks = tokenize(text)
            rows.extend([len(targets)] * len(toks))
            cols.extend(toks)
            targets.append(i)
    if not targets:
        raise ValueError(f"{manifest}: no captions for the exported images (ids must match)")
    q = sp.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=(len(targets), corpus.vocab_size))
    q.sum_duplicates()
    return q, np.asarray(targets, dtype=np.int64)


def term_matrix(indptr: np.ndarray, ids: np.ndarray, weights: np.ndarray, vocab: int) -> sp.csr_matrix:
    """``[V, N]`` of log(1 + w) from CSR rows: what an engine scores a query's tokens against."""
    image = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    return sp.csr_matrix(
        (saturate_array(weights), (ids, image)), shape=(vocab, len(indptr) - 1), dtype=np.float32
    )


def cost_at(corpus: Corpus, queries: sp.csr_matrix, targets: np.ndarray, min_weight: float) -> dict:
    """Terms per image, postings per query per image and Recall@1/5/10 of the index that
    ``vsparta index --min-weight`` would build (the same rule: ``indexer.batch.canonical_csr``)."""
    from vsparta.indexer.batch import canonical_csr
    from vsparta.model.metrics import recall_at_k

    indptr, ids, weights = canonical_csr(corpus.indptr, corpus.indices, corpus.weights, None, min_weight)
    df = np.bincount(ids, minlength=corpus.vocab_size) / corpus.n_docs
    present = (queries > 0).astype(np.float32)
    scores = np.asarray((queries @ term_matrix(indptr, ids, weights, corpus.vocab_size)).todense())
    return {
        "min_weight": min_weight,
        "terms_per_image": float(len(ids) / corpus.n_docs),
        "terms_in_half_the_images": int((df >= 0.5).sum()),
        "postings_per_query_per_image": float(np.asarray(present @ df).mean()),
        "recall": recall_at_k(scores, targets, (1, 5, 10)),
    }


def main(argv: list[str] | None = None) -> int:
    from vsparta.bench.termdocs import load_term_docs
    from vsparta.model.query_tokenizer import QueryTokenizer

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "export", type=Path, help="term-document JSONL file or folder (vsparta index --export-jsonl)"
    )
    p.add_argument("--model", type=Path, required=True, help="the model folder whose tokenizer made them")
    p.add_argument("--manifest", type=Path, required=True, help="the images' manifest, with captions")
    p.add_argument("--min-weights", default="0", help="comma list of index-time weight thresholds")
    p.add_argument("--json", type=Path, help="write the rows here")
    args = p.parse_args(argv)
    for path in (args.export, args.model, args.manifest):
        if not path.exists():
            print(f"error: {path} does not exist", file=sys.stderr)
            return 2
    try:
        thresholds = [float(x) for x in args.min_weights.split(",")]
        tok = QueryTokenizer.from_pretrained(args.model)
        corpus = load_term_docs(args.export, tok.token_to_id, tok.vocab_size)
        queries, targets = caption_queries(corpus, args.manifest, tok.tokenize)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    rows = [cost_at(corpus, queries, targets, t) for t in thresholds]
    print(f"{corpus.n_docs} images, {len(targets)} caption queries")
    print("min weight | terms/img | in >= 50% of images | postings/query/image |  R@1 |  R@5 | R@10")
    for r in rows:
        rec = r["recall"]
        print(
            f"{r['min_weight']:10g} | {r['terms_per_image']:9.1f} | {r['terms_in_half_the_images']:19d} | "
            f"{r['postings_per_query_per_image']:20.2f} | "
            f"{rec['R@1']:4.1f} | {rec['R@5']:4.1f} | {rec['R@10']:4.1f}"
        )
    if args.json:
        write_result(
            args.json, {"images": corpus.n_docs, "queries": len(targets), "rows": rows}, "query_cost", argv
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
