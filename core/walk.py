"""A lazy folder walk in a fixed order: the home of the order in which folder inputs are listed.

Files come out one at a time, each folder's entries sorted, so that a job over ten million files
holds one folder's names at a time instead of the whole list, and yet lists exactly the order a
global sort would give (shards and ``--resume`` depend on it).

Why a per-folder sort equals a global sort: every path under a sub-folder ``d`` starts with
``d/``, so the whole subtree sorts as one block at the place of the key ``d`` + ``dir_suffix``:
``"/"`` reproduces sorting whole relative POSIX paths as strings (``"a-b.jpg" < "a.jpg" <
"a/x.jpg"``), ``"\\0"`` reproduces sorting by path components, as ``sorted(Path ...)`` does
(``a/x.jpg`` before ``a-b.jpg``). Neither character can occur in a file name, so a key ending in
it is always a folder. Torch-free.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

Entry = os.DirEntry  # type alias for the predicates' argument
FolderOrder = str  # "/" (as whole path strings) or "\0" (as path components)
BY_PATH_STRING: FolderOrder = "/"
BY_COMPONENTS: FolderOrder = "\0"


def _listing(
    folder: str,
    keep: Callable[[os.DirEntry[str]], bool],
    enter: Callable[[os.DirEntry[str]], bool],
    dir_suffix: str,
) -> tuple[list[str], set[str]]:
    """One folder's sort keys (names; folders to enter get ``dir_suffix``) and its kept links."""
    keys: list[str] = []
    links: set[str] = set()
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if keep(entry):
                    keys.append(entry.name)
                    if _is_link(entry):
                        links.add(entry.name)
                if enter(entry):
                    keys.append(entry.name + dir_suffix)
    except OSError:  # unreadable or vanished folder: skipped, as os.walk does
        pass
    keys.sort()
    return keys, links


def _is_link(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_symlink()
    except OSError:
        return False


def sorted_walk(
    root: str | Path,
    *,
    keep: Callable[[os.DirEntry[str]], bool],
    enter: Callable[[os.DirEntry[str]], bool],
    order: FolderOrder = BY_PATH_STRING,
) -> Iterator[tuple[str, str, bool]]:
    """``(relative POSIX path, path, is_symlink)`` of every kept entry under ``root``, lazily.

    ``keep(entry)``: list this entry; ``enter(entry)``: descend into it. Memory: the sort keys of
    the folders on the current path (one folder's names at a time for a tree of folders; a single
    flat folder of N files still holds its N names, ~70 bytes each).
    """
    if order not in (BY_PATH_STRING, BY_COMPONENTS):
        raise ValueError(f"order must be {BY_PATH_STRING!r} or {BY_COMPONENTS!r}, got {order!r}")
    top = os.fspath(root)
    keys, links = _listing(top, keep, enter, order)
    stack = [(top, "", iter(keys), links)]
    while stack:
        folder, prefix, names, links = stack[-1]
        for key in names:
            if key.endswith(order):
                name = key[:-1]
                sub = os.path.join(folder, name)
                sub_keys, sub_links = _listing(sub, keep, enter, order)
                stack.append((sub, f"{prefix}{name}/", iter(sub_keys), sub_links))
                break
            yield prefix + key, os.path.join(folder, key), key in links
        else:
            stack.pop()
