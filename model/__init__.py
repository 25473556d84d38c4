"""VisualSparta: images to weighted bags of words (offline), queries to token ids (online).

Import submodules directly. This package's ``__init__`` stays free of torch so that the query
service can use ``model.query_tokenizer`` without installing or importing it.
"""
