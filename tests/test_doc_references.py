"""Every document a tracked file cites exists in the repository (issue 15: nine files cited a
design page that a fresh clone does not have). Cited: any path ending in `.md`, and any file path
under `docs/`. A bare name (`topn.md`) must exist somewhere in the tree, a path from the root or
from the citing file's folder."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MISSING = "DESIGN" + ".md"  # spelled in two parts: this file must not cite it
# a path ending in .md, or a file under docs/; not part of a URL, not a glob or brace pattern, not
# a quoted file name (`out / "report.md"` names a file a command writes, it does not cite one)
_CITED = re.compile(r"(?<![\w/.:\"'-])((?:[\w.-]+/)*[\w.-]+\.md|docs/[\w./-]*\.[A-Za-z]{2,5})(?![\w*{/])")


def tracked_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [ROOT / name for name in out.decode().split("\0") if name]


def cited_paths(text: str) -> set[str]:
    return {m.group(1).rstrip(".") for m in _CITED.finditer(text)}


def _exists(cited: str, citing: Path, names: set[str]) -> bool:
    if "/" not in cited:
        return cited in names
    return any((base / cited).exists() for base in (ROOT, citing.parent))


def test_the_pattern_finds_citations_and_skips_urls_and_globs() -> None:
    text = (
        "see " + MISSING + " section 2, docs/architecture.md and docs/topn.png; "
        "https://example.org/guide.md and docs/benchmarks.{md,png} and docs/topn* are not cited"
    )
    assert cited_paths(text) == {MISSING, "docs/architecture.md", "docs/topn.png"}
    assert cited_paths("bulk docs/s per engine") == set()
    assert cited_paths('(out_dir / "embedded-load.md").write_text(text)') == set()


def test_a_citation_of_a_missing_document_is_reported(tmp_path: Path) -> None:
    citing = tmp_path / "module.py"
    assert not _exists(MISSING, citing, {"README.md"}) and _exists("README.md", citing, {"README.md"})
    absent = "docs/" + MISSING
    assert not _exists(absent, citing, set()) and _exists("docs/architecture.md", citing, set())


def test_every_cited_document_exists() -> None:
    missing = []
    files = tracked_files()
    names = {p.name for p in files}
    for path in files:
        if not path.is_file() or path.suffix in {".png", ".json", ".jsonl", ".npz", ".jpg"}:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        cited = sorted(cited_paths(text))
        missing += [f"{path.relative_to(ROOT)} cites {c}" for c in cited if not _exists(c, path, names)]
    assert missing == []
