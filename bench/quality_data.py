"""The scenes and feature caches a ``vsparta bench quality`` run reads: drawn or found in its cache.

Why a module of its own: which folder holds a run's scenes (and a frozen stem's regions of them) is
what lets every recipe on the same data share them, and a rerun find them; ``bench/quality.py``
trains and reports.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path
from typing import Any


def checked_groups(args: argparse.Namespace) -> tuple[str, ...]:
    """``--groups`` (and ``--train-look``) checked before any scene is drawn: a wrong name costs one
    sentence, not a run."""
    from vsparta.core.errors import UsageError

    kind = args.kind
    groups = tuple(g.strip() for g in args.groups.split(",") if g.strip())
    if groups and kind != "objects":
        raise UsageError("--groups picks emoji objects; it needs --kind objects")
    if args.train_look != "seen" and kind != "objects":
        raise UsageError("--train-look draws object scenes; it needs --kind objects")
    if groups:
        from vsparta.scenes.emoji_catalog import select

        try:
            select(groups)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    return groups


def scenes(s: dict[str, Any], args: argparse.Namespace, groups: tuple[str, ...]) -> dict[str, Path]:
    """Split -> manifest of the run's scenes, drawing only the splits its folder lacks."""
    seed, kind, heldout = args.seed, args.kind, args.heldout
    folder = scenes_folder(s, args, groups)
    if kind == "objects":
        from vsparta.scenes.object_varied import TRAIN_LOOKS
        from vsparta.scenes.objects import generate_object_scenes

        n_held = s["test"] if heldout is None else heldout
        counts = {"train": s["train"], "val": s["val"], "test": s["test"]}
        counts |= {"heldout_words": n_held, "heldout_objects": n_held, "shift": n_held}
        manifests = {k: folder / f"{k}.jsonl" for k in counts}
        missing = {k: n for k, n in counts.items() if not manifests[k].exists()}
        if missing:  # each split has its own seeds: the ones there stay as they are
            look = TRAIN_LOOKS[args.train_look]
            generate_object_scenes(
                folder, missing, image_size=s["size"], seed=seed, groups=groups, train_look=look, workers=None
            )
        return manifests
    from vsparta.scenes.shapes import generate_scenes

    manifests = {k: folder / f"{k}.jsonl" for k in ("train", "val", "test")}
    if all(p.exists() for p in manifests.values()):
        return manifests
    return generate_scenes(
        folder, n_train=s["train"], n_val=s["val"], n_test=s["test"], image_size=s["size"], seed=seed
    )


def scenes_folder(s: dict[str, Any], args: argparse.Namespace, groups: tuple[str, ...]) -> Path:
    """One folder per scene setting; another training look gets its own (its other splits are the
    same scenes as the seen look's, drawn again beside it)."""
    name = f"{args.kind}-{s['train']}-{s['val']}-{s['test']}-{s['size']}-{args.seed}"
    name += "-" + "+".join(groups) if groups else ""
    name += "" if args.train_look == "seen" else f"-{args.train_look}"
    return args.cache_dir / name


def features_folder(manifest: Path, s: dict[str, Any], args: argparse.Namespace, pool: str) -> Path:
    """Where runs on these scenes keep a frozen stem's regions of ``pool`` (train, val, test ...):
    one folder per stem setting, whatever the transformer on top, so every recipe shares it (a cache
    of more views serves a run that wants fewer; a stale one is rebuilt, ``model.feature_cache``)."""
    from vsparta.model.configuration import config_from_spec

    config = config_from_spec(s["config"])
    stem = [config.stem, config.stem_weights, config.image_size, config.grid_size, config.hf_vision_model]
    if config.stem_stride != 32:  # a stride-16 map's regions; the head's folders stay as they were
        stem.append(config.stem_stride)
    digest = hashlib.sha1(json.dumps(stem).encode()).hexdigest()[:8]
    return args.cache_dir / "features" / f"{manifest.parent.name}-{digest}" / pool
