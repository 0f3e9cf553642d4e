"""Congestion control in motion: fairness, recovery after a flow leaves, incast, determinism.

Parameters are the defaults of docs/model.md throughout; where an algorithm is known not to
reach a property with them (DCQCN's idle link after synchronised cuts, TIMELY's many
fixed points), the test states what it measures instead of tuning the algorithm.
"""

import math

import numpy as np
import pytest

from conftest import advance_to, qp_of, scenario, simulate
from roce_emu.api import prepare_scenario
from roce_emu.core.cc import dcqcn as cc_dcqcn, dctcp as cc_dctcp, hpcc as cc_hpcc, timely as cc_timely
from roce_emu.core import kinds as K
from roce_emu.results.metrics import jain_index, queue_series, rate_series, throughput_bps

LINE = 100e9
US = 10**6
ALGORITHMS = [("none", {}), ("dcqcn", {}), ("dcqcn", {"variant": "paper"}), ("hpcc", {}), ("timely", {}), ("dctcp", {})]
IDS = ["none", "dcqcn-cx", "dcqcn-paper", "hpcc", "timely", "dctcp"]


def _shared_bottleneck(algorithm, params, flows, interval_ns=5000, **network):
    return scenario(
        topology={"kind": "single_switch", "hosts": 3},
        network={"cc": {"algorithm": algorithm, "params": params}, **network},
        workload={"flows": flows},
        output={"traces": ["rate", "queue"], "trace_interval_ns": interval_ns},
    )


def _data_header(world):
    """A data packet's header bytes: the fabric's and the INT of the flows' algorithm."""
    return int(world.cfg[K.CFG_DATA_HDR] + K.CC_INT_BYTES[world.flow["cc"][0]])


def _wire_factor(world):
    """Wire bytes per payload byte of a full data packet (headers, INT, preamble and gap)."""
    mtu = int(world.cfg[K.CFG_MTU])
    return (mtu + _data_header(world) + int(world.cfg[K.CFG_IFG])) / mtu


#: link utilisation two equal flows reach on one bottleneck (docs/model.md defaults): PFC alone,
#: DCTCP (one marking threshold keeps a standing queue) and DCQCN-paper (a CNP at most every
#: 50 us per flow) keep the link busy; HPCC holds eta = 0.95 of it plus an R_AI per flow;
#: DCQCN-cx's synchronised cuts leave it idle now and then (measured 0.915) and TIMELY settles
#: at one of its many fixed points below line rate (measured 0.872): docs/reference/congestion_control.md
UTILISATION = {
    "none": (0.99, 1.0),
    "dcqcn-cx": (0.90, 0.95),
    "dcqcn-paper": (0.99, 1.0),
    "hpcc": (0.94, 0.96),
    "timely": (0.85, 0.95),
    "dctcp": (0.99, 1.0),
}


@pytest.mark.parametrize("algorithm, params", ALGORITHMS, ids=IDS)
def test_two_flows_share_one_bottleneck(algorithm, params):
    size = 20_000_000
    res = simulate(
        _shared_bottleneck(
            algorithm, params, [{"src": 1, "dst": 0, "bytes": size}, {"src": 2, "dst": 0, "bytes": size}]
        )
    )
    world, trace = res.outcome.world, res.outcome.trace
    first_done = int(world.flow["finish_ps"].min())
    t0, t1 = first_done // 2, first_done  # the second half of the time both flows send
    goodput = [throughput_bps(trace, f, t0, t1) for f in (0, 1)]
    fairness = jain_index(goodput)
    utilisation = sum(goodput) * _wire_factor(world) / LINE
    assert res.summary["data_packets_dropped"] == 0
    assert fairness >= 0.99, fairness  # measured 0.9995 or more for every algorithm
    low, high = UTILISATION[IDS[ALGORITHMS.index((algorithm, params))]]
    assert low <= utilisation <= high + 1e-9, utilisation


def _join_leave(algorithm, params, big=60_000_000, interval_ns=2000, **extra):
    """Flow 0 sends alone, flow 1 (5 MB) joins at 500 us and leaves."""
    return _shared_bottleneck(
        algorithm,
        params,
        [{"src": 1, "dst": 0, "bytes": big}, {"src": 2, "dst": 0, "bytes": 5_000_000, "start_ns": 500_000}],
        interval_ns=interval_ns,
        **extra,
    )


