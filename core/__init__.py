"""The ground floor: what every other package needs and that needs nothing of theirs.

File walking and its order (``walk``), image files decoded to RGB (``images``), JSONL and dataset
manifests (``manifest``, ``karpathy``), document ids (``ids``), the user's mistake as one sentence
(``errors``) and progress bars (``progress``). No module here imports torch, a client library or
another project package: ``tests/test_import_floors.py`` holds every package to its floor.
"""
