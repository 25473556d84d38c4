"""Query weightings: how a text query's token counts become the weights the engine is sent.

One module per weighting, one line each in ``registry.WEIGHTINGS`` (``core.registry``): the
service (``--query-weights``, the page, the OpenAPI enum) and the evaluation (``vsparta eval
--query-weights``, ``vsparta bench``) take their names and their rule from there.
"""