def _first_time(t, values, threshold, after):
    hit = np.flatnonzero((t >= after) & (values >= threshold))
    assert len(hit), f"never reached {threshold:g}"
    return int(t[hit[0]])


def _base_rtt_ps(world):
    mtu_frame = int(world.cfg[K.CFG_MTU] + _data_header(world) + world.cfg[K.CFG_IFG])
    return 4 * US + 2 * mtu_frame * 80  # two 1 us links, one data frame per hop at 100 Gb/s (80 ps/B)


@pytest.mark.parametrize("algorithm", ["none", "hpcc", "timely", "dctcp"])
def test_survivor_climbs_back_within_the_derived_bound(algorithm):
    res = simulate(_join_leave(algorithm, {}))
    world, trace = res.outcome.world, res.outcome.trace
    t_leave = int(world.flow[1]["finish_ps"])
    rtt = _base_rtt_ps(world)
    drain = res.summary["max_queue_bytes"] * 8 * 10**12 // int(LINE)  # the standing queue empties
    t, rate = rate_series(trace, 0)
    r0 = float(rate[np.searchsorted(t, t_leave)])
    p = world.ccp[0]
    if algorithm == "none":
        target, bound = 0.99 * LINE, drain
    elif algorithm == "hpcc":
        # U is an EWMA over one base RTT T; alone, the measured u falls to R/B, and the per-ACK
        # reaction reaches R_c eta / U >= 0.99 eta B once U has covered all but 1 % of the
        # step: T ln(100) plus one RTT of feedback delay. The band is 2 %: the per-ACK
        # reaction overshoots to line rate for a few RTTs, and while the queue that builds
        # drains the rate dips about 1.5 % below eta B
        target = 0.98 * (0.95 * LINE + p[cc_hpcc.P_RAI])
        bound = drain + int((1 + math.log(100)) * p[cc_hpcc.P_BASE_RTT_PS])
    elif algorithm == "timely":
        # RTT < T_low: one increase per window (one RTT plus a frame), delta for the first
        # N, then R_HAI each
        target = 0.99 * LINE
        steps = p[cc_timely.P_HAI_N] + math.ceil((target - r0) / p[cc_timely.P_RHAI])
        bound = drain + int(steps * (rtt + 2 * 1082 * 80))
    else:  # dctcp: + R_AI once per window while not in CWR; the window follows the rate
        target = 0.99 * LINE
        steps = 1 + max(0, math.ceil((target - r0) / p[cc_dctcp.P_RAI]))
        bound = drain + int(steps * (rtt + 2 * 1082 * 80))
    # the survivor's goodput over 10 us windows, as a share of the line, sustained for 50 us:
    # right after the other flow leaves, the standing queue drains at line rate whatever the
    # survivor's own rate, and that must not count as having climbed back
    window, sustain = 10 * US, 50 * US
    starts = t[(t > t_leave) & (t + window + sustain <= t[-1])]
    ok = np.array([throughput_bps(trace, 0, s, s + window) * _wire_factor(world) >= target for s in starts])
    reached = None
    for i, start in enumerate(starts):
        if ok[i:][starts[i:] <= start + sustain].all():
            reached = int(start)
            break
    assert reached is not None, f"{algorithm}: never back to {target:g} bit/s"
    print(
        f"{algorithm}: back to {target / 1e9:.2f} Gb/s {(reached - t_leave) / US:.1f} us after the other "
        f"flow left (bound {bound / US:.1f} us)"
    )
    assert reached - t_leave <= bound + window


