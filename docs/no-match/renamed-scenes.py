"""More scenes of the same subgroups for a larger index: ROOT/FOLDER/test.jsonl with each id renamed
PREFIX-NNNNN and each image path made relative to ROOT (an index keeps one image per id, and the
scenes of every seed number their ids from 0), written to ROOT/OUT.

Usage: .venv/bin/python docs/no-match/renamed-scenes.py ROOT FOLDER PREFIX OUT
(half-catalog-presence-words.sh: a2 more a2-more.jsonl; half-catalog-presence-40k.sh: a3 bulk
a3-bulk.jsonl; half-catalog-full-10k.sh: a2 more a2-more.jsonl).
"""

import json
import sys

root, folder, prefix, out = sys.argv[1:]
rows = [json.loads(line) for line in open(f"{root}/{folder}/test.jsonl")]
more = [dict(r, id=f"{prefix}-" + r["id"].split("-")[1], image=f"{folder}/" + r["image"]) for r in rows]
open(f"{root}/{out}", "w").write("".join(json.dumps(r) + "\n" for r in more))
