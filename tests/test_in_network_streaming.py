"""Streaming in-switch reduction (network.switch.reduction: streaming, the default; core/stream.py):
a switch reduces packet by packet as they arrive, so each NPU's link carries its D up and its D
down at once. Times against closed forms (docs/in_network.md, "Streaming"), link bytes, the slot
window, a two-level tree, NVLS, store-and-forward unchanged from before streaming existed, and
determinism.

One switch, P NPUs, N packets per NPU, 100 Gb/s, link delay d, one data frame s_d and one ACK
frame s_a on the wire at the port rate. Each NPU's NIC sends its data up and the ACKs of the
result coming down; the unit of its port sends the result down and the ACKs of the data coming
up: every one of these links carries N (s_d + s_a). The first packet's trip up and down crosses
four serialisations (NIC, switch to unit, unit, switch to NPU) and two link delays, and the unit
sends the ACK of the packet it took before the result: T = 2 d + (N + 3) s_d + N s_a."""

import hashlib

import numpy as np
import pytest

from conftest import scenario, simulate
from roce_emu.api import prepare, run
from roce_emu.core.paths import ser_ps
from roce_emu.results.links import port_bytes
from test_in_network import DATA, MTU, PROP, RATE, SF, all_reduce, fred, iteration_ps, single
from test_nccl_algorithms import NVLINK, NVLINK_PS, rail

ACK = 86
S_D, S_A = ser_ps(DATA, RATE), ser_ps(ACK, RATE)
D = 2_000_000
N = D // MTU


def streaming_ps(n, d=PROP):
    """One chunk of n packets per NPU through one switch, window ample (module doc)."""
    return 2 * d + (n + 3) * S_D + n * S_A


def sent(res, a, b):
    """Wire bytes sent from node a to node b (by name), every priority."""
    fabric = res.prepared.fabric
    return int(port_bytes(res.outcome.world)[fabric.port_towards(fabric.names.index(a), fabric.names.index(b))].sum())


@pytest.mark.quick
def test_one_switch_streams_each_npu_link_carries_its_buffer_each_way_at_once():
    """One chunk: the closed form to the picosecond, and about P / (2 (P - 1)) of the ring's time:
    a little less, as the ring also pays a step's latency 2 (P - 1) times."""
    res = simulate(all_reduce(single(), nbytes=D))
    assert iteration_ps(res) == streaming_ps(N)
    for h in range(8):
        for a, b in ((f"h{h}", "sw0"), ("sw0", f"h{h}"), ("sw0", f"sw0.unit.h{h}"), (f"sw0.unit.h{h}", "sw0")):
            assert sent(res, a, b) == N * (DATA + ACK)
    ring = iteration_ps(simulate(all_reduce(single(), algorithm="ring", nbytes=D)))
    assert 0.5 < iteration_ps(res) / ring < 8 / (2 * 7)


def test_chunks_stream_too():
    """C chunks: a chunk's flow up follows the previous one once all of it arrived at the unit, so
    each boundary costs at most one link delay and two serialisations. Store-and-forward, which
    pipelines the chunks, stays slower."""
    c = 8
    one = streaming_ps(N)
    piped = iteration_ps(simulate(all_reduce(single(), nbytes=D, chunks=c)))
    assert one <= piped <= one + (c - 1) * (PROP + 2 * S_D)
    held = iteration_ps(simulate(all_reduce(single(), nbytes=D, chunks=c, network=SF)))
    assert held > piped


def test_one_slot_is_one_round_trip_per_packet():
    """reduction_slots: 1. A member sends its next packet once the result of its last one came
    back: each round trip is the way up and down (four serialisations, two delays), the unit's ACK
    of the packet before the result, and the NPU's ACK of the result before its next packet:
    T = N (2 d + 4 s_d + 2 s_a) - s_a. More slots cover more of the round trip."""
    n = 200
    net = {"switch": {"reduction_slots": 1}}
    one = iteration_ps(simulate(all_reduce(single(), nbytes=n * MTU, network=net)))
    assert one == n * (2 * PROP + 4 * S_D + 2 * S_A) - S_A
    rtt = 2 * PROP + 4 * S_D + 2 * S_A
    eight = iteration_ps(simulate(all_reduce(single(), nbytes=n * MTU, network={"switch": {"reduction_slots": 8}})))
    assert n / 8 * rtt <= eight <= n / 8 * rtt + rtt
    assert iteration_ps(simulate(all_reduce(single(), nbytes=n * MTU))) == streaming_ps(n)


