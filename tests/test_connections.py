"""network.nic.queue_pair. ``channel`` (the default): a collective's flows from one rank to one
peer on one channel go in order, each joining the round robin once the one before it has sent its
last packet, as NCCL posts a channel's steps on its connection; other flows have queue pairs of
their own. ``connection``: every flow to one destination in order. ``flow``: a queue pair per
flow. Closed forms against one flow per queue pair, and the engine's invariant that no two flows
of one connection send at once."""

import numpy as np
import pytest

from conftest import scenario, simulate
from roce_emu.api import prepare_scenario, run
from roce_emu.results.tables import flow_table
from roce_emu.run.world import connections


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


def _ring(queue_pair, hosts=8, channels=1, chunks=2, nbytes=4_000_000, faults=()):
    return scenario(
        topology={"kind": "single_switch", "hosts": hosts},
        network={"nic": {"queue_pair": queue_pair}},
        workload={
            "collectives": [
                {"kind": "all_reduce", "algorithm": "ring", "bytes": nbytes, "chunks": chunks, "channels": channels}
            ]
        },
        faults=list(faults),
        output={"collective_flows": True},
    )


def test_the_default_posts_a_channels_flows_on_one_connection_per_peer():
    """A ring All-Reduce of 8 ranks in 2 chunks and 4 channels: channels 0 and 2 both send to the
    next rank, 1 and 3 to the previous one; each channel's steps and chunks to its peer are one
    connection (8 ranks x 4 channels), distinct from the other channels'."""
    flow = prepare_scenario(_ring("channel", channels=4)).world.flow
    assert (flow["conn"] >= 0).all()
    assert len({(int(s), int(d), int(c)) for s, d, c in zip(flow["src"], flow["dst"], flow["conn"])}) == 8 * 4
    assert len(set(flow["conn"].tolist())) == 4  # one per channel of the group
    assert (prepare_scenario(_ring("flow")).world.flow["conn"] == -1).all()
    assert (prepare_scenario(_ring("connection", channels=4)).world.flow["conn"] == 0).all()


def test_connections_maps_the_posted_connections_by_the_setting():
    posted = np.array([-1, 0, 3], np.int32)
    assert connections("channel", posted).tolist() == [-1, 0, 3]
    assert connections("flow", posted).tolist() == [-1, -1, -1]
    assert connections("connection", posted).tolist() == [0, 0, 0]


@pytest.mark.parametrize("channels", [1, 4])
def test_no_two_flows_of_a_connection_send_at_once(channels):
    """The invariant checker (every 300 events) finds no connection with two queue pairs in its
    NIC port's round robin."""
    prepared = prepare_scenario(_ring("channel", channels=channels))
    res = run(prepared, write=False, progress=False, slice_events=300, check=True)
    assert res.outcome.status == "finished"


def test_a_late_ranks_next_step_waits_for_its_last_one_instead_of_sharing_its_nic():
    """A ring All-Reduce of 8 MB over 3 ranks, rank 0's link at a quarter of the rate. Rank 2's
    data to rank 0 back up behind that link while rank 1's fast step releases rank 2's next step:
    with a queue pair per flow the two steps share rank 2's NIC, and the first ends later than
    it does when the second waits on the connection. On one connection a rank's steps to its
    peer end in the order they were posted."""

    def table(queue_pair):
        slow = [{"kind": "slow_link", "link": ["sw0", "h0"], "factor": 4}]
        t = flow_table(simulate(_ring(queue_pair, hosts=3, chunks=1, nbytes=8_000_000, faults=slow)).outcome.world)
        return t, t["start_ps"] + t["fct_ps"]

    per_flow, per_flow_end = table("flow")
    ordered, ordered_end = table("channel")
    first, second = np.flatnonzero((ordered["src"] == 2) & (ordered["dst"] == 0))[:2]
    assert ordered["start_ps"][second] < per_flow_end[first]  # released while the first still sends
    assert ordered_end[first] < 0.97 * per_flow_end[first]
    for src in range(3):
        mine = np.flatnonzero(ordered["src"] == src)
        assert (np.diff(ordered_end[mine]) > 0).all()


def test_background_flows_keep_a_queue_pair_each_by_default():
    """workload.flows belong to no collective: the default gives them one queue pair per flow."""
    assert np.array_equal(_two_flows("channel")["fct_ps"], _two_flows("flow")["fct_ps"])


def test_a_ring_on_connections_over_a_lossy_link_brings_every_flow_through():
    """Go-back-N resends on a connection: a flow done by a late cumulative ACK while it was
    resending hands its connection on (nic.leave_ring); the invariants hold throughout."""
    sc = _ring(
        "channel",
        hosts=4,
        chunks=2,
        nbytes=2_000_000,
        faults=[{"kind": "lossy_port", "port": ["sw0", "h1"], "loss": 0.02}],
    )
    sc = sc.model_copy(
        update={
            "network": sc.network.model_copy(
                update={"nic": sc.network.nic.model_copy(update={"rto_ns": 20_000, "nack_interval_ns": 5_000})}
            )
        }
    )
    res = run(prepare_scenario(sc), write=False, progress=False, slice_events=500, check=True)
    assert res.outcome.status == "finished"
    assert res.summary["retransmits"] > 0
