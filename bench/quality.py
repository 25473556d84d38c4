"""``vsparta bench quality``: retrieval quality against index size, VisualSparta vs the dense baseline.

Generated scenes -> VisualSparta at each sparsity weight and the dense dual encoder, each trained
at every learning rate of a small sweep with early stopping on a validation pool the size of the
test pool (the best epoch of the best rate is kept) -> ``vsparta eval`` rows at n = 50, 100, 300,
1000, natural and all on the test pool -> ``docs/quality.md``, ``quality.json`` and ``quality.png``
(R@1 against terms per image, one line per model / regularizer weight).

The full run is meant for one GPU (``--config base``, MiniLM init, 10,000 train scenes); ``--quick``
is a CPU run of the tiny from-scratch recipe on a few hundred scenes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

QUICK: dict[str, Any] = {
    "train": 300,
    "val": 100,
    "test": 100,
    "size": 64,
    "epochs": 4,
    "config": "tiny",
    "init": "none",
    "lrs": "2e-3",  # one rate each: a CPU smoke run (the full run sweeps two)
    "dense_lrs": "1e-3",
    "weights": "0,3e-4,3e-3",
    "batch_size": 32,
}
FULL: dict[str, Any] = {
    "train": 10000,
    "val": 1000,
    "test": 1000,
    "size": 96,
    "epochs": 8,
    "config": "base",
    "init": None,  # MiniLM for the base config
    "lrs": "1e-4,2e-4",
    "dense_lrs": "5e-5,1e-4",
    "weights": "0,1e-3",
    "batch_size": 128,
}


def _floats(text: str) -> list[float]:
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a comma list of numbers, got {text!r}") from None
    if not values or any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected non-negative numbers, got {text!r}")
    return values


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="CPU-sized run (tiny model, few hundred scenes)")
    for name in ("train", "val", "test", "size", "epochs", "batch_size"):
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, help=f"default: full {FULL[name]}")
    parser.add_argument("--config", help="model preset or JSON (default: full base, quick tiny)")
    parser.add_argument("--init", help="text model for the init, or 'none' (default: MiniLM for base)")
    parser.add_argument("--lrs", type=_floats, help="VisualSparta learning-rate sweep (comma list)")
    parser.add_argument("--dense-lrs", type=_floats, help="dense baseline learning-rate sweep")
    parser.add_argument("--weights", type=_floats, help="sparsity weights, one VisualSparta line each")
    parser.add_argument("--sparsity-loss", choices=["flops", "l1"], default="flops", help="FLOPS or L1")
    parser.add_argument("--sparsity-images", type=int, help="images per batch the regularizer sees")
    parser.add_argument("--sparsity-vocab", type=int, help="vocabulary ids sampled per regularizer step")
    parser.add_argument("--sparsity-target", type=float, help="steer towards this many positive terms/img")
    parser.add_argument("--term-bias", action="store_true", help="VisualSparta with a per-term bias")
    parser.add_argument("--no-dense", action="store_true", help="skip the dense baseline")
    parser.add_argument(
        "--no-sparta", action="store_true", help="skip VisualSparta (the dense baseline only)"
    )
    parser.add_argument(
        "--kind", choices=["shapes", "objects"], default="shapes", help="scene benchmark (default shapes)"
    )
    parser.add_argument("--heldout", type=int, help="objects: images per held-out split (default: --test)")
    parser.add_argument(
        "--groups",
        default="",
        help="objects: comma-separated Unicode emoji groups/subgroups to draw from (default: all 1,161 "
        "objects; the demo's four subgroups let a CPU-sized model see each object dozens of times)",
    )
    parser.add_argument(
        "--merge", type=Path, nargs="+", help="no training: one table and plot from these runs' quality.json"
    )
    parser.add_argument("--patience", type=int, default=3, help="early stopping: epochs without gain")
    parser.add_argument("--seed", type=int, default=0, help="seed of the scenes and the trainings")
    parser.add_argument("--device", default="auto", help="auto (CUDA if available), cpu, cuda ...")
    parser.add_argument("--threads", type=int, help="torch CPU threads")
    parser.add_argument(
        "--cache-dir", type=Path, default=Path(".cache/bench/quality"), help="scenes and trained models"
    )
    parser.add_argument("--out-dir", type=Path, default=Path("docs"), help="quality.md/.png/.json go here")
    parser.add_argument("--no-write", action="store_true", help="print only")


@dataclass
class Variant:
    """One line of the plot: a model kind with its config overrides, trained at each rate of ``lrs``."""

    name: str
    model: str
    lrs: list[float]
    overrides: dict[str, Any] = field(default_factory=dict)


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    preset = QUICK if args.quick else FULL
    out = {k: getattr(args, k, None) for k in preset}
    out = {k: (preset[k] if v is None else v) for k, v in out.items()}
    for key in ("lrs", "dense_lrs", "weights"):
        if isinstance(out[key], str):
            out[key] = _floats(out[key])
    return out


def variants(s: dict[str, Any], args: argparse.Namespace) -> list[Variant]:
    out = []
    for w in [] if args.no_sparta else s["weights"]:
        overrides: dict[str, Any] = {"sparsity_weight": w, "sparsity_loss": args.sparsity_loss}
        for key in ("sparsity_images", "sparsity_vocab", "sparsity_target"):
            if getattr(args, key, None):
                overrides[key] = getattr(args, key)
        if args.term_bias:
            overrides["phi_term_bias"] = True
        label = "paper recipe" if w == 0 else f"{args.sparsity_loss} {w:g}"
        label += " + term bias" if args.term_bias else ""
        label += f", target {args.sparsity_target:g}" if w and args.sparsity_target else ""
        out.append(Variant(f"VisualSparta ({label})", "visualsparta", s["lrs"], overrides))
    if not args.no_dense:
        out.append(Variant("dense", "dense", s["dense_lrs"]))
    return out


def _groups(text: str, kind: str) -> tuple[str, ...]:
    """``--groups`` checked before any scene is drawn: a wrong name costs one sentence, not a run."""
    from vsparta.core.errors import UsageError

    groups = tuple(g.strip() for g in text.split(",") if g.strip())
    if groups and kind != "objects":
        raise UsageError("--groups picks emoji objects; it needs --kind objects")
    if groups:
        from vsparta.scenes.emoji_catalog import select

        try:
            select(groups)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    return groups


def _scenes(
    s: dict[str, Any], cache: Path, seed: int, kind: str, heldout: int | None, groups: tuple[str, ...]
) -> dict[str, Path]:
    folder = cache / f"{kind}-{s['train']}-{s['val']}-{s['test']}-{s['size']}-{seed}"
    if groups:
        folder = folder.with_name(folder.name + "-" + "+".join(groups))
    if kind == "objects":
        from vsparta.scenes.objects import generate_object_scenes

        n_held = s["test"] if heldout is None else heldout
        counts = {"train": s["train"], "val": s["val"], "test": s["test"]}
        counts |= {"heldout_words": n_held, "heldout_objects": n_held}
        manifests = {k: folder / f"{k}.jsonl" for k in counts}
        if all(p.exists() for p in manifests.values()):
            return manifests
        return generate_object_scenes(folder, counts, image_size=s["size"], seed=seed, groups=groups)
    from vsparta.scenes.shapes import generate_scenes

    manifests = {k: folder / f"{k}.jsonl" for k in ("train", "val", "test")}
    if all(p.exists() for p in manifests.values()):
        return manifests
    return generate_scenes(
        folder, n_train=s["train"], n_val=s["val"], n_test=s["test"], image_size=s["size"], seed=seed
    )


def train_variant(
    v: Variant, s: dict[str, Any], manifests: dict[str, Path], args: argparse.Namespace, work: Path
) -> dict[str, Any]:
    """Every rate of the sweep with early stopping; returns the best (by validation R@1+R@5+R@10)."""
    from vsparta.model.train import TrainOptions, train

    # runs resume from their folder: two recipes (say tiny and MiniLM) at one rate must not share one
    recipe = hashlib.sha1(
        json.dumps([s["config"], s["init"], s["batch_size"], str(manifests["train"])]).encode()
    ).hexdigest()[:8]
    runs = []
    for lr in v.lrs:
        out = (
            work
            / f"{v.model}-{'-'.join(f'{k}={x}' for k, x in sorted(v.overrides.items()))}-lr{lr:g}-{recipe}"
        )
        opts = TrainOptions(
            manifest=str(manifests["train"]),
            out=str(out),
            val=str(manifests["val"]),
            model=v.model,
            init=s["init"],
            config=s["config"],
            epochs=s["epochs"],
            batch_size=s["batch_size"],
            lr=lr,
            seed=args.seed,
            device=args.device,
            progress=False,
            keep_best=True,
            patience=args.patience,
            overrides=v.overrides if v.model == "visualsparta" else {},
            resume=True,
        )
        r = train(opts)
        best = r.best_epoch or len(r.val)
        runs.append(
            {
                "lr": lr,
                "seconds": round(r.seconds, 1),
                "best_epoch": best,
                "epochs_run": len(r.epoch_losses),
                "val": r.val[best - 1] if r.val else {},
                "positive_terms_during_training": r.epoch_positive_terms,
                "dir": str(r.final_dir),
            }
        )
        log.info("%s lr %g: val %s at epoch %d (%.0fs)", v.name, lr, runs[-1]["val"], best, r.seconds)
    return max(runs, key=lambda run: sum(run["val"].values()) if run["val"] else -1.0) | {"sweep": runs}


def _evaluate(model: Any, kind: str, records: list[Any], top_ns: Any, args: argparse.Namespace) -> list[Any]:
    from vsparta.model.encode import resolve_device
    from vsparta.model.evaluate import evaluate

    device = resolve_device(args.device)
    report = evaluate(
        records,
        model if kind == "visualsparta" else None,
        model if kind == "dense" else None,
        top_ns=top_ns,
        device=device,
        amp=device.type == "cuda",
        ndcg_queries=min(1000, len(records)),
        time_queries=100,
        seed=args.seed,
    )
    return [r for r in report.rows if r["model"] != "random"]


def run(args: argparse.Namespace) -> int:
    import torch

    from vsparta.bench import hardware
    from vsparta.bench.options import command_line
    from vsparta.core.manifest import read_manifest
    from vsparta.model.dense import load_model
    from vsparta.model.evaluate import NATURAL, TOP_N

    if args.merge:
        return _write(*merge_runs(args.merge), args)
    if args.threads:
        torch.set_num_threads(args.threads)
    s = _settings(args)
    t0 = time.perf_counter()
    groups = _groups(args.groups, args.kind)
    manifests = _scenes(s, args.cache_dir, args.seed, args.kind, args.heldout, groups)
    test = read_manifest(manifests["test"])
    held = {k: read_manifest(p) for k, p in manifests.items() if k.startswith("heldout")}
    results = []
    for v in variants(s, args):
        best = train_variant(v, s, manifests, args, args.cache_dir / "runs")
        model = load_model(best["dir"])
        rows = _evaluate(model, v.model, test, TOP_N, args)
        heldout = {k: _evaluate(model, v.model, r, (NATURAL,), args)[0] for k, r in held.items()}
        results.append(
            {
                "variant": v.name,
                "model": v.model,
                "overrides": v.overrides,
                **best,
                "rows": rows,
                "heldout": heldout,
            }
        )
    meta = {
        "command": command_line("quality"),
        "hardware": hardware.describe(),
        "device": args.device,
        "settings": s | {"kind": args.kind, "groups": list(groups)},
        "seconds": round(time.perf_counter() - t0, 1),
        "pool": str(len(test)),
    }
    return _write(results, meta, args)


def merge_runs(paths: list[Path]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Several runs (say one per model, trained side by side) as one table; each keeps its settings."""
    results: list[dict[str, Any]] = []
    metas = []
    for path in paths:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        metas.append(data["meta"])
        s = data["meta"]["settings"]
        init = "from scratch" if str(s["init"]).lower() == "none" else f"from {str(s['init']).split('/')[-1]}"
        for res in data["results"]:
            label = f"{res['variant']}, {init}{_recipe_notes(s['config'])}, <= {s['epochs']} ep"
            results.append(res | {"variant": label, "settings": s, "command": data["meta"]["command"]})
    meta = metas[0] | {
        "command": " ; ".join(m["command"] for m in metas),
        "seconds": round(max(m["seconds"] for m in metas), 1),
        "runs": metas,
    }
    return results, meta


