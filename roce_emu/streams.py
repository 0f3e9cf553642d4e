"""The scenario seed's random streams, one source of truth: each random choice the workload, the fabric and
the world make draws from its own NumPy SeedSequence spawn key, so that adding a draw in one
place leaves every other draw as it was. The keys are named here; a new one takes a new first
number.

- ``(PATTERNS,)``: the traffic patterns but Poisson (workload/__init__.py);
- ``(HASHES,)``: the flows' ECMP hashes; ``(HASHES, i)``: Poisson pattern i's own draws;
- ``(ENGINE,)``: the engine's per-packet draws (ECN marks, losses, jitter; run/world.py);
  ``(ENGINE, layer)``: a MoE layer's expert popularity (workload/moe.py);
- ``(JOB, crc32(name))``: a job's own streams (workload/jobs.py);
- ``(STRAGGLER_FRACTION, i)``, ``(COMPUTE_JITTER,)``: workload/stragglers.py;
- ``(ARRIVALS,)``: inference requests' arrivals (workload/inference.py);
- ``(SLOW_LINK_FRACTION, i)``: the links fault i slows (fabric/faults.py).
"""

import numpy as np

PATTERNS, HASHES, ENGINE, JOB, STRAGGLER_FRACTION, COMPUTE_JITTER, ARRIVALS, SLOW_LINK_FRACTION = 1, 2, 3, 4, 5, 6, 7, 8


def sequence(seed: int, *key: int) -> np.random.SeedSequence:
    """The seed sequence of stream ``key`` of ``seed``."""
    return np.random.SeedSequence(seed, spawn_key=key)


def rng(seed: int, *key: int) -> np.random.Generator:
    """A generator drawing stream ``key`` of ``seed``."""
    return np.random.default_rng(sequence(seed, *key))
