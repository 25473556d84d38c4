"""A subcommand whose packages are not installed says which install brings them, in one sentence.

The first command (``scripts/demo.sh``) installs the product with the ``model`` and ``service``
extras only; the Docker service image has ``service`` alone; the benchmarks are a distribution of
their own (``bench/pyproject.toml``). A command that imports what such an install lacks (its
``--help`` included) gets this sentence instead of a ``ModuleNotFoundError`` traceback. Which extra
brings a package is read from the installed metadata (pyproject.toml is its one home).
"""

from __future__ import annotations

import importlib.metadata
import re

PRODUCT = "vsparta"
BENCH_INSTALL = (
    "the benchmarks are a package of their own, not installed here: from a checkout of the "
    "repository, run `pip install -e ./bench` (bash scripts/test.sh installs them)"
)

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_EXTRA = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


def _import_names(distribution: str) -> set[str]:
    """Names a distribution is imported as, by the usual rule (``faiss-cpu`` -> faiss, faiss_cpu)."""
    name = distribution.lower().replace("-", "_").replace(".", "_")
    return {name, name.split("_")[0]}


def extras_providing(module: str) -> list[str]:
    """The product's extras whose requirements bring the top-level package of ``module``."""
    top = module.split(".")[0].lower()
    try:
        requirements = importlib.metadata.requires(PRODUCT) or []
    except importlib.metadata.PackageNotFoundError:
        return []
    extras: list[str] = []
    for requirement in requirements:
        name, extra = _NAME.match(requirement), _EXTRA.search(requirement)
        if name and extra and name.group(1) != PRODUCT and top in _import_names(name.group(1)):
            extras.append(extra.group(1))
    return list(dict.fromkeys(extras))


def missing_install_message(command: str, exc: ModuleNotFoundError) -> str | None:
    """The sentence for a command whose packages are missing, or None (not an install matter: a bug)."""
    missing = exc.name or ""
    if not missing:
        return None
    if command == "bench" or missing.startswith(f"{PRODUCT}.bench"):
        return f"{BENCH_INSTALL} ({missing} is missing)"
    extras = extras_providing(missing)
    if not extras:
        return None
    names = " or ".join(f"`{e}`" for e in extras)
    return (
        f"this command needs {missing.split('.')[0]}, which the {names} extra installs: "
        f"pip install 'vsparta[{extras[0]}]' (in a checkout: pip install -e '.[{extras[0]}]')"
    )