# config keys that change a recipe without changing its variant name, as the merged table says them
_NOTES = {
    ("freeze_word_embeddings", True): "frozen word embeddings",
    ("pooling", "mean"): "mean pooling",
    ("similarity", "cosine"): "cosine",
}


def _recipe_notes(config: str) -> str:
    """ ", frozen word embeddings" and the like for a JSON ``--config``; "" for a preset name."""
    try:
        values = json.loads(config)
    except (TypeError, ValueError):
        return ""
    notes = [
        text for (key, value), text in _NOTES.items() if isinstance(values, dict) and values.get(key) == value
    ]
    return "".join(f", {n}" for n in notes)


def _write(results: list[dict[str, Any]], meta: dict[str, Any], args: argparse.Namespace) -> int:
    text = markdown(results, meta)
    print(text)  # noqa: T201 - the command's output
    if not args.no_write:
        args.out_dir.mkdir(parents=True, exist_ok=True)
        (args.out_dir / "quality.md").write_text(text, encoding="utf-8")
        (args.out_dir / "quality.json").write_text(
            json.dumps({"meta": meta, "results": results}, indent=1), encoding="utf-8"
        )
        plot(results, meta, args.out_dir / "quality.png")
        log.info("wrote %s/quality.{md,json,png}", args.out_dir)
    return 0


