"""Where a ``--model`` value points: the one rule every command follows (torch-free).

A value names a local folder first. Only a value shaped like a Hugging Face id (``org/name``) that is
not a local path is looked up on the hub, and then the local hub cache is tried before the network,
which is probed with a short timeout: a mistyped ``runs/final`` must fail in a second with one
sentence naming the path, not after transformers' 28 s of retries and a 40-line traceback.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
from pathlib import Path
from urllib.parse import urlparse

# org/name, as the hub spells ids: no leading dot or slash, exactly one slash.
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")
_OFFLINE_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
HUB_PROBE_TIMEOUT_S = 2.0


class ModelPathError(ValueError):
    """A model option that names nothing usable; the message is one sentence for the user."""


def looks_like_hub_id(value: str) -> bool:
    return bool(_HUB_ID.match(value)) and not value.endswith((".json", ".safetensors"))


def _offline() -> bool:
    return any(os.environ.get(v, "").strip().lower() in {"1", "true", "yes", "on"} for v in _OFFLINE_VARS)


def _cached_snapshot(repo_id: str, needs: str) -> str | None:
    """The local snapshot folder of a hub model already downloaded, or None."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    found = try_to_load_from_cache(repo_id, needs)
    return str(Path(found).parent) if isinstance(found, str) else None


def _hub_reachable(timeout: float) -> bool:
    url = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname or "huggingface.co", port), timeout=timeout):
            return True
    except OSError:
        return False


def resolve_model_path(
    value: str | os.PathLike[str],
    *,
    option: str = "--model",
    needs: str = "config.json",
    hub: bool = True,
    allow_file: bool = False,
    probe_timeout: float = HUB_PROBE_TIMEOUT_S,
) -> str:
    """A local folder (absolute) or a hub id that can be fetched, else ``ModelPathError``.

    ``needs`` is the file a usable folder holds (``tokenizer.json`` for the query side, which reads
    nothing else); ``allow_file`` accepts that file itself; ``hub=False`` for commands that load
    local folders only or must never touch the network (serve, search, eval).
    """
    text = os.fspath(value).strip()
    if not text:
        raise ModelPathError(f"{option} is empty: give a saved model folder")
    path = Path(text).expanduser()
    if path.is_dir():
        if not (path / needs).is_file():
            raise ModelPathError(f"{option} {text} is a folder but not a saved model (no {needs} in it)")
        return str(path.resolve())
    if path.is_file() and allow_file and path.name == needs:
        return str(path.resolve())
    if path.exists():
        raise ModelPathError(f"{option} {text} is a file; give the saved model folder that holds it")
    if not (hub and looks_like_hub_id(text)):
        raise ModelPathError(f"{option} {text}: no such folder")
    cached = _cached_snapshot(text, needs)
    if cached is not None:
        return cached
    if _offline():
        raise ModelPathError(
            f"{option} {text}: no such folder, and not in the local Hugging Face cache (offline mode is set)"
        )
    if not _hub_reachable(probe_timeout):
        raise ModelPathError(
            f"{option} {text}: no such folder, and the Hugging Face hub is unreachable to download it"
        )
    return text


def existing_path(text: str) -> str:
    """argparse ``type=`` for an input that must exist: argparse then prints one line and exits 2,
    before any output folder is created or torch is imported."""
    path = Path(text).expanduser()
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{text}: no such file or folder")
    return str(path)


def existing_dir(text: str) -> str:
    path = existing_path(text)
    if not Path(path).is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a file, not a folder")
    return path
