"""One place for the Numba flags every kernel uses (PySDM's single flags dict)."""
from functools import partial

from numba import njit as _njit

JIT_FLAGS = dict(cache=True, nogil=True, error_model="numpy", fastmath=False)
njit = partial(_njit, **JIT_FLAGS)
