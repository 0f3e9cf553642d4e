"""In-network collectives (algorithm: in_network): traffic, store-and-forward timing against the
alpha-beta model derived in docs/in_network.md, trees over two levels, bounded reduction state,
PFC, determinism and bad input. Streaming reduction: tests/test_in_network_streaming.py."""

import numpy as np
import pytest

from conftest import scenario, simulate
from roce_emu.api import prepare_scenario
from roce_emu.config.schema import Scenario
from roce_emu.core.paths import ser_ps
from roce_emu.errors import ScenarioError
from roce_emu.run.inputs import check_inputs

MTU, DATA, ACK = 1000, 1082, 86  # payload, data frame and ACK frame on the wire (bytes)
RATE = 100 * 10**9
PROP = 1_000_000  # ps: the default link delay
D = 8_000_000
SF = {"switch": {"reduction": "store_and_forward"}}  # network section: whole chunks at a time


def all_reduce(topology, algorithm="in_network", nbytes=D, chunks=1, kind="all_reduce", network=None, **extra):
    sections = dict(
        topology=topology,
        workload={
            "collectives": [{"name": "c", "kind": kind, "algorithm": algorithm, "bytes": nbytes, "chunks": chunks}]
        },
        **extra,
    )
    if network:
        sections["network"] = network
    return scenario(**sections)


def single(hosts=8):
    return {"kind": "single_switch", "hosts": hosts}


def step_ps(payload, with_acks):
    """alpha + S tau for one hop of the tree: the sender's serialisation of every frame at the
    port rate, one propagation (the unit's internal link has none) and the last frame's
    serialisation on the second link. With ACKs, each link also carries the ACKs of the data
    going the other way, as the up and down directions overlap."""
    tau = (DATA + (ACK if with_acks else 0)) * 8e12 / RATE / MTU
    return ser_ps(DATA, RATE) + PROP + payload * tau


def iteration_ps(res):
    assert res.outcome.status == "finished"
    return res.summary["iteration_ns"][0] * 1000


@pytest.mark.quick
def test_each_npu_moves_the_buffer_once_up_and_once_down():
    """An in-network all-reduce of D bytes moves D bytes up and D bytes down per NPU, about half
    of what a ring moves (2 (p - 1) / p D each way)."""
    res = simulate(all_reduce(single(), chunks=4))
    t = res.flow_table
    for npu in range(8):
        assert t["bytes"][t["src"] == npu].sum() == D
        assert t["bytes"][t["dst"] == npu].sum() == D
    ring = simulate(all_reduce(single(), algorithm="ring")).flow_table
    assert ring["bytes"][ring["src"] == 0].sum() == 2 * 7 * D // 8


def test_single_switch_time_matches_alpha_beta():
    """One chunk: up, then down, each one step with no ACKs against the data. C chunks pipeline:
    the first chunk's way up and the last one's way down alone, C - 1 steps in between with
    both directions busy."""
    one = iteration_ps(simulate(all_reduce(single(), network=SF)))
    assert one == pytest.approx(2 * step_ps(D, False), rel=0.02)
    c = 8
    piped = iteration_ps(simulate(all_reduce(single(), chunks=c, network=SF)))
    s = D / c
    assert piped == pytest.approx(2 * step_ps(s, False) + (c - 1) * step_ps(s, True), rel=0.02)
    ring = iteration_ps(simulate(all_reduce(single(), algorithm="ring", chunks=c)))
    assert ring / piped > 1.5  # 2 (p - 1) / p = 1.75 times the bytes, less the pipeline's fill


