"""IRN (network.transport: irn, core/irn.py): go-back-N's timing where nothing is lost and the
BDP cap does not bind, a closed form where it binds, recovery without go-back-N's collapse under
incast and random loss, conservation (every run, conftest.simulate), determinism and slicing."""

import numpy as np
import pytest
from pydantic import ValidationError

from conftest import scenario, simulate
from roce_emu.core import kinds as K
from roce_emu.core.paths import ser_ps

pytestmark = pytest.mark.quick

RATE = 100 * 10**9
FRAME_WIRE = 1000 + 62 + 20  # a full data frame on the wire (MTU, header, preamble and gap)


def _network(transport, buffer=None, **irn):
    net = {"transport": transport}
    if buffer is not None:
        net["switch"] = {"buffer_bytes": buffer}
    if transport == "go_back_n":
        net.setdefault("switch", {})["pfc"] = {"enabled": False}
    if irn:
        net["irn"] = irn
    return net


def incast(transport, n_senders=8, size=500_000, buffer=200_000, **irn):
    """N-to-1 through one 100 Gb/s switch without PFC: a small buffer overflows."""
    return scenario(
        topology={"kind": "single_switch", "hosts": n_senders + 1},
        network=_network(transport, buffer, **irn),
        workload={"flows": [{"src": s, "dst": 0, "bytes": size} for s in range(1, n_senders + 1)]},
    )


def _finish_ps(res):
    return res.outcome.world.flow["finish_ps"].copy()


def test_lossless_uncapped_is_go_back_n_to_the_picosecond():
    """A permutation through one switch (no queue builds, nothing lost): the cap does not bind,
    so IRN's flows, packets and ACKs are go-back-N's."""
    flows = [{"src": s, "dst": (s + 3) % 6, "bytes": 300_000 + 1000 * s, "start_ns": 100 * s} for s in range(6)]

    def run(transport):
        return simulate(
            scenario(
                topology={"kind": "single_switch", "hosts": 6},
                network=_network(transport),
                workload={"flows": flows},
            )
        )

    gbn, irn = run("go_back_n"), run("irn")
    assert np.array_equal(_finish_ps(gbn), _finish_ps(irn))
    for key in ("data_packets_sent", "acks_sent", "nacks_sent", "retransmits", "data_packets_dropped"):
        assert gbn.summary[key] == irn.summary[key], key
    assert irn.summary["retransmits"] == 0


