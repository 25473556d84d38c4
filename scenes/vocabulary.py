"""How long-tailed a benchmark's captions are: distinct word-pieces and their document frequencies.

A document is one image (all its captions together), as in the index; the word-pieces are the
model tokenizer's (MiniLM's uncased WordPiece by default), so the figures describe what the index
and the queries actually hold. Written next to the manifests as ``vocabulary.json``.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from vsparta.core.manifest import read_manifest

RANKS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)


def caption_vocabulary(manifests: dict[str, Path], tokenizer: Any) -> dict[str, Any]:
    """Per split and over all splits: images, distinct words and word-pieces, and the share of
    images that contain the word-piece at each frequency rank (the document-frequency curve)."""
    report: dict[str, Any] = {}
    every: Counter[str] = Counter()
    words_all: set[str] = set()
    images_all = 0
    for split, path in manifests.items():
        df: Counter[str] = Counter()
        words: set[str] = set()
        records = read_manifest(path)
        for record in records:
            text = " ".join(record.captions)
            words |= set(text.split())
            df.update(set(tokenizer.encode(text, add_special_tokens=False).tokens))
        report[split] = _summary(df, len(records), words)
        every.update(df)
        words_all |= words
        images_all += len(records)
    report["all"] = _summary(every, images_all, words_all)
    report["all"]["df_ranked"] = [count for _, count in every.most_common()]  # the whole curve
    return report


def _summary(df: Counter[str], n_images: int, words: set[str]) -> dict[str, Any]:
    ranked = [count for _, count in df.most_common()]
    return {
        "images": n_images,
        "distinct_words": len(words),
        "distinct_word_pieces": len(df),
        "df_curve": {str(r): round(ranked[r - 1] / max(n_images, 1), 5) for r in RANKS if r <= len(ranked)},
        "top": [[piece, count] for piece, count in df.most_common(15)],
        "seen_once": sum(1 for c in ranked if c == 1),
    }


def write_vocabulary(out_dir: Path, report: dict[str, Any]) -> Path:
    path = Path(out_dir) / "vocabulary.json"
    path.write_text(json.dumps(report, indent=1), encoding="utf-8")
    return path


def plot_df_curve(report: dict[str, Any], path: Path) -> Path:
    """Log-log rank / document-frequency plot of all splits (a straight-ish line = a long tail)."""
    total = report["all"]
    shares = [count / max(total["images"], 1) for count in total["df_ranked"]]
    title = f"caption word-pieces of {total['images']} object scenes"
    title += f" ({total['distinct_word_pieces']} distinct)"
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.loglog(range(1, len(shares) + 1), shares, marker=".", linestyle="none", markersize=3)
    ax.set_xlabel("word-piece rank")
    ax.set_ylabel("share of images whose captions hold it")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)
