"""R@1 of one model on the object benchmark's pools when each image's weights are pooled over
several input sizes by their mean (what ``index_scales`` does) or by their maximum.

Why: the shift split's small objects are what its recall loses (docs/shift-small-objects.md).
Reading an image larger draws them over more cells; the mean then dilutes a word only the large
size finds, the maximum keeps it. Each size is encoded once per pool and every set of sizes is
pooled from those weights. Run from the repository root:

    .venv/bin/python docs/index-scales-s16/scale_pooling.py RUN/best SCENES_DIR OUT_DIR
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch

from vsparta.core.manifest import read_manifest
from vsparta.model.data import ImageStore
from vsparta.model.evaluate import SparseImages, build_queries, encode_sparse, query_matrix, sparse_scores
from vsparta.model.modeling import VisualSpartaModel

POOLS = ("val", "test", "shift", "heldout_words", "heldout_objects")
SIZES = (192, 224, 352, 448)


def weights_at(model: VisualSpartaModel, records: list, size: int) -> sp.csr_matrix:
    """``[N, V]`` positive φ of every image read at ``size`` pixels a side."""
    model.config.index_scales = [size]
    store = ImageStore(records, model.config, model.query_tokenizer().tokenize, cache=False)
    images = encode_sparse(model, store, 64, torch.device("cpu"), False)
    rows = [np.full(len(i), j) for j, i in enumerate(images.ids)]
    return sp.csr_matrix(
        (np.concatenate(images.values), (np.concatenate(rows), np.concatenate(images.ids))),
        shape=(len(images.ids), images.vocab_size),
    )


def as_sparse_images(phi: sp.csr_matrix) -> SparseImages:
    """Rows of ``phi`` as the evaluator keeps them: positive weights, largest first."""
    ids, values = [], []
    for j in range(phi.shape[0]):
        row = phi.getrow(j)
        order = np.argsort(-row.data, kind="stable")
        ids.append(row.indices[order].astype(np.int32))
        values.append(row.data[order].astype(np.float32))
    return SparseImages(ids, values, phi.shape[1])


def recall_at_1(model: VisualSpartaModel, records: list, phi: sp.csr_matrix) -> float:
    queries = build_queries(records, model.query_tokenizer().tokenize)
    images = as_sparse_images(phi)
    scores = sparse_scores(images.term_matrix(model.config.top_n), query_matrix(queries, images.vocab_size))
    return 100.0 * float(np.mean(scores.argmax(axis=1) == queries.targets))


def main(model_path: str, scenes: Path, out_dir: Path) -> None:
    model = VisualSpartaModel.from_pretrained(model_path).eval()
    sets = [(224,)] + [s for n in (2, 3, 4) for s in itertools.combinations(SIZES, n) if 224 in s]
    rows: dict[str, dict[str, float]] = {}
    for pool in POOLS:
        records = [r for r in read_manifest(scenes / f"{pool}.jsonl") if r.captions]
        at = {size: weights_at(model, records, size) for size in SIZES}
        for sizes, how in itertools.product(sets, ("mean", "max")):
            if len(sizes) == 1 and how == "max":
                continue
            if how == "mean":
                phi = sum(at[s] for s in sizes) / len(sizes)
            else:
                phi = at[sizes[0]]
                for s in sizes[1:]:
                    phi = phi.maximum(at[s])
            rows.setdefault(f"{how} of {','.join(map(str, sizes))}", {})[pool] = recall_at_1(
                model, records, sp.csr_matrix(phi)
            )
    command = " ".join([".venv/bin/python", *sys.argv])
    lines = [
        "# Pooling an image's weights over several input sizes: mean or maximum",
        "",
        f"Command: `{command}`",
        "",
        f"Model `{model_path}`; pools of `{scenes}`. R@1 in % at natural sparsity (the model's top-n cut).",
        "",
        f"| sizes (R@1) | {' | '.join(POOLS)} | shift / test |",
        "|---" * (len(POOLS) + 2) + "|",
    ]
    for name, r in rows.items():
        cells = " | ".join(f"{r[p]:.1f}" for p in POOLS)
        lines.append(f"| {name} | {cells} | {r['shift'] / r['test']:.2f} |")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "scale-pooling.md").write_text("\n".join(lines) + "\n")
    (out_dir / "scale-pooling.json").write_text(json.dumps(rows, indent=1) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]))
