"""Queue pairs (core/qp.py): a flow's live state sits in a slot that later flows reuse.

Which slot a flow gets, and whether slots are reused at all, must change no result; the
slots must follow the flows in flight, not the flows of the workload."""

import numpy as np
import pytest

from conftest import assert_conservation, scenario
from roce_emu.run import world as world_module
from roce_emu.api import prepare_scenario, run
from roce_emu.core import kinds as K

pytestmark = pytest.mark.quick


FAT_TREE = {"kind": "fat_tree", "k": 4, "link": {"rate_gbps": 100, "delay_ns": 1000}}
LEAF_SPINE = {
    "kind": "leaf_spine",
    "leaves": 2,
    "spines": 2,
    "hosts_per_leaf": 4,
    "link": {"rate_gbps": 200, "delay_ns": 1000},
}


def _ring(cc: str, faults=(), fast_forward="off", topology=FAT_TREE, nbytes=1_000_000):
    """Two ring all-reduces one after the other (on the k=4 fat-tree: 960 flows, 16 per step)."""
    return scenario(
        topology=topology,
        network={"cc": {"algorithm": cc}},
        sim={"fast_forward": fast_forward},
        faults=list(faults),
        workload={
            "collectives": [
                {"name": "a", "kind": "all_reduce", "bytes": nbytes},
                {"name": "b", "kind": "all_reduce", "bytes": nbytes // 2, "after": ["a"]},
            ]
        },
    )


LOSSY = [{"kind": "lossy_port", "port": ["agg0.0", "core0"], "loss": 0.02}]


def _run(sc, first_slots, monkeypatch, check=False):
    """Run sc with a world that starts with first_slots(flows, hosts) queue-pair slots."""
    monkeypatch.setattr(world_module, "first_qp_slots", first_slots)
    result = run(prepare_scenario(sc), write=False, progress=False, slice_events=50_000, check=check)
    monkeypatch.undo()
    assert result.outcome.status == "finished", result.outcome.reason
    assert_conservation(result.outcome.world)
    return result


#: counters of the network and the workload (not the exact fast-forward's own bookkeeping,
#: whose checkpoints follow the slot numbers, nor the events it therefore processed)
MODEL_COUNTERS = [
    i for i in range(K.C_SIZE) if i not in (K.C_EVENTS, K.C_FF_JUMPS, K.C_FF_EVENTS, K.C_FF_PS, K.C_FF_CHECKPOINTS)
]


def _same(a, b):
    for column in a.flow_table:
        assert np.array_equal(a.flow_table[column], b.flow_table[column]), column
    wa, wb = a.outcome.world, b.outcome.world
    assert np.array_equal(wa.task["start_ps"], wb.task["start_ps"])
    assert np.array_equal(wa.task["finish_ps"], wb.task["finish_ps"])
    assert np.array_equal(wa.stats[MODEL_COUNTERS], wb.stats[MODEL_COUNTERS])


@pytest.mark.parametrize("cc, faults", [("dcqcn", ()), ("hpcc", ()), ("none", LOSSY)])
def test_slot_reuse_changes_no_result(cc, faults, monkeypatch):
    """One slot at first (grown by doubling, reused as flows end) against a slot for every flow
    (never reused): identical flows, tasks and counters, to the picosecond. DCQCN's and HPCC's
    timers and windows and, with losses, retransmissions, timeouts and packets that outlive
    their flow's last ACK all cross slot reuse."""
    sc = _ring(cc, faults)
    reused = _run(sc, lambda flows, hosts: 1, monkeypatch, check=True)
    spread = _run(sc, lambda flows, hosts: flows, monkeypatch)
    _same(reused, spread)
    assert reused.outcome.world.stats[K.C_EVENTS] == spread.outcome.world.stats[K.C_EVENTS]
    n_flows = len(reused.outcome.world.flow)
    assert len(spread.outcome.world.qp) == n_flows
    assert len(reused.outcome.world.qp) <= 64 < n_flows
    if faults:
        assert reused.summary["retransmits"] > 0 and reused.summary["timeouts"] >= 0


def test_exact_fast_forward_across_slot_reuse(monkeypatch):
    """The exact fast-forward keeps its per-flow records by slot: with slots reused it still
    gives the exact engine's results."""
    reused = _run(
        _ring("none", fast_forward="exact", topology=LEAF_SPINE, nbytes=16_000_000), lambda flows, hosts: 1, monkeypatch
    )
    exact = _run(_ring("none", topology=LEAF_SPINE, nbytes=16_000_000), lambda flows, hosts: flows, monkeypatch)
    _same(reused, exact)
    assert reused.summary["fast_forward_jumps"] > 0
    assert len(reused.outcome.world.qp) < len(reused.outcome.world.flow)  # slots were reused


def test_slots_follow_the_flows_in_flight():
    """The world starts with room for a few flows per host and never needs more when at most
    16 flows (one ring step) are in flight: 960 flows run in 128 slots; every slot is free
    again at the end, and every flow's record holds its results."""
    result = run(prepare_scenario(_ring("dcqcn")), write=False, progress=False)
    world = result.outcome.world
    assert len(world.flow) == 960
    assert len(world.qp) == world_module.first_qp_slots(960, 16) == 128
    assert int(world.meta[K.M_QP_FREE]) == len(world.qp)
    assert (world.flow["qp"] == -1).all() and (world.flow["state"] == K.FL_DONE).all()
    assert (world.flow["finish_ps"] > world.flow["start_ps"]).all()
    assert (world.flow["pkts_delivered"] == -(-world.flow["size_bytes"] // int(world.cfg[K.CFG_MTU]))).all()
