"""Coalesced ACKs (network.nic.ack_every_packets): a receiver acknowledges every N in-order
packets, and always a flow's last packet and a mark it echoes.

Checked against what can be derived: a lone flow's data and last ACK do not depend on the ACKs
before it, the number of ACKs is a count of multiples, the exact fast-forward stays exact (and
trains close), and fewer ACKs leave a ring more of its links."""

from pathlib import Path

import numpy as np
import pytest

from conftest import scenario, simulate
from roce_emu.config import load_scenario
from roce_emu.core.kinds import CFG_ACK_EVERY
from roce_emu.core.nic import _acks_due
from roce_emu.core.trains import _train_acks
from roce_emu.core.state import PKT_DTYPE
from roce_emu.errors import ScenarioError
from test_fast_forward import _prepared, _results, assert_identical

pytestmark = pytest.mark.quick

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
ONE_SWITCH = {"kind": "single_switch", "hosts": 2, "link": {"rate_gbps": 100, "delay_ns": 1000}}


def _lone_flow(every: int):
    sc = scenario(
        network={"nic": {"ack_every_packets": every}},
        topology=ONE_SWITCH,
        workload={"flows": [{"src": 0, "dst": 1, "bytes": 102_500}]},  # 103 packets, the last of 500 B
    )
    return simulate(sc)


@pytest.mark.parametrize("every", [4, 7, 200])
def test_a_lone_flow_keeps_its_timing_with_fewer_acks(every):
    """Nothing shares the lone flow's path, so its data arrives as with one ACK per packet, and
    its last packet is acknowledged at once: receiver and sender finish at the same picosecond.
    The ACKs are one per multiple of N passed, plus the last packet's (103 is no multiple)."""
    base, res = _lone_flow(1), _lone_flow(every)
    for field in ("task", "flow"):
        assert getattr(res.outcome.world, field)["finish_ps"][0] == getattr(base.outcome.world, field)["finish_ps"][0]
    assert base.summary["acks_sent"] == 103
    assert res.summary["acks_sent"] == 103 // every + 1
    assert res.summary["events"] < base.summary["events"]


def _python(kernel):
    """The plain-Python function of a jitted kernel (itself when NUMBA_DISABLE_JIT=1), so that it can
    be called with stand-ins for the World arrays."""
    return getattr(kernel, "py_func", kernel)


@pytest.mark.nojit
def test_acks_are_due_at_multiples_at_the_end_and_for_marks():
    class W:  # the one World array the rule reads: an ACK every four packets
        cfg = {CFG_ACK_EVERY: 4}

    due = _python(_acks_due)
    assert [due(W, k, k + 1, 10, 0) for k in range(10)] == [0, 0, 0, 1, 0, 0, 0, 1, 0, 1]
    assert due(W, 0, 9, 10, 0) == 2  # a train of nine passes 4 and 8
    assert due(W, 4, 5, 10, 1) == 1  # a mark to echo: at once


@pytest.mark.nojit
def test_a_trains_acks_are_the_packets_exact_acks():
    """The ACKs an ACK train stands for (trains._train_acks): as many as the receiver owes the
    train's packets one by one (_acks_due), at the first and last of the packets it answers;
    a train that passes no multiple is taken at its last packet."""
    train_acks, due = _python(_train_acks), _python(_acks_due)

    class W:  # the World arrays _train_acks reads
        cfg = {CFG_ACK_EVERY: 1}
        pkt = np.zeros(1, PKT_DTYPE)

    for every in (1, 2, 3, 4, 7):
        W.cfg[CFG_ACK_EVERY] = every
        for seq in range(0, 20):
            for n in range(2, 30):
                W.pkt[0]["seq"], W.pkt[0]["train_len"] = seq, n
                answered = [i for i in range(n) if due(W, seq + i, seq + i + 1, 10**6, 0) > 0]
                m, first, last = train_acks(W, 0)
                if answered:
                    assert (m, first, last) == (len(answered), answered[0], answered[-1])
                else:
                    assert (m, first, last) == (1, n - 1, n - 1)


def test_coalesced_acks_with_fast_forward():
    """A ring all-reduce on a k=4 fat-tree with an ACK every four packets: the exact
    fast-forward gives the same flows, tasks, collectives and summary; `on` sends trains,
    answered by ACK trains of an ACK per four packets, and stays within 0.5 % of the exact
    engine's time (measured +0.06 % with 2 MB)."""
    sc = scenario(
        network={"nic": {"ack_every_packets": 4}},
        topology={"kind": "fat_tree", "k": 4, "link": {"rate_gbps": 100, "delay_ns": 1000}},
        workload={"collectives": [{"kind": "all_reduce", "algorithm": "ring", "bytes": 4_000_000}]},
    )
    off, summary_off = _results(_prepared(sc, None, (), "off"))
    fast, summary = _results(_prepared(sc, None, (), "exact"))
    assert_identical(off, fast)
    assert summary["approximate"] is False
    _, summary = _results(_prepared(sc, None, (), "trains"))
    assert summary["trains_sent"] > 0 and summary["acks_sent"] == summary_off["acks_sent"]
    assert abs(summary["last_finish_ns"] / summary_off["last_finish_ns"] - 1) < 0.005


def test_fewer_acks_leave_a_ring_more_of_its_links():
    """Sixteen ranks on one switch, 200 KB steps: each link into a rank carries its data and the
    ACKs of the data it sends. With an ACK every eight packets the ring is faster, and no
    faster than its data alone at line rate allows."""
    times = {}
    for every in (1, 8):
        sc = scenario(
            network={"nic": {"ack_every_packets": every}},
            topology={"kind": "single_switch", "hosts": 16, "link": {"rate_gbps": 200, "delay_ns": 1000}},
            workload={"collectives": [{"kind": "all_reduce", "algorithm": "ring", "bytes": 16 * 204_800}]},
        )
        times[every] = simulate(sc).summary["last_finish_ns"]
    frames = 2 * 15 * 205  # steps x packets of a 204,800-byte step (the last of 800 B)
    line_ns = frames * (1000 + 62 + 20) * 8 / 200  # every frame full: a bound from below
    assert line_ns * 0.99 < times[8] < times[1]


def test_a_bad_ack_interval_names_the_file_the_key_and_the_bound():
    with pytest.raises(ScenarioError) as err:
        load_scenario(SCENARIOS / "incast.yaml", ["network.nic.ack_every_packets=0"])
    assert str(err.value) == (
        f"{SCENARIOS / 'incast.yaml'}: network.nic.ack_every_packets: 0 is not allowed: "
        "Input should be greater than or equal to 1"
    )
