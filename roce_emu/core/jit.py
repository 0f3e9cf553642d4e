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

Numba gives every compiled function a CPython wrapper (and a C one) so Python can call it. For a
kernel taking the world the wrapper unboxes its NamedTuple of arrays, and building those wrappers
was 25 % of a cold compile (cProfile: 48 of 191 s for the engine). A kernel whose first parameter is
the world ``w`` is therefore compiled without them (``InnerKernel``) unless it is marked
``@njit(entry=True)``: the entry points the Python side calls (``loop.advance`` ...) and the few
kernels the tests drive one by one (docs/performance.md, "Engine speed": the engine then compiles
in half the time). Calling an inner kernel from Python raises TypeError naming the mark it needs.
"""

from numba import njit as _njit
from numba.core.registry import CPUDispatcher

JIT_FLAGS = dict(cache=True, nogil=True, error_model="numpy", fastmath=False)
#: what a kernel that only other kernels call is compiled without (``InnerKernel``)
NO_WRAPPERS = dict(no_cpython_wrapper=True, no_cfunc_wrapper=True)


class InnerKernel(CPUDispatcher):
    """A kernel taking the world that only other kernels call: it has no CPython wrapper, so a
    call from Python would jump to address 0; this refuses it instead."""

    def __call__(self, *args, **kwargs):
        raise TypeError(
            f"{self.py_func.__module__}.{self.py_func.__qualname__} takes the world and is compiled for "
            "other kernels only; mark it @njit(entry=True) (roce_emu/core/jit.py) to call it from Python"
        )


def _takes_the_world(fn) -> bool:
    """Whether fn's first parameter is the world ``w``."""
    code = fn.__code__
    return code.co_argcount > 0 and code.co_varnames[0] == "w"


def _decorator(**flags):
    """``njit``'s or ``njit_alloc``'s decorator: flags, the caller's options, and ``entry``."""

    def decorate(fn=None, *, entry=False, **options):
        def jit(f):
            inner = not entry and _takes_the_world(f)
            kernel = _njit(**flags, **(NO_WRAPPERS if inner else {}), **options)(f)
            if inner and isinstance(kernel, CPUDispatcher):  # a plain function with NUMBA_DISABLE_JIT=1
                kernel.__class__ = InnerKernel
            return kernel

        return jit if fn is None else jit(fn)

    return decorate


njit = _decorator(**JIT_FLAGS, _nrt=False)
njit_alloc = _decorator(**JIT_FLAGS)
