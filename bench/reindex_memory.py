"""What re-indexing a term-document export costs: peak memory and time, against another checkout.

`vsparta index EXPORT --tokenizer TOK` re-indexes without a model (docs/architecture.md section 3).
The export is ``export_resume``'s (the fake encoder's 1,000 terms per image; ``--export``), read
whole or its first ``--parts`` parts (10,000 documents each); the tokenizer is a word-level one of
the fake encoder's vocabulary, written here. Each round runs a fresh process of each checkout in turn
(``--old-python``) into a new embedded index; peak memory and wall seconds come from ``wait4``.

    python -m vsparta.bench.reindex_memory --export /var/tmp/export-100k/export --parts 1 3 \\
        --old-python /tmp/oldpy --out docs/indexing/reindex-memory.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
from pathlib import Path

from vsparta.bench.process import run_process
from vsparta.indexer.fake import FAKE_VOCAB_SIZE


def fake_tokenizer(folder: Path) -> Path:
    """A tokenizer.json whose words are the fake encoder's tokens (``[fakeN]``)."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit

    vocab = {f"[fake{i}]": i for i in range(FAKE_VOCAB_SIZE)}
    vocab["[UNK]"] = FAKE_VOCAB_SIZE
    tok = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = WhitespaceSplit()
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    return folder


def first_parts(export: Path, parts: int, folder: Path) -> Path:
    """A folder of links to the export's first ``parts`` parts."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for part in sorted(export.glob("*.jsonl"))[:parts]:
        (folder / part.name).symlink_to(part.resolve())
    return folder


def run_job(python: str, source: Path, tokenizer: Path, index: Path) -> dict:
    shutil.rmtree(index, ignore_errors=True)
    cmd = [python, "-m", "vsparta.cli", "index", str(source), "--tokenizer", str(tokenizer)]
    cmd += ["--backend", f"embedded:{index}", "--no-progress"]
    done = run_process(cmd, cwd="/")
    return {"seconds": done.seconds, "peak_mib": done.peak_mib, "summary": done.lines_with("indexed ")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--export", type=Path, required=True, help="an --export-jsonl folder")
    parser.add_argument("--parts", type=int, nargs="+", default=[1], help="how many of its parts, each")
    parser.add_argument("--work", type=Path, default=Path("/var/tmp/reindex-memory"))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--old-python", help="interpreter whose `vsparta` is the checkout to compare with")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    tokenizer = fake_tokenizer(args.work / "tokenizer")
    checkouts = [("new", sys.executable)] + ([("old", args.old_python)] if args.old_python else [])
    results: dict = {"export": str(args.export), "rounds": args.rounds, "sizes": []}
    for parts in args.parts:
        source = first_parts(args.export, parts, args.work / "input")
        size = sum(p.stat().st_size for p in source.iterdir())
        runs: dict[str, list[dict]] = {name: [] for name, _ in checkouts}
        for r in range(args.rounds):
            for name, python in checkouts if r % 2 == 0 else checkouts[::-1]:
                runs[name].append(run_job(python, source, tokenizer, args.work / "index"))
        row = {"parts": parts, "export_bytes": size, **{name: runs[name] for name, _ in checkouts}}
        for name, _ in checkouts:
            row[f"{name}_median_s"] = statistics.median(x["seconds"] for x in runs[name])
            row[f"{name}_peak_mib"] = max(x["peak_mib"] for x in runs[name])
        figures = [
            f"{n} {row[f'{n}_median_s']:.1f} s, peak {row[f'{n}_peak_mib']:,.0f} MiB" for n, _ in checkouts
        ]
        line = f"{parts} part(s), {size / 2**20:,.0f} MiB: " + "; ".join(figures)
        print(line, flush=True)
        results["sizes"].append(row)
    shutil.rmtree(args.work, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
