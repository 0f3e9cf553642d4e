"""Deterministic PRNG whose state lives in the world (xorshift64*), and flow hashing for ECMP.

Keeping the state in an array of the world means a sliced run draws exactly the
numbers an unsliced one does.
"""

import numpy as np

from .jit import njit

_MUL = np.uint64(0x2545F4914F6CDD1D)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_GOLD = np.uint64(0x9E3779B97F4A7C15)
_S12 = np.uint64(12)
_S25 = np.uint64(25)
_S27 = np.uint64(27)
_S30 = np.uint64(30)
_S31 = np.uint64(31)
_S11 = np.uint64(11)
_TWO53 = 1.0 / 9007199254740992.0


@njit
def rand_unit(state):
    """Next float in [0, 1) from the xorshift64* generator in state[0]."""
    x = state[0]
    x ^= x >> _S12
    x ^= x << _S25
    x ^= x >> _S27
    state[0] = x
    return float((x * _MUL) >> _S11) * _TWO53


@njit
def mix64(a, b):
    """A well-mixed 64-bit hash of two non-negative integers (splitmix64 finaliser)."""
    x = np.uint64(a) ^ (np.uint64(b) * _GOLD)
    x ^= x >> _S30
    x *= _MIX1
    x ^= x >> _S27
    x *= _MIX2
    x ^= x >> _S31
    return x
