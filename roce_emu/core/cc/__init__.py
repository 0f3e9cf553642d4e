"""Congestion control: ``registry`` lists the algorithms (no Numba), ``dispatch`` hooks them into
the engine, ``base`` holds what they share, and each algorithm has its own module."""
