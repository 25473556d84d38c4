"""VisualSparta: images to weighted bags of words (offline), queries to token ids (online).

Import submodules directly. The package holds two kinds of module, and the line between them is
a rule with a test (``tests/test_torch_free.py``): the modules in ``TORCH_FREE`` never import
torch or transformers, because the query service and the indexer's decode workers import them
and must stay small and fast to start. Everything else here (modeling, training, encoding,
evaluation) needs torch. File and image I/O, ids, errors and progress bars are not the model's:
they live on the ground floor, ``vsparta.core`` (torch-free as a whole).
"""

TORCH_FREE = (
    "config_parts",
    "metrics",
    "preprocess",
    "query_tokenizer",
    "resolve",
)