@pytest.mark.parametrize("cap", [1, 4, 16])
def test_binding_cap_sends_one_cap_per_round_trip(cap):
    """One flow of n full packets with a cap of W below the BDP: W packets back to back, then
    each ACK releases the next one, so packet j leaves at floor(j / W) R + (j mod W) s, and the
    flow ends R after its last packet left (R: a one-packet flow's ideal FCT, its round trip)."""
    n = 50
    res = simulate(
        scenario(
            topology={"kind": "single_switch", "hosts": 2},
            network=_network("irn", bdp_cap_packets=cap),
            workload={"flows": [{"src": 1, "dst": 0, "bytes": n * 1000}]},
        )
    )
    one = simulate(
        scenario(
            topology={"kind": "single_switch", "hosts": 2},
            network=_network("irn"),
            workload={"flows": [{"src": 1, "dst": 0, "bytes": 1000}]},
        )
    )
    rtt = int(one.outcome.world.flow["finish_ps"][0])
    s = ser_ps(FRAME_WIRE, RATE)
    assert cap * s < rtt, "the cap must bind for the closed form"
    last = n - 1
    assert int(res.outcome.world.flow["finish_ps"][0]) == (last // cap) * rtt + (last % cap) * s + rtt
    assert res.summary["retransmits"] == 0


def test_default_cap_is_the_fabric_bdp_in_mtu_packets():
    from roce_emu.api import prepare_scenario

    w = prepare_scenario(incast("irn", n_senders=2)).world
    # two 1 us links each way, one stored data frame per hop (docs/model.md §2.4)
    base_rtt = 4 * 1_000_000 + 2 * ser_ps(FRAME_WIRE, RATE)
    assert w.cfg[K.CFG_IRN_CAP] == -(-base_rtt * RATE // (8 * 1000 * 10**12))
    assert w.irn_bits.shape[2] == -(-int(w.cfg[K.CFG_IRN_CAP]) // 64)


def test_incast_without_pfc_recovers_without_go_back_n_collapse():
    """8:1 incast into a 200 KB buffer: both lose packets. Go-back-N resends whole windows, most
    of them lost again (it sends several times the packets the flows need); IRN resends each
    lost packet about once (and its cap keeps fewer in flight), and ends sooner."""
    gbn, irn = simulate(incast("go_back_n")), simulate(incast("irn"))
    g, i = gbn.summary, irn.summary
    needed = 8 * 500
    assert g["flows_finished"] == i["flows_finished"] == 8
    assert g["data_packets_dropped"] > 0 and i["data_packets_dropped"] > 0
    assert g["data_packets_sent"] > 2 * needed  # the collapse
    assert i["retransmits"] <= 1.2 * i["data_packets_dropped"]  # each lost packet about once
    assert i["data_packets_sent"] < 1.3 * needed
    assert _finish_ps(irn).max() < 0.7 * _finish_ps(gbn).max()


def test_random_loss_resends_each_lost_packet_about_once():
    """A port that loses 1 % of what it sends to the receiver: IRN resends each lost packet once
    (a resend lost again is found by timeout), go-back-N a window per loss. Each loss costs IRN
    at most a round trip (its BDP cap counts the open hole, so the sender waits while the resend
    travels) and each timeout RTO_high and a round trip more."""

    def run(transport):
        return simulate(
            scenario(
                topology={"kind": "single_switch", "hosts": 2},
                network=_network(transport),
                workload={"flows": [{"src": 1, "dst": 0, "bytes": 5_000_000}]},
                faults=[{"kind": "lossy_port", "port": ["sw0", "h0"], "loss": 0.01}],
            )
        )

    gbn, irn = run("go_back_n"), run("irn")
    g, i = gbn.summary, irn.summary
    assert i["data_packets_dropped"] > 20
    assert i["retransmits"] <= i["data_packets_dropped"] + i["timeouts"]
    assert g["retransmits"] > 10 * g["data_packets_dropped"]
    rtt = 4 * 1_000_000 + 2 * ser_ps(FRAME_WIRE, RATE) + 2 * ser_ps(66 + 20, RATE)
    bound = float(irn.rows[0]["ideal_fct_ns"]) * 1000 + i["data_packets_dropped"] * rtt + i["timeouts"] * (320e6 + rtt)
    assert _finish_ps(irn)[0] <= bound
    assert _finish_ps(irn)[0] < _finish_ps(gbn)[0]


@pytest.mark.parametrize("algorithm", ["hpcc", "dctcp"])
def test_resends_pass_a_windowed_algorithms_window(algorithm):
    """Three senders share a lossy port under HPCC or DCTCP, window-limited (their windows are
    below a cap of 400). A lost packet holds the cumulative ack, so by the time its NACK comes
    the packets in flight fill the window: IRN resends anyway (the window holds back new packets
    only), and every flow ends (held back too, the flows stalled)."""
    res = simulate(
        scenario(
            topology={"kind": "single_switch", "hosts": 4},
            network={"transport": "irn", "cc": {"algorithm": algorithm}, "irn": {"bdp_cap_packets": 400}},
            workload={"flows": [{"src": s, "dst": 0, "bytes": 1_000_000} for s in (1, 2, 3)]},
            faults=[{"kind": "lossy_port", "port": ["sw0", "h0"], "loss": 0.01}],
        )
    )
    s = res.summary
    assert s["flows_finished"] == 3 and s["data_packets_dropped"] > 3
    # about once per loss: re-entering recovery resends the cumulative ack's packet at once, which may
    # be a resend still on its way (the paper's rule)
    assert s["retransmits"] <= 1.1 * s["data_packets_dropped"] + s["timeouts"]


def test_same_result_under_any_slicing():
    sc = incast("irn", n_senders=6, size=200_000, buffer=100_000)
    whole, sliced = simulate(sc), simulate(sc, slice_events=997)
    assert np.array_equal(whole.outcome.world.flow, sliced.outcome.world.flow)
    assert np.array_equal(whole.outcome.world.stats[: K.C_FF_JUMPS], sliced.outcome.world.stats[: K.C_FF_JUMPS])
    assert whole.summary["data_packets_dropped"] > 0


@pytest.mark.parametrize("mode", ["trains", "memo"])
def test_trains_and_memo_run_the_exact_engine(mode):
    """Neither models IRN (inputs.why_no_trains, why_no_memo): the run is the exact engine's."""
    sc = incast("irn", n_senders=4, size=200_000, buffer=100_000)
    fast = sc.model_copy(update={"sim": sc.sim.model_copy(update={"fast_forward": mode})})
    assert np.array_equal(_finish_ps(simulate(sc)), _finish_ps(simulate(fast)))


def test_irn_with_pfc_is_refused():
    with pytest.raises(ValidationError, match="switch.pfc.enabled true is not allowed with transport 'irn'"):
        scenario(network={"transport": "irn", "switch": {"pfc": {"enabled": True}}})
    assert scenario(network={"transport": "irn"}).network.switch.pfc.enabled is False


def test_irn_refuses_exact_fast_forward():
    with pytest.raises(ValidationError, match="'exact' is not allowed with network.transport 'irn'"):
        scenario(network={"transport": "irn"}, sim={"fast_forward": "exact"})
