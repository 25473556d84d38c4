"""Vision stems: how raw pixels become regions (a grid of feature cells with their boxes).

One module per stem, registered by one line in ``model.stems.registry``; the config's ``stem`` names
one. docs/architecture.md section 2 describes each.
"""
