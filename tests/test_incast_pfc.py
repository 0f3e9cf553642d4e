"""N-to-1 incast: line-rate drain time, lossless with PFC, drops and recovery without it."""

import numpy as np
import pytest

from conftest import assert_conservation, scenario, simulate
from roce_emu.api import prepare_scenario
from roce_emu.core import kinds as K
from roce_emu.core.loop import advance
from roce_emu.core.paths import ser_ps

pytestmark = pytest.mark.quick

RATE = 100 * 10**9
PROP = 1_000_000  # ps


def incast(n_senders=8, size=2_000_000, buffer=4 * 1024 * 1024, pfc=True):
    return scenario(
        topology={"kind": "single_switch", "hosts": n_senders + 1},
        network={"switch": {"buffer_bytes": buffer, "pfc": {"enabled": pfc}}},
        workload={"flows": [{"src": s, "dst": 0, "bytes": size} for s in range(1, n_senders + 1)]},
    )


def test_incast_completes_at_bottleneck_drain_time():
    n_senders, size = 8, 2_000_000
    res = simulate(incast(n_senders, size))
    n_pkts = size // 1000
    s = ser_ps(1082, RATE)
    a = ser_ps(86, RATE)
    # the bottleneck starts when the first packet is in the switch and then never idles;
    # the last packet reaches the receiver, and its ACK comes back over two links
    drain = n_senders * n_pkts * s
    predicted = (s + PROP) + drain + PROP + 2 * (a + PROP)
    last_ps = max(int(round(float(r["finish_ns"]) * 1000)) for r in res.rows)
    assert predicted <= last_ps <= predicted + 200_000, (last_ps, predicted)
    summary = res.summary
    assert summary["data_packets_dropped"] == 0
    assert summary["pfc_pauses_sent"] > 0, "a 4 MiB buffer under 8:1 incast must trigger PFC"
    assert summary["max_switch_buffer_bytes"] <= 4 * 1024 * 1024


def test_incast_without_pfc_drops_and_recovers():
    res = simulate(incast(8, 500_000, buffer=200_000, pfc=False))
    summary = res.summary
    assert summary["data_packets_dropped"] > 0
    assert summary["retransmits"] > 0
    assert summary["flows_finished"] == 8
    assert summary["max_switch_buffer_bytes"] <= 200_000
    assert all(r["fct_ns"] for r in res.rows)


def test_buffer_never_exceeded_with_pfc_under_heavy_incast():
    res = simulate(incast(15, 1_000_000, buffer=1_000_000, pfc=True))
    assert res.summary["data_packets_dropped"] == 0
    assert res.summary["max_switch_buffer_bytes"] <= 1_000_000
    assert res.summary["buffer_overflows"] == 0


def test_pause_reaches_upstream_port_and_stops_it():
    prepared = prepare_scenario(incast(8, 2_000_000))
    w = prepared.world
    host_ports = [p for p in range(len(w.port)) if w.port[p]["at_host"] and w.port[p]["node"] != 0]
    step = 200_000  # ps
    t = 0
    seen_paused = 0
    while advance(w, t, 1 << 30) != K.ST_IDLE and t < 3 * 10**9:
        assert_conservation(w)
        for p in host_ports:
            if w.pq[p, 3]["paused"]:
                # a paused sender may finish the frame on the wire but starts no new data
                before = int(w.port[p]["tx_data_pkts"]) + int(w.port[p]["busy"])
                advance(w, t + 150_000, 1 << 30)
                if w.pq[p, 3]["paused"]:
                    assert int(w.port[p]["tx_data_pkts"]) <= before
                    seen_paused += 1
        t += step
    assert seen_paused > 0, "no sender port was ever seen paused"
    assert int(w.stats[K.C_FLOWS_DONE]) == 8


def test_switch_pauses_carry_the_data_priority():
    res = simulate(incast(8, 1_000_000))
    w = res.outcome.world
    switch_ports = np.flatnonzero(w.port["at_host"] == 0)
    assert w.port["pauses_sent"][switch_ports].sum() == res.summary["pfc_pauses_sent"] > 0
    assert res.summary["pfc_resumes_sent"] > 0


def test_a_flow_joining_three_is_paused_until_its_first_packets_cross_the_queue():
    """PFC alone, three line-rate flows into one port, a fourth joining at 300 us (docs/model.md
    §5.6): the closed forms of the MMU's dynamic threshold give when each ingress is paused, and
    the joiner stays paused until its first packets, queued behind 2 x 300 us of line rate, leave.
    The HPCC ns-3 simulator gives 355.4 us, 522.3 us and 910.5 us on the same inputs."""
    flows = [{"src": s, "dst": 0, "bytes": 16_000_000} for s in (1, 2, 3)]
    flows.append({"src": 4, "dst": 0, "bytes": 8_000_000, "start_ns": 300_000})
    res = simulate(
        scenario(
            topology={"kind": "single_switch", "hosts": 5},
            network={"profile": "hpcc_ns3", "cc": {"algorithm": "none"}},
            workload={"flows": flows},
            output={"traces": ["pfc"]},
        )
    )
    w, trace = res.outcome.world, res.outcome.trace
    pfc = trace[trace[:, 1] == K.TR_PFC]
    nic = {int(w.port["node"][p]): p for p in range(len(w.port)) if w.port["at_host"][p]}

    def times_us(host, pause):
        rows = pfc[(pfc[:, 2] == nic[host]) & (pfc[:, 4] == pause)]
        return rows[:, 0] / 1e6

    c = RATE / 8 / 1e6  # bytes per us
    shared = 32 * 2**20 - 5 * 3 * RATE * PROP // (8 * 10**12) - 5 * 4096  # buffer less headroom and reserves
    # an old ingress gains 2C/3 (its third of the head leaves), the joiner C from 300 us; old ones
    # pause at thr = (shared - used) / 8, the joiner at thr = shared / 12 once all four hold thr
    old_pause = (shared + 300 * c) / (25 * c / 3)
    join_pause = 300 + shared / 12 / c
    for host in (1, 2, 3):
        assert times_us(host, 1)[0] == pytest.approx(old_pause, rel=0.01)
    assert times_us(4, 1)[0] == pytest.approx(join_pause, rel=0.01)
    # the joiner's first packets leave after the queue of 2C x 300 us ahead of them (600 us), then
    # a quarter of the port drains its headroom and the resume offset
    resumed = times_us(4, 0)[0]
    assert 900 <= resumed <= 920
