"""A corpus shaped like a trained model's output, at any size: statistics fitted from real term
documents (the scene benchmark's, made by ``vsparta index ... --export-jsonl``), then sampled.

Why: the adversarial generator (``vsparta.bench.synthetic``) gives every term similar weights, so
dynamic pruning (block-max WAND) finds nothing to skip. A trained model's φ is not like that:
a few terms carry large weights in few images, most carry tiny ones everywhere. Pruning and
shard layouts must be measured on data with that shape too.

Fitted per vocabulary id ``t`` (``fit``): its document frequency ``df_t`` (share of images that
keep it in their top-n) and the mean and standard deviation of ``ln w`` over those images (a
log-normal per term; the real per-term distributions are close to it in the bulk, and its
tail decides the per-list maxima WAND uses) and the largest weight seen, ``max_t``. Sampled
(``generate``): image ``i`` keeps term ``t`` with probability ``df_t`` (independently), weight
``exp(mu_t + sigma_t z)`` clipped at ``max_t``. Document length then follows the real mean (sum of
df). The profile is a small ``.npz``.

Why the clip: a trained model's weights are bounded (in the sparse demo model "tiny" never
exceeds 3.8 over 3,000 images), but a log-normal with sigma ~1 sampled a million times reaches
e^(mu + 4.8 sigma), ~100 for that term: phantom maxima that no real index has and that defeat
block-max WAND. Profiles from before the field have no clip.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
from numpy.lib.format import open_memmap

from vsparta.bench.corpus import Corpus

log = logging.getLogger(__name__)

BLOCK = 512  # images per seeded block: any size is a prefix of a larger one
FORMAT_VERSION = 2  # 2: weights clipped at the per-term maximum seen


def fit(corpus: Corpus) -> dict[str, np.ndarray]:
    """Per-term df and log-weight mean/std from real documents (terms seen in >= 1 image)."""
    n = corpus.n_docs
    ids = np.asarray(corpus.indices, dtype=np.int64)
    logw = np.log(np.asarray(corpus.weights, dtype=np.float64))
    count = np.bincount(ids, minlength=corpus.vocab_size).astype(np.float64)
    s1 = np.bincount(ids, weights=logw, minlength=corpus.vocab_size)
    s2 = np.bincount(ids, weights=logw * logw, minlength=corpus.vocab_size)
    seen = count > 0
    mu = np.zeros(corpus.vocab_size)
    sd = np.zeros(corpus.vocab_size)
    mu[seen] = s1[seen] / count[seen]
    # One image only: no spread to fit; borrow the median spread of all terms.
    var = np.where(count > 1, s2 / np.maximum(count, 1) - mu**2, np.nan)
    sd[seen] = np.sqrt(np.clip(var[seen], 0, None))
    sd[seen & ~(count > 1)] = float(np.nanmedian(np.sqrt(np.clip(var, 0, None))))
    term_ids = np.flatnonzero(seen)
    wmax = np.zeros(corpus.vocab_size, dtype=np.float32)
    np.maximum.at(wmax, ids, np.asarray(corpus.weights, dtype=np.float32))
    return {
        "term_ids": term_ids.astype(np.int32),
        "df": (count[term_ids] / n).astype(np.float64),
        "mu": mu[term_ids].astype(np.float32),
        "sigma": sd[term_ids].astype(np.float32),
        "max": wmax[term_ids],
        "vocab_size": np.array(corpus.vocab_size),
        "source_docs": np.array(n),
    }


def save_profile(profile: dict[str, np.ndarray], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **profile)


def load_profile(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


def summary(profile: dict[str, np.ndarray]) -> dict[str, float]:
    """What the profile looks like, for the benchmark notes."""
    df, mu, sigma = profile["df"], profile["mu"], profile["sigma"]
    return {
        "terms_seen": int(len(df)),
        "mean_terms_per_image": float(df.sum()),
        "terms_in_half_the_images": int((df >= 0.5).sum()),
        "median_weight": float(np.exp(np.median(mu))),
        "p99_term_max_weight": float(
            np.percentile(profile["max"] if "max" in profile else np.exp(mu + 2.33 * sigma), 99)
        ),
    }


def _block(profile: dict[str, np.ndarray], seed: int, block: int, n_rows: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng([seed, 7, block])
    df = profile["df"]
    keep = rng.random((n_rows, len(df)), dtype=np.float32) < df.astype(np.float32)
    empty = ~keep.any(axis=1)
    keep[empty, int(np.argmax(df))] = True  # an image has at least one term
    rows, cols = np.nonzero(keep)  # row-major: per row, ascending vocabulary ids
    z = rng.standard_normal(len(cols), dtype=np.float32)
    w = np.exp(profile["mu"][cols] + profile["sigma"][cols] * z, dtype=np.float32)
    top = profile["max"][cols] if "max" in profile else np.float32(1e4)
    np.clip(w, np.float32(1e-6), top, out=w)
    lengths = np.bincount(rows, minlength=n_rows)
    return profile["term_ids"][cols], w, lengths


def generate(profile: dict[str, np.ndarray], n_docs: int, directory: Path, seed: int = 0) -> Corpus:
    """Sample ``n_docs`` images into memory-mapped arrays under ``directory`` (block by block)."""
    tmp = directory.with_name(directory.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    cap = int(n_docs * float(profile["df"].sum()) * 1.05) + 10 * BLOCK * len(profile["df"]) // 100 + 1000
    indices = open_memmap(tmp / "indices.npy", mode="w+", dtype=np.int32, shape=(cap,))
    weights = open_memmap(tmp / "weights.npy", mode="w+", dtype=np.float32, shape=(cap,))
    indptr = np.zeros(n_docs + 1, dtype=np.int64)
    pos = 0
    for block, start in enumerate(range(0, n_docs, BLOCK)):
        rows = min(BLOCK, n_docs - start)
        ids, w, lengths = _block(profile, seed, block, BLOCK)
        end = int(lengths[:rows].sum())
        if pos + end > cap:
            raise RuntimeError("profile produced longer documents than its mean allows; raise the cap")
        indices[pos : pos + end] = ids[:end]
        weights[pos : pos + end] = w[:end]
        indptr[start + 1 : start + rows + 1] = pos + np.cumsum(lengths[:rows])
        pos += end
        if block % 200 == 0:
            log.info("model-shaped: %d / %d images", start + rows, n_docs)
    indices.flush()
    weights.flush()
    del indices, weights
    # Trim to the used length (a copy of the header + a truncate would need the format's layout).
    for name in ("indices", "weights"):
        arr = np.load(tmp / f"{name}.npy", mmap_mode="r")[:pos]
        np.save(tmp / f"{name}.trim.npy", arr)
        (tmp / f"{name}.trim.npy").replace(tmp / f"{name}.npy")
    np.save(tmp / "indptr.npy", indptr)
    meta = {"source": "model-shaped", "n_docs": n_docs, "seed": seed, "format": FORMAT_VERSION}
    meta |= {"vocab_size": int(profile["vocab_size"])} | summary(profile)
    (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
    shutil.rmtree(directory, ignore_errors=True)
    tmp.rename(directory)
    return Corpus.load(directory)


def load_or_generate(profile_path: Path, n_docs: int, cache_dir: Path, seed: int = 0) -> Corpus:
    """The corpus for (profile, seed), from a cached run at least as large, else generated."""
    import hashlib

    digest = hashlib.sha1(profile_path.read_bytes()).hexdigest()[:12]
    base = cache_dir / f"model-shaped-v{FORMAT_VERSION}-{digest}-s{seed}"
    if base.exists():
        for sub in sorted(base.iterdir(), key=lambda p: int(p.name[2:]) if p.name[2:].isdigit() else -1):
            if sub.name.startswith("n-") and sub.name[2:].isdigit() and (sub / "meta.json").exists():
                if int(sub.name[2:]) >= n_docs:
                    corpus = Corpus.load(sub)
                    return corpus if corpus.n_docs == n_docs else corpus.head(n_docs)
    return generate(load_profile(profile_path), n_docs, base / f"n-{n_docs}", seed)


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.model_shaped EXPORT --tokenizer MODEL --out docs/model-profile.npz``"""
    import argparse

    from vsparta.bench.termdocs import load_term_docs
    from vsparta.model.query_tokenizer import QueryTokenizer

    p = argparse.ArgumentParser(description="Fit a model-shaped corpus profile from real term documents.")
    p.add_argument(
        "export", type=Path, help="term-document JSONL file or folder (vsparta index --export-jsonl)"
    )
    p.add_argument("--tokenizer", type=Path, required=True, help="the model folder whose tokenizer made them")
    p.add_argument("--out", type=Path, default=Path("docs/model-profile.npz"))
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    tok = QueryTokenizer.from_pretrained(args.tokenizer)
    corpus = load_term_docs(args.export, tok.token_to_id, tok.vocab_size)
    profile = fit(corpus)
    save_profile(profile, args.out)
    log.info("profile of %d images -> %s: %s", corpus.n_docs, args.out, summary(profile))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
