"""network.nic.queue_pair: connection. Flows from one NIC port to one destination at one
priority go in order, each joining the round robin once the one before it has sent its last
packet, as NCCL posts a ring's steps on one connection; closed forms against one flow per
queue pair."""

import numpy as np

from conftest import scenario, simulate
from roce_emu.results.tables import flow_table


def _two_flows(queue_pair, dst2=1, nbytes=400_000):
    res = simulate(
        scenario(
            topology={"kind": "single_switch", "hosts": 3},
            network={"nic": {"queue_pair": queue_pair}},
            workload={"flows": [{"src": 0, "dst": 1, "bytes": nbytes}, {"src": 0, "dst": dst2, "bytes": nbytes}]},
        )
    )
    return flow_table(res.outcome.world)


def test_queue_pair_connection_sends_a_connections_flows_in_order():
    """Two flows of 400 packets from host 0 to host 1, released together. One queue pair per
    connection: the first takes its ideal FCT, and the second, which joins the NIC as the first
    has sent its last packet, ends exactly when one flow of 800 packets would. One queue pair
    per flow: the round robin interleaves them and both end together, near that time."""
    one = _two_flows("connection")
    assert one["fct_ps"][0] == one["ideal_ps"][0]
    double = simulate(
        scenario(
            topology={"kind": "single_switch", "hosts": 3}, workload={"flows": [{"src": 0, "dst": 1, "bytes": 800_000}]}
        )
    )
    assert one["fct_ps"][1] == flow_table(double.outcome.world)["fct_ps"][0]
    each = _two_flows("flow")
    assert abs(int(each["fct_ps"][0]) - int(each["fct_ps"][1])) < 0.01 * each["fct_ps"][1]
    assert each["fct_ps"][0] > 1.8 * one["fct_ps"][0]


def test_queue_pair_connection_leaves_other_destinations_alone():
    """Flows to two destinations are two connections: the same times as with a queue pair per flow."""
    assert np.array_equal(_two_flows("connection", dst2=2)["fct_ps"], _two_flows("flow", dst2=2)["fct_ps"])


def test_queue_pair_connection_with_losses_sends_every_flow():
    """Four flows to one destination in order, 5 % of packets lost on the way: go-back-N resends
    bring every flow through (conservation checked by simulate), and they finish in order."""
    res = simulate(
        scenario(
            topology={"kind": "single_switch", "hosts": 3},
            network={"nic": {"queue_pair": "connection", "rto_ns": 20_000, "nack_interval_ns": 5_000}},
            workload={"flows": [{"src": 0, "dst": 1, "bytes": 200_000} for _ in range(4)]},
            faults=[{"kind": "lossy_port", "port": ["sw0", "h1"], "loss": 0.05}],
        )
    )
    assert res.outcome.status == "finished"
    table = flow_table(res.outcome.world)
    assert (table["fct_ps"] > 0).all()
    assert res.summary["retransmits"] > 0
    finish = table["fct_ps"]  # all start at 0
    assert (np.diff(finish) > 0).all()  # in order