def test_dcqcn_cx_survivor_follows_the_increase_timer_exactly():
    """After the other flow leaves, no more marks: from the state at that moment the rules of
    docs/model.md §1.5 (fast recovery, additive, hyper increase every T_inc) predict the tick at
    which the survivor reaches 99 % of line rate; the engine gets there at exactly that tick."""
    world = prepare_scenario(_join_leave("dcqcn", {}, big=1_000_000_000, interval_ns=10**9)).world
    t = 0
    while world.flow[1]["finish_ps"] < 0:
        t += 10 * US
        world = advance_to(world, t)
    t = int(world.flow[1]["finish_ps"]) + 200 * US  # let the last marked packets' ACKs arrive
    world = advance_to(world, t)
    f = qp_of(world, 0)
    c = world.ccs[f]
    p = world.ccp[0]
    rate, target, stage = float(c["rate"]), float(c["target"]), int(c["stage"])
    tick = int(world.timer[f, K.TM_INCREASE, 0])
    period = int(p[cc_dcqcn.P_INC_PS])
    F = p[cc_dcqcn.P_F]
    while rate < 0.99 * LINE:
        if stage == F:
            target = min(LINE, target + p[cc_dcqcn.P_RAI])
        elif stage > F:
            target = min(LINE, target + p[cc_dcqcn.P_RHAI])
        rate = max((rate + target) / 2, p[cc_dcqcn.P_MIN_RATE])
        stage += 1
        tick += period
    tick -= period
    print(f"dcqcn-cx: 99 % of line {(tick - t) / 1e9:.2f} ms after the state was read")
    world = advance_to(world, tick - 1)
    assert world.ccs[f]["rate"] < 0.99 * LINE
    world = advance_to(world, tick)
    assert world.ccs[f]["rate"] == pytest.approx(rate, rel=1e-12)
    assert world.stats[K.C_FLOWS_DONE] == 1


def test_dcqcn_paper_survivor_within_additive_bound():
    """Paper variant: every timer event (T) halves the gap to the target, and once t_cnt > F the
    target grows by at least R_AI per event (byte-counter events only add more), so line rate
    is within (F + (line - R0) / R_AI + log2 of the gap) events of the other flow leaving."""
    world = prepare_scenario(_join_leave("dcqcn", {"variant": "paper"}, big=1_000_000_000, interval_ns=10**9)).world
    t = 0
    while world.flow[1]["finish_ps"] < 0:
        t += 10 * US
        world = advance_to(world, t)
    t_leave = int(world.flow[1]["finish_ps"])
    p = world.ccp[0]
    f = qp_of(world, 0)
    r0 = float(world.ccs[f]["rate"])
    gap = LINE - r0
    events = p[cc_dcqcn.P_F] + math.ceil(gap / p[cc_dcqcn.P_RAI]) + math.ceil(math.log2(gap / (0.01 * LINE))) + 1
    bound = t_leave + int(events * p[cc_dcqcn.P_INC_PS])
    while world.ccs[f]["rate"] < 0.99 * LINE:
        assert t < bound, "not back to line rate within the derived bound"
        t += 100 * US
        world = advance_to(world, t)
    print(
        f"dcqcn-paper: back to 99 % of line {(t - t_leave) / 1e9:.1f} ms after the other flow left "
        f"(bound {(bound - t_leave) / 1e9:.0f} ms)"
    )


def _incast(algorithm):
    return scenario(
        topology={"kind": "single_switch", "hosts": 9},
        network={"switch": {"buffer_bytes": 4 * 1024 * 1024}, "cc": {"algorithm": algorithm}},
        workload={"patterns": [{"kind": "incast", "dst": 0, "bytes": 4_000_000}]},
        output={"traces": ["queue"], "trace_interval_ns": 2000},
    )


