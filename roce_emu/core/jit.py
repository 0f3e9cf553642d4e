"""One place for the Numba flags every kernel uses (PySDM's single flags dict).

The event loop's kernels allocate nothing, so they run without Numba's reference
counting (``_nrt=False``): with it, every kernel taking the world paid atomic
increments and decrements on its arrays, measured at about a third of the run time.
Kernels that allocate arrays (paths, closed forms) use ``njit_alloc``.
"""

from functools import partial

from numba import njit as _njit

JIT_FLAGS = dict(cache=True, nogil=True, error_model="numpy", fastmath=False)
njit = partial(_njit, **JIT_FLAGS, _nrt=False)
njit_alloc = partial(_njit, **JIT_FLAGS)
