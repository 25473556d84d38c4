"""The catalog's emoji subgroups in its order, comma-separated, for the half-catalog scripts beside
it: all 82, or with START (0 or 1) every other one from it (the two halves of the half-catalog
test). Usage: .venv/bin/python docs/no-match/subgroups.py [START]"""

import sys

from vsparta.scenes.emoji_catalog import catalog

subgroups = list(dict.fromkeys(o.subgroup for o in catalog()))
if len(sys.argv) > 1:
    subgroups = subgroups[int(sys.argv[1]) :: 2]
print(",".join(subgroups))
