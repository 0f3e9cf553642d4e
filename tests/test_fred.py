"""Wafer-scale fabrics, FRED's (topology.kind: fred) and the 2-D mesh it replaces: shapes and
single flows against their closed forms, to the picosecond."""

import pytest

from conftest import scenario, simulate
from roce_emu.core.paths import ser_ps
from roce_emu.fabric.topology import build_fabric

DATA, ACK = 1082, 86  # data and ACK frames on the wire (bytes)


def fred(**topology):
    return scenario(
        topology={"kind": "fred", "link": {"delay_ns": 100}, **topology},
        workload={"flows": [{"src": 0, "dst": 1, "bytes": 1_000_000}, {"src": 2, "dst": 5, "bytes": 1_000_000}]},
    )


@pytest.mark.quick
def test_shape():
    """20 NPUs in groups of 4: 5 L1 switches under one L2; 20 NPU links and 5 uplinks."""
    fabric = build_fabric(fred().topology)
    assert (fabric.n_hosts, fabric.n_switches, fabric.n_links) == (20, 6, 25)
    assert fabric.names[20:] == ["l1.0", "l1.1", "l1.2", "l1.3", "l1.4", "l2"]
    assert [fabric.host_attachment(h) for h in (0, 3, 4, 19)] == [20, 20, 21, 24]
    with pytest.raises(Exception, match="does not divide npus"):
        scenario(topology={"kind": "fred", "npus": 20, "group_size": 3})


def test_single_flows_match_their_closed_forms():
    """Fred-A (3 TB/s NPU ports, uplinks at 1/8 of that), 100 ns links, 1 MB flows alone.
    Inside a group: 1001 serialisations at 24 Tb/s, two links, and the ACK's two hops back.
    Across groups: the uplinks are the bottleneck: the first hop, 1000 packets at 3 Tb/s, the
    L2 hop and the last hop, four links, and the ACK's four hops back."""
    res = simulate(fred())
    fast, slow, prop = 24_000 * 10**9, 3_000 * 10**9, 100_000  # b/s, b/s, ps
    inside = 1001 * ser_ps(DATA, fast) + 2 * prop + 2 * ser_ps(ACK, fast) + 2 * prop
    across = (
        ser_ps(DATA, fast)
        + 1000 * ser_ps(DATA, slow)
        + ser_ps(DATA, slow)
        + ser_ps(DATA, fast)
        + 4 * prop
        + 2 * ser_ps(ACK, fast)
        + 2 * ser_ps(ACK, slow)
        + 4 * prop
    )
    fct = res.flow_table["fct_ps"]
    assert fct[0] == inside and fct[1] == across


def test_mesh_single_flow_matches_its_closed_form():
    """The 5 x 4 wafer mesh (60 Gb/s links, NPU ports at 240 Gb/s, 100 ns): h0 on r0_0 to h19 on
    r4_3 goes down the first column and along the last row (dimension order), 7 mesh links
    between two host links. 1000 packets of 1 MB pipeline at the mesh rate: the first crosses
    every link, the other 999 follow one mesh serialisation apart; then the last ACK's 9 hops."""
    topology = {
        "kind": "mesh",
        "dims": [5, 4],
        "link": {"rate_gbps": 60, "delay_ns": 100},
        "tiers": {"host": {"rate_gbps": 240}},
    }
    res = simulate(scenario(topology=topology, workload={"flows": [{"src": 0, "dst": 19, "bytes": 1_000_000}]}))
    fast, slow, prop = 240 * 10**9, 60 * 10**9, 100_000
    data = 2 * ser_ps(DATA, fast) + (999 + 7) * ser_ps(DATA, slow) + 9 * prop
    ack = 2 * ser_ps(ACK, fast) + 7 * ser_ps(ACK, slow) + 9 * prop
    assert res.flow_table["fct_ps"][0] == data + ack
