"""The run-time model of a hierarchical all-reduce's stages (workload/stage_model.py) against
closed forms: ring steps one after the other, a link shared equally or in order, a NIC port
shared max-min fairly by the dimensions."""

import pytest

from roce_emu.workload.stage_model import DimTiming, run_time_s

NS = 1e-9
BYTE_A_NS = 8e9  # a link rate at which a byte takes a nanosecond


@pytest.mark.quick
def test_one_chunk_runs_its_ring_steps_one_after_the_other():
    """One chunk of 4000 bytes on a ring of 4: reduce-scatter then all-gather, 3 steps each of
    1000 wire bytes (headers: x 1.1) and a step's latency: 6 x (1100 + 500) ns."""
    timing = DimTiming((BYTE_A_NS,), (500 * NS,), wire=1.1)
    paths = [[(0, False, 4000.0), (0, True, 4000.0)]]
    for scheduler in ("baseline", "themis_fifo", "themis_scf"):
        assert run_time_s([4], paths, {(0, 0): 0, (0, 1): 1}, scheduler, timing) == pytest.approx(6 * 1600 * NS)


# chunk 0: a reduce-scatter of 1000 bytes on dimension 0 (2 ranks: one 500-byte flow), then of
# 500 on dimension 1 (a 250-byte flow); chunk 1: an all-gather of 3000 bytes on dimension 0 (a
# 1500-byte flow), ready at once in a queue of its own
PATHS = [[(0, False, 1000.0), (1, False, 500.0)], [(0, True, 3000.0)]]
TIE = {(0, 0): 0, (0, 1): 2, (1, 0): 1}
LATENCY = 1e6 * NS  # long against the transfers, so the order of the flows shows


@pytest.mark.quick
def test_a_link_is_shared_equally_by_themis_and_in_order_by_connections_and_the_baseline():
    """Chunk 0's 500-byte flow and chunk 1's 1500-byte flow start together on dimension 0.
    Shared equally, the small one is through after 1000 ns (+ latency), then chunk 0's
    250-byte flow on dimension 1: 1250 ns + 2 latencies. In order, the small one goes first,
    alone: 750 ns + 2 latencies."""
    shared = DimTiming((BYTE_A_NS, BYTE_A_NS), (LATENCY, LATENCY))
    in_order = DimTiming((BYTE_A_NS, BYTE_A_NS), (LATENCY, LATENCY), in_order=True)
    assert run_time_s([2, 2], PATHS, TIE, "themis_fifo", shared) == pytest.approx(1250 * NS + 2 * LATENCY)
    assert run_time_s([2, 2], PATHS, TIE, "themis_fifo", in_order) == pytest.approx(750 * NS + 2 * LATENCY)
    assert run_time_s([2, 2], PATHS, TIE, "baseline", shared) == pytest.approx(750 * NS + 2 * LATENCY)


@pytest.mark.quick
def test_a_shared_nic_port_is_shared_max_min_fairly():
    """Two chunks, each one stage on its own dimension of 2 ranks (1000-byte flows) at 1 byte/ns:
    apart, each takes 1000 ns; through one NIC port of the same rate, 2000 ns. Through a port of
    1.5 bytes/ns, with dimension 1 at half a byte/ns: dimension 1 gets its 0.5 and dimension 0
    the remaining 1.0 (not an equal 0.75), so a 3000-byte flow on dimension 0 takes 3000 ns, as
    alone."""
    paths = [[(0, False, 2000.0)], [(1, False, 2000.0)]]
    tie = {(0, 0): 0, (1, 0): 1}
    apart = DimTiming((BYTE_A_NS, BYTE_A_NS), (0.0, 0.0))
    assert run_time_s([2, 2], paths, tie, "themis_fifo", apart) == pytest.approx(1000 * NS)
    one_port = DimTiming((BYTE_A_NS, BYTE_A_NS), (0.0, 0.0), nic_bps=BYTE_A_NS)
    assert run_time_s([2, 2], paths, tie, "themis_fifo", one_port) == pytest.approx(2000 * NS)
    slow = DimTiming((BYTE_A_NS, BYTE_A_NS / 2), (0.0, 0.0), nic_bps=1.5 * BYTE_A_NS)
    big = [[(0, False, 6000.0)], [(1, False, 2000.0)]]
    assert run_time_s([2, 2], big[:1], {(0, 0): 0}, "themis_fifo", slow) == pytest.approx(3000 * NS)
    assert run_time_s([2, 2], big, tie, "themis_fifo", slow) == pytest.approx(3000 * NS)


@pytest.mark.quick
@pytest.mark.parametrize("in_order", [False, True])
def test_a_dispatch_queue_admits_the_next_stage_once_the_first_step_is_through(in_order):
    """Two chunks' reduce-scatters on one ring of 3 (2 steps of 1000 bytes each, 1000 ns at the
    link rate, 500 ns latency). The second chunk's first step starts when the first chunk's is
    through (1500 ns), beside the first chunk's second step: both are sent by 3500 (shared or
    one after the other) and through at 4000. The second chunk's second step waits for the
    first's (the ordered queue of that step), from 4000: through at 5500."""
    timing = DimTiming((BYTE_A_NS,), (500 * NS,), in_order=in_order)
    paths = [[(0, False, 3000.0)], [(0, False, 3000.0)]]
    assert run_time_s([3], paths, {(0, 0): 0, (1, 0): 1}, "themis_fifo", timing) == pytest.approx(5500 * NS)
