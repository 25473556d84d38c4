"""Benchmarks: our engines against peers and the paper, printed as tables and plotted."""
