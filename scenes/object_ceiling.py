"""The ambiguity ceiling of an object-scene pool: Recall@1 of a perfect object detector.

Why: a caption such as "two dogs" fits every image of the pool that shows two dogs, so no model can
put its own image first every time; recall is only meaningful next to what a perfect reader of
the pictures would reach. The perfect detector knows every image's objects (``metadata.objects``)
and which objects each caption names, with their counts (``metadata.mentions``, written by the
generator). For a caption it ranks first, in random order, the images that show exactly the
caption's objects (those kinds with those counts, nothing else); then the images that show at
least them; then the rest. Its expected R@1 is 1/|first tier| when the caption's own image is in
the first tier, 0 when it is behind a non-empty first tier (the caption named only some of its
objects and other images show exactly those), else 1/|second tier|. It reads nothing else of a
caption (sizes, places, the background), so a model that does may pass it.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np


def _objects(record: Any) -> Counter[str]:
    return Counter(o["name"] for o in record.metadata.get("objects", []))


def perfect_detector_recall(records: Sequence[Any]) -> float | None:
    """Expected R@1 in % of the perfect detector over every caption of ``records`` (one pool);
    None when the scenes carry no caption mentions (made before they were recorded)."""
    if any("mentions" not in r.metadata for r in records):
        return None
    shown = [_objects(r) for r in records]
    exact: dict[frozenset[tuple[str, int]], int] = defaultdict(int)
    for objects in shown:
        exact[frozenset(objects.items())] += 1
    names = sorted({n for objects in shown for n in objects})
    column = {n: i for i, n in enumerate(names)}
    counts = np.zeros((len(records), len(names)), dtype=np.int16)  # [images, kinds]
    for i, objects in enumerate(shown):
        for name, count in objects.items():
            counts[i, column[name]] = count
    recalls = []
    for i, record in enumerate(records):
        mentions = record.metadata.get("mentions")
        if mentions is None or len(mentions) != len(record.captions):
            return None
        for named in mentions:
            wanted = {m["name"]: int(m["count"]) for m in named}
            first = exact.get(frozenset(wanted.items()), 0)
            if wanted == dict(shown[i]):
                recalls.append(1.0 / first)
            elif first:
                recalls.append(0.0)
            else:
                fits = np.ones(len(records), dtype=bool)
                for name, count in wanted.items():
                    fits &= counts[:, column[name]] == count if name in column else False
                recalls.append(1.0 / max(1, int(fits.sum())))
    return 100.0 * float(np.mean(recalls)) if recalls else None
