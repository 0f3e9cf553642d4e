"""The kernels' compile flags (roce_emu/core/jit.py): a kernel taking the world has no CPython
wrapper unless it is an entry point, and a call from Python to one without is refused cleanly."""

import numba
import pytest

from roce_emu.core import fastforward, loop, memo, nic
from roce_emu.core.jit import InnerKernel

pytestmark = [
    pytest.mark.quick,
    pytest.mark.skipif(numba.config.DISABLE_JIT, reason="without the JIT the kernels are Python functions"),
]


def test_the_entry_points_the_driver_calls_keep_their_wrappers():
    for kernel in (loop.advance, loop.schedule_start, fastforward.advance_ff, memo.advance_memo):
        assert not isinstance(kernel, InnerKernel), kernel.py_func.__qualname__


def test_an_inner_kernel_called_from_python_raises_instead_of_crashing():
    assert isinstance(nic.flow_start, InnerKernel)
    with pytest.raises(TypeError, match=r"roce_emu\.core\.nic\.flow_start .*@njit\(entry=True\)"):
        nic.flow_start(None, 0, 0)