def _r1(row: dict[str, Any], pool: str) -> float:
    return float(row["recall"][pool]["R@1"])


def _data_line(s: dict[str, Any]) -> str:
    groups = f" of groups {', '.join(s['groups'])}" if s.get("groups") else ""
    return (
        f"{s.get('kind', 'shapes')} scenes{groups}, {s['train']} train / {s['val']} val / {s['test']} test, "
        f"{s['size']} px; "
        f"config `{s['config']}`, init `{s['init']}`, up to {s['epochs']} epochs, batch {s['batch_size']}"
    )


def _fmt(row: dict[str, Any], key: str, spec: str) -> str:
    return format(row[key], spec) if key in row else "-"


def markdown(results: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    pool = meta["pool"]
    runs = meta.get("runs", [meta])
    lines = [
        "# Retrieval quality vs index size",
        "",
        f"Command: `{meta['command']}`  ",
        f"Machine: {meta['hardware']['cpu']}, {meta['hardware']['cores']} cores (shared); device "
        f"{meta['device']}; total {meta['seconds']:.0f} s.  ",
        *[f"Data: {_data_line(m['settings'])}.  " for m in runs],
        "Each model's learning rate picked by validation R@1+R@5+R@10 (best epoch kept).",
        "",
        f"Recall in % on the {pool}-image test pool; terms/img = mean terms kept per image; postings/q = "
        "postings an inverted index over these images reads per query; "
        "natural = the positive terms capped like `vsparta index` (1000).",
        "",
        "| model | lr | best epoch | train s | top-n | terms/img | postings/q | R@1 | R@5 | R@10 | NDCG@25 |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for res in results:
        for row in res["rows"]:
            rec = row["recall"][pool]
            lines.append(
                f"| {res['variant']} | {res['lr']:g} | {res['best_epoch']} | {res['seconds']:.0f} | "
                f"{row['top_n']} | {_fmt(row, 'terms_per_image', '.0f')} | "
                f"{_fmt(row, 'postings_per_query', '.0f')} | "
                f"{rec['R@1']:.1f} | {rec['R@5']:.1f} | {rec['R@10']:.1f} | {row['ndcg@25']:.3f} |"
            )
    held = [res for res in results if res.get("heldout")]
    if held:
        lines += [
            "",
            "Generalisation (natural sparsity; each split's own pool): *held-out words* = seen objects "
            "named by an alias or category word no training caption uses; *held-out objects* = an object "
            "no training image shows.",
            "",
            "| model | split | images | R@1 | R@5 | R@10 | NDCG@25 |",
            "|---|---|---|---|---|---|---|",
        ]
        for res in held:
            for split, row in res["heldout"].items():
                rec = next(iter(row["recall"].values()))
                images = next(iter(row["recall"]))
                lines.append(
                    f"| {res['variant']} | {split} | {images} | {rec['R@1']:.1f} | {rec['R@5']:.1f} | "
                    f"{rec['R@10']:.1f} | {row['ndcg@25']:.3f} |"
                )
    lines += ["", "Learning-rate sweeps (validation R@1 at the best epoch):", ""]
    for res in results:
        sweep = ", ".join(f"{r['lr']:g}: {r['val'].get('R@1', float('nan')):.1f}" for r in res["sweep"])
        lines.append(f"- {res['variant']}: {sweep}")
    return "\n".join(lines) + "\n"


def plot(results: list[dict[str, Any]], meta: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pool = meta["pool"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for res in results:
        rows = [r for r in res["rows"] if "terms_per_image" in r]
        if rows:
            pts = sorted({(max(r["terms_per_image"], 1e-3), _r1(r, pool)) for r in rows})
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=res["variant"])
            nat = [r for r in rows if r["top_n"] == "natural"]
            if nat:
                ax.annotate("natural", (nat[0]["terms_per_image"], _r1(nat[0], pool)), fontsize=8)
        elif res["rows"]:
            ax.axhline(_r1(res["rows"][0], pool), linestyle="--", color="gray", label=res["variant"])
    ax.set_xscale("log")
    ax.set_xlabel("terms per image (log)")
    ax.set_ylabel(f"R@1 (%), {pool} test images")
    ax.set_title("R@1 vs index size (top-n cut of φ)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
