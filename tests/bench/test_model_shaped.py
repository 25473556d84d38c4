"""The model-shaped corpus reproduces the statistics it was fitted on, deterministically."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from vsparta.bench.corpus import Corpus
from vsparta.bench.model_shaped import fit, generate, load_profile, save_profile


def real_like(n: int, vocab: int, seed: int) -> Corpus:
    """Documents with skewed df and per-term log-normal weights (what a trained model emits)."""
    rng = np.random.default_rng(seed)
    df = np.clip(1.0 / np.arange(1, vocab + 1) ** 0.7, 0, 0.95)
    mu = rng.normal(-2.0, 0.8, vocab)
    rows_ids, rows_w, indptr = [], [], [0]
    for _ in range(n):
        ids = np.flatnonzero(rng.random(vocab) < df)
        if len(ids) == 0:
            ids = np.array([0])
        rows_ids.append(ids)
        rows_w.append(np.exp(mu[ids] + 0.5 * rng.standard_normal(len(ids))).astype(np.float32))
        indptr.append(indptr[-1] + len(ids))
    return Corpus(np.array(indptr), np.concatenate(rows_ids).astype(np.int32), np.concatenate(rows_w), vocab)


def test_generated_corpus_has_the_fitted_df_and_weights(tmp_path: Path) -> None:
    real = real_like(3000, 400, seed=1)
    profile = fit(real)
    save_profile(profile, tmp_path / "p.npz")
    profile = load_profile(tmp_path / "p.npz")
    made = generate(profile, 4000, tmp_path / "gen", seed=5)
    assert made.n_docs == 4000 and np.all(np.diff(made.indptr) >= 1)
    for a, b in zip(made.indptr[:50], made.indptr[1:51], strict=True):  # ids ascending, unique per row
        assert np.all(np.diff(made.indices[a:b]) > 0)
    refit = fit(made)
    seen = np.isin(profile["term_ids"], refit["term_ids"])
    assert seen[profile["df"] > 0.01].all()
    df_real = dict(zip(profile["term_ids"].tolist(), profile["df"], strict=True))
    df_made = dict(zip(refit["term_ids"].tolist(), refit["df"], strict=True))
    common = [t for t in df_real if df_real[t] > 0.05]
    err = max(abs(df_made[t] - df_real[t]) for t in common)
    assert err < 0.04, err  # binomial noise at 4000 images is ~0.008
    mean_len = made.nnz / made.n_docs
    assert abs(mean_len - real.nnz / real.n_docs) < 0.05 * mean_len
    mu_real = dict(zip(profile["term_ids"].tolist(), profile["mu"], strict=True))
    mu_made = dict(zip(refit["term_ids"].tolist(), refit["mu"], strict=True))
    assert max(abs(mu_made[t] - mu_real[t]) for t in common) < 0.1
    # Same profile and seed: same bytes; a smaller size is a prefix of a larger one.
    again = generate(profile, 1500, tmp_path / "gen2", seed=5)
    end = int(again.indptr[-1])
    assert np.array_equal(again.indptr, made.indptr[:1501])
    assert np.array_equal(again.indices, made.indices[:end]) and np.array_equal(
        again.weights, made.weights[:end]
    )


def test_no_sampled_weight_exceeds_the_largest_real_one(tmp_path: Path) -> None:
    """A log-normal sampled a million times reaches far past what the model ever emitted; the
    sample is clipped at each term's observed maximum so block maxima stay real."""
    real = real_like(500, 50, seed=2)
    profile = fit(real)
    wmax = dict(zip(profile["term_ids"].tolist(), profile["max"].tolist(), strict=True))
    for t in range(50):
        mask = real.indices == t
        if mask.any():
            assert wmax[t] == float(real.weights[mask].max())
    profile["sigma"] = profile["sigma"] * 4  # a wide fit: without the clip, many samples would exceed
    made = generate(profile, 3000, tmp_path / "wide", seed=1)
    top = np.array([wmax[int(t)] for t in made.indices], dtype=np.float32)
    assert np.all(made.weights <= top)
    assert np.mean(made.weights == top) > 0.01  # the clip was really needed