def test_incast_queue_and_pauses_against_pfc_alone():
    """8 x 4 MB into a 4 MiB buffer: PFC alone pauses hundreds of times; DCQCN and HPCC far less.
    Measured: none 796 pauses, peak 2.11 MB, mean 1.98 MB; DCQCN 13 / 1.91 MB / 395 KB;
    HPCC 0 / 417 KB / 4 KB. DCQCN's peak is the start-up transient: every sender starts at line
    rate and the first cut waits for the queue to pass Kmin and for a 4 us decrease check."""
    runs = {a: simulate(_incast(a)) for a in ("none", "dcqcn", "hpcc")}
    stats = {}
    for a, res in runs.items():
        port = int(np.argmax(res.outcome.world.port["max_q_bytes"]))
        t, q = queue_series(res.outcome.trace, port)
        stats[a] = (res.summary["pfc_pauses_sent"], res.summary["max_queue_bytes"], float(q.mean()), q, t)
        assert res.summary["data_packets_dropped"] == 0
    pauses_none, peak_none, mean_none, _, _ = stats["none"]
    assert pauses_none >= 100
    for a in ("dcqcn", "hpcc"):
        pauses, peak, mean, _, _ = stats[a]
        assert pauses * 10 <= pauses_none, (a, pauses, pauses_none)
        assert mean * 4 <= mean_none, (a, mean, mean_none)
        assert peak <= peak_none
    _, peak_hpcc, _, q, t = stats["hpcc"]
    assert peak_hpcc * 4 <= peak_none
    steady = q[t >= t[len(t) // 2]]
    assert steady.mean() <= 5_000, "HPCC holds the queue near zero at steady state"


@pytest.mark.parametrize("algorithm, params", ALGORITHMS, ids=IDS)
def test_deterministic_whatever_the_slice_and_traces(algorithm, params):
    sc = _shared_bottleneck(
        algorithm,
        params,
        [{"src": 1, "dst": 0, "bytes": 3_000_000}, {"src": 2, "dst": 0, "bytes": 2_000_000, "start_ns": 20_000}],
    )
    whole = simulate(sc)
    sliced = simulate(sc, slice_events=997)
    untraced = simulate(sc.model_copy(update={"output": sc.output.model_copy(update={"traces": []})}))
    assert whole.rows == sliced.rows == untraced.rows
    assert np.array_equal(whole.outcome.trace, sliced.outcome.trace)
    assert whole.summary["cnps_sent"] == sliced.summary["cnps_sent"]


# ---- why HPCC slows ResNet-50's overlapping all-reduces (docs/performance.md, "Congestion-control ablation") ----
# HPCC's multiplicative step R = R_c eta / U scales every flow on a link by the same factor, so
# it keeps their rate ratios; only the additive R_AI per reference update evens them out. With
# n flows summing to S ~ eta B, a gap between two flows shrinks by at most (1 - n R_AI / S) per
# update, and updates come at most once per base RTT T. At the HPCC ns-3 profile's R_AI
# (40 Mb/s at 100 Gb/s) that is a time constant of about 600 T, 2.5 ms on one switch.


def _latecomer(params):
    """Three flows share host 0's link; a fourth joins at 300 us at line rate (HPCC's start)."""
    flows = [{"src": s, "dst": 0, "bytes": 16_000_000} for s in (1, 2, 3)]
    flows.append({"src": 4, "dst": 0, "bytes": 8_000_000, "start_ns": 300_000})
    return scenario(
        topology={"kind": "single_switch", "hosts": 5},
        network={"cc": {"algorithm": "hpcc", "params": params}},
        workload={"flows": flows},
        output={"traces": ["rate"], "trace_interval_ns": 2000},
    )


@pytest.mark.parametrize("rai_scale", [1, 100])
def test_hpcc_keeps_a_latecomers_larger_share_until_additive_increase_evens_it(rai_scale):
    res = simulate(_latecomer({"rate_ai_mbps": 40.0 * rai_scale} if rai_scale != 1 else {}))
    world, trace = res.outcome.world, res.outcome.trace
    p = world.ccp[0]
    n, rai, T = 4, p[cc_hpcc.P_RAI], p[cc_hpcc.P_BASE_RTT_PS]
    window = 50 * US

    def shares(t0):
        g = np.array([throughput_bps(trace, f, t0, t0 + window) for f in range(4)])
        return g, g[3] - g[:3].mean()

    t_early, t_late = 350 * US, 1350 * US
    early, gap_early = shares(t_early)
    late, gap_late = shares(t_late)
    # the fastest the additive term can close a gap: one (1 - n R_AI / (eta B)) per base RTT
    floor = (1 - n * rai / (0.95 * LINE)) ** ((t_late - t_early) / T)
    print(
        f"R_AI {rai / 1e6:.0f} Mb/s: latecomer / others {early[3] / early[:3].mean():.2f} at 350 us, "
        f"{late[3] / late[:3].mean():.2f} at 1350 us; gap kept {gap_late / gap_early:.3f}, floor {floor:.3g}"
    )
    if rai_scale == 1:
        assert sum(late) * _wire_factor(world) == pytest.approx(0.95 * LINE, rel=0.02)  # efficient all along
        assert early[3] >= 2 * early[:3].mean(), "the latecomer starts at line rate and keeps its lead"
        assert gap_late >= floor * gap_early
        assert late[3] >= 2 * late[:3].mean(), "a millisecond later it still sends twice their rate"
    else:  # 100 x R_AI: the floor is ~1e-9; the four flows are even and fill the link
        assert sum(late) * _wire_factor(world) >= 0.95 * LINE
        assert jain_index(late) >= 0.999


def test_hpcc_state_mid_run_shows_why_the_ratio_holds():
    """The state behind the shares, 700 us after the latecomer joined: every flow's INT feedback
    gives the same utilisation U of the shared link (so one factor eta / U scales them all), each
    window is its rate over T, and the latecomer's reference rate is still more than twice the
    others'."""
    world = prepare_scenario(_latecomer({})).world
    world = advance_to(world, 1000 * US)
    qps = [qp_of(world, f) for f in range(4)]  # all four still sending
    c = world.ccs[qps]
    T = world.ccp[0, cc_hpcc.P_BASE_RTT_PS]
    assert c["util"].max() / c["util"].min() < 1.02, f"one bottleneck, one U: {c['util']}"
    assert c["util"].mean() == pytest.approx(0.95, abs=0.05)  # held near eta
    windows = world.qp["window_bytes"][qps]
    assert windows == pytest.approx(c["rate"] * T / 8e12, rel=1e-6, abs=1)  # W = R T
    assert c["ref_rate"][3] >= 2 * c["ref_rate"][:3].max()
    print(f"U {c['util'].round(3)}, R_c {np.round(c['ref_rate'] / 1e9, 2)} Gb/s, W {windows} B")


def _overlapping_all_reduces(params, n=8, gap_ns=32_000, sizes=(4_718_592, 2_097_152)):
    """n ring all-reduces over a k=4 fat-tree, one launched every gap_ns as backward passes do."""
    compute, collectives = [], []
    for i in range(n):
        if i:
            compute.append({"name": f"gap{i}", "duration_ns": gap_ns, "after": [f"gap{i - 1}"] if i > 1 else []})
        collectives.append(
            {"name": f"ar{i}", "kind": "all_reduce", "bytes": sizes[i % len(sizes)], "after": [f"gap{i}"] if i else []}
        )
    algorithm = "hpcc" if params is not None else "none"
    return scenario(
        topology={"kind": "fat_tree", "k": 4, "link": {"rate_gbps": 100, "delay_ns": 1000}},
        # a queue pair per flow: the overlapping all-reduces share each NIC round robin (on one connection they queue)
        network={"cc": {"algorithm": algorithm, "params": params or {}}, "nic": {"queue_pair": "flow"}},
        workload={"compute": compute, "collectives": collectives},
    )


def test_hpcc_slows_overlapping_ring_all_reduces_through_uneven_shares():
    """The ablation's 1.3-1.5x: ring steps wait for their slowest flow, and under HPCC the flows
    of one step hold uneven shares. Measured: PFC alone 1.0, HPCC 1.30, HPCC with 100 x R_AI 1.08."""
    runs = {
        "none": simulate(_overlapping_all_reduces(None)),
        "hpcc": simulate(_overlapping_all_reduces({})),
        "hpcc_fast_ai": simulate(_overlapping_all_reduces({"rate_ai_mbps": 4000.0})),
    }
    end = {k: r.summary["sim_time_ns"] for k, r in runs.items()}
    explained = (1124 + 128) / (1082 + 86) / 0.95  # eta and 42 B of INT per data packet and ACK
    spread = {}
    for k, r in runs.items():  # per ring step (16 flows, one per rank): last finish - first finish
        fl = r.outcome.world.flow
        finish = fl["finish_ps"][fl["size_bytes"] > 0].reshape(-1, 16)
        spread[k] = float(np.median(finish.max(axis=1) - finish.min(axis=1))) / US
    print({k: round(v / end["none"], 3) for k, v in end.items()}, "median step spread (us)", spread)
    assert end["hpcc"] >= 1.2 * end["none"], "uneven shares cost more than eta and INT explain"
    assert end["hpcc_fast_ai"] <= explained * end["none"], "with a fast additive term only eta and INT remain"
    assert spread["hpcc"] >= 3 * spread["hpcc_fast_ai"]
