"""Network profiles (config/profiles.py) and where switches queue ACKs (network.switch.ack_queue)."""

import pytest

from conftest import scenario, simulate
from roce_emu.fabric.records import port_records
from roce_emu.run.inputs import check_inputs


def one_flow(profile="roce_v2", cc="none", nbytes=1_000_000, **network):
    return scenario(
        topology={"kind": "single_switch", "hosts": 2},
        network={"profile": profile, "cc": {"algorithm": cc}, **network},
        workload={"flows": [{"src": 0, "dst": 1, "bytes": nbytes}]},
    )


@pytest.mark.quick
def test_hpcc_ns3_profile_fills_in_what_the_scenario_leaves_out():
    net = one_flow("hpcc_ns3").network
    assert (net.wire.data_header_bytes, net.wire.ack_bytes, net.wire.preamble_ifg_bytes) == (48, 60, 0)
    assert net.switch.ack_queue == "data"
    hpcc = one_flow("hpcc_ns3", "hpcc").network.wire  # the engine adds 42 B of INT to both
    assert (hpcc.data_header_bytes, hpcc.ack_bytes) == (48, 46)  # an 88 B ACK, as the simulator's
    timely = one_flow("hpcc_ns3", "timely").network.wire  # its 8 B timestamp on data, ACK padded to 60
    assert (timely.data_header_bytes, timely.ack_bytes) == (56, 60)
    kept = one_flow("hpcc_ns3", wire={"ack_bytes": 70}, switch={"ack_queue": "control"}).network
    assert kept.wire.ack_bytes == 70 and kept.switch.ack_queue == "control"
    default = one_flow().network
    assert (default.wire.data_header_bytes, default.wire.preamble_ifg_bytes, default.switch.ack_queue) == (
        62,
        20,
        "control",
    )


@pytest.mark.quick
def test_hpcc_ns3_headroom_is_three_link_bdps():
    """100 Gb/s and 1 us: 3 x 12,500 B = 37,500 B (REFERENCE's figure for the simulator);
    roce_v2 adds three 1082 B frames."""
    for profile, extra in (("hpcc_ns3", 0), ("roce_v2", 3 * 1082)):
        inputs = check_inputs(one_flow(profile))
        port = port_records(inputs.scenario, inputs.fabric)
        switch_ports = port["at_host"] == 0
        assert set(port["headroom_bytes"][switch_ports]) == {37_500 + extra}


def test_lone_flow_in_the_simulators_frames():
    """1 MB in 1000 packets of 1048 B (83.84 ns at 100 Gb/s), no gap: the last packet lands
    1001 serialisations and two 1 us links after the start, and its 60 B ACK (4.8 ns per hop)
    comes back over the same two links."""
    res = simulate(one_flow("hpcc_ns3"))
    assert res.summary["last_finish_ns"] == pytest.approx(1001 * 83.84 + 2000 + 2 * 4.8 + 2000, abs=1e-3)


def test_acks_queued_with_data_wait_behind_it():
    """Hosts 1 and 2 send 5 MB each to host 0 (an incast: data queues at the switch port to
    host 0) while host 0 sends 5 MB to host 3, whose ACKs cross that same port. In the control
    queue they pass the incast's data; queued with data they wait behind it, so host 0 hears
    of its last packet later, but by no more than the incast's whole queue can hold: 10 MB in
    1082 B frames at 100 Gb/s, 865.6 us."""
    flows = [
        {"src": 1, "dst": 0, "bytes": 5_000_000},
        {"src": 2, "dst": 0, "bytes": 5_000_000},
        {"src": 0, "dst": 3, "bytes": 5_000_000},
    ]

    def run(queue):
        return simulate(
            scenario(
                topology={"kind": "single_switch", "hosts": 4},
                network={"switch": {"ack_queue": queue}},
                workload={"flows": flows},
            )
        )

    control, data = run("control"), run("data")
    assert data.summary["control_packets_dropped"] == control.summary["control_packets_dropped"] == 0
    fct_c, fct_d = control.flow_table["fct_ps"], data.flow_table["fct_ps"]
    print(f"host 0's flow: {fct_c[2] / 1e6:.3f} us with ACKs in the control queue, {fct_d[2] / 1e6:.3f} us with data")
    assert 0 < fct_d[2] - fct_c[2] < 10_000_000 * 1082 / 1000 * 8 / 100 * 1000
