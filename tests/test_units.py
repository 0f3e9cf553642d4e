"""roce_emu/units.py: the Python side's conversions (that every layer takes them from there, not
from a layer above it: test_layers.py)."""

import numpy as np
import pytest

from roce_emu.units import bps_to_gbps, format_ps_as_ns, gbps_to_bps, ns_to_ps, ns_to_s, ps_to_ns, ps_to_s

pytestmark = [pytest.mark.quick, pytest.mark.nojit]


def test_conversions():
    assert ns_to_ps(1.0005) == 1000 and ns_to_ps(1.0006) == 1001 and ns_to_ps(200) == 200_000
    assert gbps_to_bps(3600) == 3_600_000_000_000 and gbps_to_bps(0.1) == 100_000_000
    assert bps_to_gbps(400e9) == 400.0 and ps_to_ns(1500) == 1.5
    assert ps_to_ns(np.array([1000, 2500])).tolist() == [1.0, 2.5]
    assert ns_to_s(2e9) == 2.0 and ps_to_s(3e12) == 3.0


@pytest.mark.parametrize("ps, text", [(0, "0"), (1000, "1"), (1234, "1.234"), (5, "0.005"), (-1, "")])
def test_format_ps_as_ns_is_exact_decimal(ps, text):
    assert format_ps_as_ns(ps) == text