@pytest.mark.parametrize("kind", ["reduce_scatter", "all_gather"])
def test_reduce_scatter_and_all_gather_stream(kind):
    """Reduce-scatter: the buffer up and the NPU's segment down at once, the segment's packets
    going down as the buffer's come up in proportion; all-gather the other way round. The busier
    direction carries N data frames and N / P ACKs: T = N s_d + N / P s_a plus one packet's trip
    (2 d + 4 s_d). One slot still finishes: the window is at least one result packet's worth."""
    res = simulate(all_reduce(single(), kind=kind, nbytes=D))
    assert iteration_ps(res) == pytest.approx(N * S_D + N // 8 * S_A + 2 * PROP + 4 * S_D, rel=0.005)
    one = simulate(all_reduce(single(), kind=kind, nbytes=D // 10, network={"switch": {"reduction_slots": 1}}))
    assert one.outcome.status == "finished"


def test_a_two_level_tree_streams_at_every_level():
    """Two leaves of four NPUs under one spine: the leaves reduce their NPUs and send one partial
    result up, packet by packet; the spine reduces the two and sends the result back down, which
    the leaves pass on as it comes. Every link on the way carries N (s_d + s_a); the first packet
    crosses four link delays and about ten serialisations."""
    topo = {"kind": "leaf_spine", "leaves": 2, "spines": 1, "hosts_per_leaf": 4}
    res = simulate(all_reduce(topo, nbytes=D))
    t = iteration_ps(res)
    line = N * (S_D + S_A) + 4 * PROP
    assert line <= t <= line + 12 * S_D
    assert sent(res, "leaf0", "spine0") == sent(res, "spine0", "leaf1") == N * (DATA + ACK)
    held = iteration_ps(simulate(all_reduce(topo, nbytes=D, network=SF)))
    assert held > 1.9 * t


def test_fred_streams_through_l1_and_l2():
    """FRED's two levels stream too: within 2 % of the NPU link's N (s_d + s_a) at its rate."""
    res = simulate(all_reduce(fred(), nbytes=D))
    line = N * ser_ps(DATA + ACK, 800 * 10**9)
    assert line < iteration_ps(res) <= 1.02 * line + 4 * 100_000 + 12 * ser_ps(DATA, 800 * 10**9)


def test_nvls_streams_the_reduce_scatter_into_the_all_gather():
    """NVLS in one node of 4 GPUs: each GPU sends its buffer up, gets its reduced slice back and
    sends that up again as it comes, and gets the multicast of all slices: its NVLink carries
    (1 + 1/g) N data frames and as many ACKs each way at once, in place of four steps one after
    the other; the first packet crosses four NVLink delays (up and down, twice)."""
    collective = {"name": "c", "kind": "all_reduce", "algorithm": "nvls", "bytes": 8_000_000}
    res = simulate(scenario(topology=rail(1), workload={"collectives": [collective]}))
    n = 8000
    line = (n + n // 4) * ser_ps(DATA + ACK, NVLINK)
    assert line < iteration_ps(res) <= line + 4 * NVLINK_PS + 12 * ser_ps(DATA, NVLINK)
    held = simulate(scenario(topology=rail(1), network=SF, workload={"collectives": [collective]}))
    assert iteration_ps(held) > 1.5 * iteration_ps(res)
    assert sent(res, "gpu1", "nvs0") == (n + n // 4) * (DATA + ACK)


# iteration (ps) and a digest of every flow's completion time and bytes, measured with the
# store-and-forward model before streaming existed (the same cases, no reduction key)
BEFORE_STREAMING = {
    "single_all_reduce": [118545120, "6db2cc294873eebe"],
    "single_reduce_scatter": [95370080, "c59d02de28017c85"],
    "single_all_gather": [95370080, "224df7c9f3cf6dc2"],
    "fred_all_reduce": [34182753, "3431f6a04d12fb45"],
    "nvls": [10542455, "822fe4ea5df9bada"],
    "nvls_tree": [23949348, "13bc41899c0a0e19"],
    "allreduce_in_network.yaml": [1754017120, "cfe6ca147f02518e"],
}


def _figures(res):
    t = res.flow_table
    digest = hashlib.sha256(np.ascontiguousarray(t["fct_ps"]).tobytes() + np.ascontiguousarray(t["bytes"]).tobytes())
    return [int(round(res.summary["iteration_ns"][0] * 1000)), digest.hexdigest()[:16]]


def test_store_and_forward_is_unchanged_to_the_picosecond():
    # recorded with a queue pair per flow: nvls_tree's tree among the heads posts on connections
    network = {**SF, "nic": {"queue_pair": "flow"}}

    def case(topology, algorithm, kind="all_reduce", nbytes=1_000_000, chunks=4):
        collective = {"name": "c", "kind": kind, "algorithm": algorithm, "bytes": nbytes, "chunks": chunks}
        return scenario(topology=topology, network=network, workload={"collectives": [collective]})

    cases = {
        "single_all_reduce": case(single(), "in_network"),
        "single_reduce_scatter": case(single(), "in_network", "reduce_scatter"),
        "single_all_gather": case(single(), "in_network", "all_gather"),
        "fred_all_reduce": case(fred(), "in_network", nbytes=2_000_000, chunks=3),
        "nvls": case(rail(1), "nvls", nbytes=2_000_000, chunks=2),
        "nvls_tree": case(rail(2), "nvls_tree", nbytes=2_000_000, chunks=2),
    }
    for name, sc in cases.items():
        assert _figures(simulate(sc)) == BEFORE_STREAMING[name], name
    shipped = prepare("scenarios/allreduce_in_network.yaml", ["network.switch.reduction=store_and_forward"])
    assert _figures(run(shipped, write=False, progress=False)) == BEFORE_STREAMING["allreduce_in_network.yaml"]


def test_streaming_is_deterministic_and_no_fast_forward_changes_it():
    """The same run twice, sliced finely, and under every sim.fast_forward mode (none applies to a
    streaming reduction: each runs the exact engine and says so) gives the same flows."""
    sc = all_reduce(fred(), nbytes=400_000, chunks=3)
    a = simulate(sc)
    b = simulate(sc, slice_events=3_000)
    assert np.array_equal(a.flow_table["fct_ps"], b.flow_table["fct_ps"])
    for mode in ("exact", "trains", "memo"):
        other = simulate(all_reduce(fred(), nbytes=400_000, chunks=3, sim={"fast_forward": mode}))
        assert np.array_equal(a.flow_table["fct_ps"], other.flow_table["fct_ps"]), mode
        assert any("reduce packet by packet" in w for w in other.summary["warnings"]), mode


def test_irn_streams_and_resends_what_a_lossy_link_loses():
    """network.transport: irn (no PFC) under a streaming reduction on 4 NPUs. Without loss it takes
    go-back-N's time to the picosecond. With an NPU's uplink and another's downlink losing 2 %, it
    finishes, resending each lost packet once, sooner than go-back-N. With one slot a member has one
    packet in flight, so only a timeout finds a loss (a resend is not held back by the gates, which
    count new packets): each lost packet costs IRN's RTO_low (100 us), within a round trip, where
    go-back-N waits its rto_ns (1 ms)."""
    lossy = [
        {"kind": "lossy_port", "port": ["h1", "sw0"], "loss": 0.02},
        {"kind": "lossy_port", "port": ["sw0", "h2"], "loss": 0.02},
    ]

    def run(transport, slots=None, faults=()):
        net = {"transport": transport, **({"switch": {"reduction_slots": slots}} if slots else {})}
        res = simulate(all_reduce(single(4), nbytes=200 * MTU, network=net, faults=list(faults)))
        assert res.summary["flows_finished"] == res.summary["flows"] == 8
        return res

    rtt = 2 * PROP + 4 * S_D + 2 * S_A
    for slots in (None, 1):
        clean = iteration_ps(run("irn", slots))
        assert clean == iteration_ps(run("go_back_n", slots))
        irn, gbn = run("irn", slots, lossy), run("go_back_n", slots, lossy)
        lost = irn.summary["data_packets_lost_on_links"]
        assert lost > 0 and irn.summary["retransmits"] == lost
        assert iteration_ps(irn) < iteration_ps(gbn)
        if slots == 1:
            assert irn.summary["timeouts"] == lost
            assert lost * (100_000_000 - rtt) <= iteration_ps(irn) - clean <= lost * 100_000_000
            gbn_lost = gbn.summary["data_packets_lost_on_links"]
            assert gbn_lost * (1_000_000_000 - rtt) <= iteration_ps(gbn) - clean <= gbn_lost * 1_000_000_000
