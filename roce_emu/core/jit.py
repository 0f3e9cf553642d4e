"""One place for the Numba flags every kernel uses (PySDM's single flags dict).

The event loop's kernels allocate nothing, so they run without Numba's reference
counting (``_nrt=False``): with it, every kernel taking the world pays atomic
increments and decrements on its arrays at every call.
Kernels that allocate arrays (paths, closed forms) use ``njit_alloc``.

A call from one kernel to another that LLVM does not inline passes the world by value: Numba
flattens the NamedTuple of arrays into its scalar parts, about 212 machine words (1,696 bytes
of stack arguments, pushed one by one, at every call). The event handlers on the hot path are
too big for LLVM to inline, so they are marked ``@njit(inline="always")`` (Numba inlines them
before LLVM sees them; each has one or two callers), which changes neither results nor compile
time (the gain: docs/performance.md, "Engine speed"). The port
scheduling run after every event (``port.drain_kicks``) is inlined too. ``python
benchmarks/calls.py`` lists the kernels the event loop still calls.
"""

from functools import partial

from numba import njit as _njit

JIT_FLAGS = dict(cache=True, nogil=True, error_model="numpy", fastmath=False)
njit = partial(_njit, **JIT_FLAGS, _nrt=False)
njit_alloc = partial(_njit, **JIT_FLAGS)
