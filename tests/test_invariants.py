"""Engine invariants: a broken one stops the run with the time, the event and the entity."""

import re

import numpy as np
import pytest

from conftest import advance_to, scenario
from roce_emu.api import prepare_scenario, run
from roce_emu.core import kinds as K
from roce_emu.run.invariants import InvariantError, check_world

pytestmark = [pytest.mark.quick, pytest.mark.nojit]

INCAST = scenario(
    topology={"kind": "single_switch", "hosts": 5},
    workload={"flows": [{"src": s, "dst": 0, "bytes": 300_000} for s in range(1, 5)]},
)


def test_clean_runs_pass_the_expensive_checks():
    res = run(prepare_scenario(INCAST), write=False, progress=False, slice_events=500, check=True)
    assert res.outcome.status == "finished"
    check_world(res.outcome.world)


def test_corrupted_buffer_accounting_stops_the_run_naming_the_switch():
    prepared = prepare_scenario(INCAST)
    w = prepared.world
    w = advance_to(w, 20_000_000)  # 20 us: the switch holds packets
    switch = prepared.fabric.n_hosts
    assert w.node[switch]["used_bytes"] > 0
    w.node[switch]["used_bytes"] = 0  # the next packet to leave drives it below zero
    prepared.world = w
    res = run(prepared, write=False, progress=False)
    assert res.outcome.status == "invariant"
    assert "buffer accounting below zero at switch node sw0" in res.outcome.reason
    assert re.match(r"invariant broken at t=[0-9.]+ ns during a [a-z -]+ event: ", res.outcome.reason)
    assert not res.ok


def test_double_free_is_caught():
    prepared = prepare_scenario(INCAST)
    w = advance_to(prepared.world, 5_000_000)
    k = int(np.flatnonzero(w.pkt["kind"] == K.PK_FREE)[0])
    from roce_emu.core.packets import pkt_free

    pkt_free(w, np.int64(k))
    assert w.meta[K.M_INVARIANT] == K.INV_DOUBLE_FREE and w.meta[K.M_INVARIANT_OBJ] == k


def test_expensive_check_finds_a_packet_in_two_queues():
    prepared = prepare_scenario(INCAST)
    w = advance_to(prepared.world, 20_000_000)
    busy = np.argwhere(w.pq["head"] >= 0)
    (p, prio) = busy[0]
    k = int(w.pq[p, prio]["head"])
    chain = []
    while k >= 0:
        chain.append(k)
        k = int(w.pkt[k]["nxt"])
    other = next((q for q in range(len(w.port)) if w.pq[q, prio]["head"] < 0), None)
    w.pq[other, prio]["head"] = chain[0]  # the same packets now make up a second queue, bytes and all
    w.pq[other, prio]["tail"] = int(w.pq[p, prio]["tail"])
    w.pq[other, prio]["bytes"] = int(w.pq[p, prio]["bytes"])
    t_ns = int(w.stats[K.C_NOW_PS]) / 1000
    with pytest.raises(InvariantError) as err:
        check_world(w)
    assert str(err.value) == f"t={t_ns:g} ns: packet {min(chain)} is in 2 queues"


def test_one_retransmission_timer_per_queue_pair_slot():
    """A slot's pending EV_RTO event serves the next flow in it (nic.arm_rto): the heap holds one
    timer per armed slot, however many flows the slot served; a second one is caught."""
    prepared = prepare_scenario(INCAST)
    w = advance_to(prepared.world, 20_000_000)
    check_world(w)
    ev = w.ev[: int(w.meta[K.M_EV_COUNT])]
    timers = ev[ev["kind"] == K.EV_RTO]
    assert len(timers) == int(w.qp["rto_armed"].sum()) == 4  # the four senders, one each
    from roce_emu.core.heap import heap_push

    first = timers[0]
    heap_push(w.ev, w.meta, int(first["t_ps"]) + 1, K.EV_RTO, int(first["obj"]), int(first["arg"]))
    with pytest.raises(InvariantError, match="retransmission timer events pending"):
        check_world(w)
