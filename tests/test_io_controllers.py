"""I/O controllers on wafer fabrics (topology io_controllers, io_rate_gbps) and the
weight_streaming pattern: where they attach, which NPUs each one feeds, and what the summary
reports against closed forms."""

import numpy as np
import pytest

from conftest import scenario, simulate
from roce_emu.api import prepare_scenario
from roce_emu.errors import ScenarioError
from roce_emu.fabric.topology import build_fabric

MTU, DATA = 1000, 1082  # payload and data frame on the wire (bytes)


def streaming(topology, nbytes=1_000_000):
    return scenario(topology=topology, workload={"patterns": [{"kind": "weight_streaming", "bytes": nbytes}]})


def attached(fabric):
    return {
        fabric.names[u] if fabric.names[u].startswith("io") else fabric.names[v]: fabric.names[v]
        if fabric.names[u].startswith("io")
        else fabric.names[u]
        for u, v, d in fabric.graph.edges(data=True)
        if d["tier"] == "io"
    }


@pytest.mark.quick
def test_controllers_attach_around_the_mesh_edge_and_to_the_l1_switches():
    """Four controllers on a 5 x 4 mesh take the corners (evenly around its 14 edge routers,
    clockwise from r0_0); on FRED controller i hangs off L1 switch i. Their ids follow the NPUs'."""
    mesh = build_fabric(streaming({"kind": "mesh", "dims": [5, 4], "io_controllers": 4}).topology)
    assert mesh.names[20:24] == ["io0", "io1", "io2", "io3"] and mesh.n_io == 4 and mesh.n_hosts == 20
    assert attached(mesh) == {"io0": "r0_0", "io1": "r0_3", "io2": "r4_3", "io3": "r4_0"}
    fred = build_fabric(streaming({"kind": "fred", "io_controllers": 5}).topology)
    assert attached(fred) == {f"io{i}": f"l1.{i}" for i in range(5)}
    plain = build_fabric(streaming({"kind": "mesh", "dims": [5, 4]}).topology)
    assert plain.n_io == 0 and len(plain.names) == 40


def test_one_controller_feeding_a_row_saturates_its_link():
    """A 1 x 4 mesh at 100 Gb/s, one controller at 10 Gb/s on r0_0 streaming to the four NPUs at
    once: its link is the bottleneck, so it achieves the link's payload rate, and the first mesh
    link carries the streams of three NPUs out of four."""
    res = simulate(
        streaming({"kind": "mesh", "dims": [1, 4], "link": {"rate_gbps": 100}, "io_controllers": 1, "io_rate_gbps": 10})
    )
    s = res.summary
    assert s["io_achieved_gbps_mean"] == pytest.approx(10 * MTU / DATA, rel=0.01)
    assert s["io_hottest_link"] == "r0_0->r0_1"
    assert s["io_hottest_link_per_io_rate"] == pytest.approx(0.75, rel=0.02)


def test_fred_controllers_feed_their_own_groups():
    """One controller per L1 switch: each group's NPUs are nearest to their own switch's
    controller, so no stream crosses the L2 switch (the uplinks carry nothing)."""
    sc = streaming(
        {"kind": "fred", "npu_rate_gbps": 800, "uplink_rate_gbps": 100, "io_controllers": 5, "io_rate_gbps": 40}
    )
    res = simulate(sc)
    t = res.flow_table
    assert np.array_equal(t["src"] - 20, np.arange(20) // 4)  # io i -> the 4 NPUs of group i
    fabric = prepare_scenario(sc).fabric
    uplinks = [p for p, tier in enumerate(fabric.port_tier) if tier == "uplink"]
    assert res.outcome.world.port["tx_bytes"][uplinks].sum() == 0
    assert res.summary["io_achieved_gbps_min"] == pytest.approx(40 * MTU / DATA, rel=0.02)


@pytest.mark.quick
def test_weight_streaming_needs_controllers():
    with pytest.raises(ScenarioError) as e:
        prepare_scenario(streaming({"kind": "mesh", "dims": [2, 2]}))
    line = str(e.value)
    assert "\n" not in line and "workload.patterns.0.kind" in line and "io_controllers" in line