@pytest.mark.parametrize("kind, up, down", [("reduce_scatter", D, D // 8), ("all_gather", D // 8, D)])
def test_reduce_scatter_and_all_gather_move_their_parts(kind, up, down):
    """Reduce-scatter sends the whole buffer up and each rank's segment down; all-gather each
    rank's segment up and the whole buffer down (store-and-forward: one after the other)."""
    res = simulate(all_reduce(single(), kind=kind, network=SF))
    t = res.flow_table
    assert t["bytes"][t["src"] == 3].sum() == up
    assert t["bytes"][t["dst"] == 3].sum() == down
    assert iteration_ps(res) == pytest.approx(step_ps(up, False) + step_ps(down, False), rel=0.02)


def fred(uplink=3000.0):
    return {
        "kind": "fred",
        "npus": 20,
        "group_size": 4,
        "npu_rate_gbps": 800.0,
        "uplink_rate_gbps": uplink,
        "link": {"delay_ns": 100},
    }


def test_two_levels_send_one_partial_result_per_l1_switch():
    """On FRED, each L1 switch reduces its group and sends one partial result per chunk to the L2
    switch, which sends one result back to each L1 switch; the NPUs only talk to their L1."""
    chunks = 3
    prepared = prepare_scenario(all_reduce(fred(), chunks=chunks))
    fabric = prepared.fabric
    names = np.array(fabric.names)
    res = simulate(all_reduce(fred(), chunks=chunks))
    t = res.flow_table
    src, dst = names[t["src"]], names[t["dst"]]
    up = np.char.startswith(src, "l1.") & np.char.startswith(dst, "l2.unit.")
    down = np.char.startswith(src, "l2.unit.") & np.char.startswith(dst, "l1.")
    assert up.sum() == down.sum() == 5 * chunks
    assert set(t["bytes"][up]) == {D // chunks, D // chunks + 1} or set(t["bytes"][up]) == {D // chunks}
    for npu in range(20):  # every NPU's flows end at a unit of its own L1 switch
        mine = t["src"] == npu
        assert all(d.startswith(f"l1.{npu // 4}.unit.h{npu}") for d in names[t["dst"][mine]])


def test_chunks_spread_over_the_spines():
    """Across leaves, chunk c's root is spine c mod the number of spines."""
    topo = {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2}
    res = simulate(all_reduce(topo, chunks=4, nbytes=400_000))
    names = np.array(prepare_scenario(all_reduce(topo, chunks=4, nbytes=400_000)).fabric.names)
    dst = names[res.flow_table["dst"]]
    assert (np.char.startswith(dst, "spine0.unit.")).sum() == (np.char.startswith(dst, "spine1.unit.")).sum() == 4


def test_full_reduction_slots_hold_the_senders():
    """With one slot, a switch holds one chunk: the next chunk waits at the NPUs until the
    result went down, so nothing pipelines and the time is that of one chunk, C times."""
    c = 4
    net = {"switch": {"reduction": "store_and_forward", "reduction_slots": 1}}
    held = iteration_ps(simulate(all_reduce(single(), chunks=c, network=net)))
    assert held == pytest.approx(c * 2 * step_ps(D / c, False), rel=0.02)
    free = iteration_ps(simulate(all_reduce(single(), chunks=c, network=SF)))
    assert held > 1.3 * free


def test_pfc_applies_and_runs_are_deterministic_however_sliced():
    """An incast onto host 0 beside an in-network all-reduce with a small switch buffer: PFC
    pauses the reduction's traffic too, and the run gives the same result sliced or not."""
    sc = scenario(
        topology=single(),
        network={"switch": {"buffer_bytes": 600_000}},
        workload={
            "flows": [{"src": h, "dst": 0, "bytes": 2_000_000} for h in range(1, 8)],
            "collectives": [
                {"name": "c", "kind": "all_reduce", "algorithm": "in_network", "bytes": 2_000_000, "chunks": 8}
            ],
        },
    )
    a = simulate(sc)
    b = simulate(sc, slice_events=5_000)
    assert a.outcome.status == "finished" and a.summary["pfc_pauses_sent"] > 0
    assert np.array_equal(a.flow_table["fct_ps"], b.flow_table["fct_ps"])
    assert a.summary["iteration_ns"] == b.summary["iteration_ns"]


def test_a_reduction_that_cannot_complete_is_reported():
    """A host's only link goes down for good: its chunks never reach the switch. The run ends as
    stalled, naming the stuck flows by their nodes (units included), rather than waiting forever."""
    sc = all_reduce(single(4), nbytes=400_000, faults=[{"kind": "link_down", "link": ["h0", "sw0"], "at_ns": 0}])
    res = simulate(sc)
    assert res.outcome.status == "stalled" and res.summary["iterations_finished"] == 0
    assert "(h0->sw0.unit.h0, 0/400 packets acked, no live path)" in res.outcome.reason


@pytest.mark.quick
@pytest.mark.parametrize(
    "topology",
    [
        {"kind": "torus", "dims": [2, 2]},
        {"kind": "mesh", "dims": [2, 2]},
        {"kind": "multi_dim", "dims": [{"kind": "ring", "size": 4}]},
    ],
)
def test_fabrics_without_a_tree_of_switches_refuse_in_network(topology):
    sc = Scenario.model_validate(
        {
            "name": "t",
            "topology": topology,
            "workload": {
                "collectives": [{"name": "c", "kind": "all_reduce", "algorithm": "in_network", "bytes": 1000}]
            },
        }
    )
    with pytest.raises(ScenarioError) as e:
        check_inputs(sc, "s.yaml")
    line = str(e.value)
    assert "\n" not in line and "workload.collectives.0.algorithm" in line and "single_switch" in line


def test_fast_forward_exact_is_identical_and_trains_stay_close():
    """Units are endpoints like hosts: exact jumps give the same flows to the picosecond, packet
    trains stay within 1 % on the iteration, the accuracy ``trains`` promises where it does not warn."""
    topo = fred(375.0)
    off, exact, trains = (
        simulate(all_reduce(topo, chunks=4, nbytes=2_000_000, network=SF, sim={"fast_forward": ff}))
        for ff in ("off", "exact", "trains")
    )
    assert np.array_equal(off.flow_table["fct_ps"], exact.flow_table["fct_ps"])
    assert exact.summary["events"] < off.summary["events"]
    assert iteration_ps(trains) == pytest.approx(iteration_ps(off), rel=0.01)


def test_training_gradients_reduce_in_the_network():
    """dp_algorithm: in_network all-reduces the gradient buckets through the switch, sooner than
    the ring on the same iteration."""

    def training(algorithm):
        return scenario(
            topology=single(),
            workload={
                "training": {
                    "layers": [
                        {"name": f"l{i}", "forward_ns": 20_000, "backward_ns": 40_000, "weight_grad_bytes": 2_000_000}
                        for i in range(3)
                    ],
                    "dp_algorithm": algorithm,
                    "bucket_bytes": 0,
                }
            },
        )

    inn, ring = simulate(training("in_network")), simulate(training("ring"))
    assert inn.summary["iterations"] == 1
    assert iteration_ps(inn) < iteration_ps(ring)
    assert (inn.flow_table["dst"] >= 8).sum() > 0  # flows into the switch's units


def test_the_rank_timeline_holds_the_ranks_only():
    res = simulate(all_reduce(single(4), nbytes=400_000, chunks=2))
    hosts = {row[1] for row in res.tables()["timeline.csv"][1]}
    assert hosts == {0, 1, 2, 3}


@pytest.mark.quick
def test_units_sit_only_on_the_ports_the_trees_use():
    """Four of eight hosts on one switch: four units, on the ports towards those hosts, numbered
    after the hosts; without in_network collectives, none."""
    sc = scenario(
        topology=single(),
        workload={
            "collectives": [
                {"name": "c", "kind": "all_reduce", "algorithm": "in_network", "bytes": 4000, "hosts": [0, 2, 4, 6]}
            ]
        },
    )
    fabric = prepare_scenario(sc).fabric
    assert fabric.n_units == 4 and fabric.names[8:12] == [f"sw0.unit.h{h}" for h in (0, 2, 4, 6)]
    assert fabric.names[12] == "sw0"
    assert prepare_scenario(all_reduce(single(), algorithm="ring")).fabric.n_units == 0


def test_custom_fabrics_reduce_too():
    """A custom graph (node 0 and 1 switches in a line, two hosts on each): the tree reduces at
    one switch and takes the other's partial result, one per chunk; each NPU still moves D each
    way. Units get file ids past the file's nodes (for the ns-3 outputs)."""
    topo = {
        "kind": "custom",
        "switches": [0, 1],
        "links": [[0, 1, 100, 1000], [0, 2, 100, 1000], [0, 3, 100, 1000], [1, 4, 100, 1000], [1, 5, 100, 1000]],
    }
    sc = all_reduce(topo, nbytes=400_000, chunks=2)
    fabric = prepare_scenario(sc).fabric
    assert fabric.n_units == 6 and len(fabric.node_ids) == fabric.n_nodes
    assert sorted(fabric.node_ids) == list(range(fabric.n_nodes))
    res = simulate(sc)
    t = res.flow_table
    for npu in range(4):
        assert t["bytes"][t["src"] == npu].sum() == t["bytes"][t["dst"] == npu].sum() == 400_000
    names = np.array(fabric.names)
    across = np.char.startswith(names[t["src"]], "sw") & np.char.startswith(names[t["dst"]], "sw")
    assert across.sum() == 2 * 2  # per chunk: one partial result up, one result back
