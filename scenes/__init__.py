"""Generated text-to-image benchmarks (installed as ``vsparta.scenes``).

``shapes``: coloured shapes with hard-negative variants (the fast test fixture); ``objects``:
everyday objects drawn from the Noto Color Emoji font with a long-tailed caption vocabulary.
"""
