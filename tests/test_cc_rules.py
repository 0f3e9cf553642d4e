"""Congestion-control update rules against hand-computed cases (docs/model.md §1.5, §2.3, §3, §10)."""

import numpy as np
import pytest

from conftest import advance_to, one_flow, qp_of, scenario, simulate
from roce_emu.api import prepare_scenario
from roce_emu.config import load_scenario
from roce_emu.core.cc import dispatch as cc, hpcc as cc_hpcc, timely as cc_timely
from roce_emu.core import kinds as K
from roce_emu.core.packets import pkt_alloc
from roce_emu.core.qp import qp_open
from roce_emu.core.state import INT_PORT, INT_QLEN, INT_TS_PS, INT_TX_BYTES
from roce_emu.errors import ScenarioError

pytestmark = pytest.mark.quick

US = 10**6  # ps
LINE = 100e9


def _rate_at(world, t_ps):
    world = advance_to(world, t_ps)
    return world, float(world.ccs[qp_of(world, 0)]["rate"])


def test_dcqcn_cx_single_cnp_trajectory():
    """One CNP at t0, no marks after it (ECN off): docs/model.md §1.5 with the HPCC dcqcn profile."""
    world = prepare_scenario(one_flow("dcqcn", ecn=False)).world
    t0 = 10 * US
    world = advance_to(world, t0)
    f = qp_of(world, 0)
    assert world.ccs[f]["rate"] == LINE
    cc.on_cnp(world, np.int32(f), t0)
    alpha = (255 / 256) ** 4  # four alpha updates at t0 + 1..4 us without a CNP
    first = LINE * (1 - alpha / 2)
    world, r = _rate_at(world, t0 + 4 * US + 999)
    assert r == LINE, "the cut waits for the decrease check at +4 us + 1 ns"
    world, r = _rate_at(world, t0 + 4 * US + 1000)
    assert r == pytest.approx(first, rel=1e-12)
    assert r / 1e9 == pytest.approx(50.777, rel=1e-3)
    assert world.ccs[f]["target"] == LINE, "s = 0 and no clamp: the target stays"
    world, r = _rate_at(world, t0 + 304 * US + 1000)  # fast recovery (s = 0 < F = 1)
    assert r / 1e9 == pytest.approx(75.39, rel=1e-3)
    assert r == pytest.approx((first + LINE) / 2, rel=1e-12)
    world, r = _rate_at(world, t0 + 604 * US + 1000)  # active increase: target capped at line
    assert r / 1e9 == pytest.approx(87.69, rel=1e-3)
    world, r = _rate_at(world, t0 + 904 * US + 1000)  # then the gap to 100G halves every tick
    assert r == pytest.approx(LINE - (LINE - first) / 8, rel=1e-12)
    assert world.stats[K.C_CNPS] == 0


def test_dcqcn_cx_replays_the_hpcc_simulators_cuts():
    """The CNP arrivals of one flow in the simulator (2 x 1 MB into one host, run.py's DCQCN at
    100 Gb/s, RngRun 1; rdma-hw.cc with PRINT_LOG on) replayed into the cx reaction point give
    the rates the simulator printed at its cuts and its fast recovery (Gb/s, 3 decimals)."""
    world = prepare_scenario(one_flow("dcqcn", ecn=False)).world
    t0 = 10 * US
    world = advance_to(world, t0)
    f = qp_of(world, 0)
    cnps_ns = [38370, 39200, 48662, 59452, 62938]  # CNP-flagged ACKs, ns after the flows start
    printed = {42371: 50.584, 50371: 26.259, 62371: 14.160, 66371: 7.710, 366371: 53.855}
    events = sorted([(t, "cnp") for t in cnps_ns] + [(t, "rate") for t in printed])
    for t_ns, what in events:
        at = t0 + (t_ns - cnps_ns[0]) * 1000
        if what == "cnp":
            world = advance_to(world, at - 1)
            cc.on_cnp(world, np.int32(f), at)
        else:
            world, r = _rate_at(world, at)
            assert r / 1e9 == pytest.approx(printed[t_ns], abs=5e-4), t_ns
            assert world.ccs[f]["target"] == LINE


def test_dcqcn_paper_cut_and_fast_recovery():
    """Paper variant: one CNP at alpha = 1 halves the rate at once; after T = 55 us the first
    fast-recovery step closes half the gap to the target."""
    world = prepare_scenario(one_flow("dcqcn", {"variant": "paper"}, ecn=False)).world
    t0 = 10 * US
    world = advance_to(world, t0)
    f = qp_of(world, 0)
    cc.on_cnp(world, np.int32(f), t0)
    assert world.ccs[f]["rate"] == LINE / 2
    assert world.ccs[f]["alpha"] == 1.0  # (1 - g) * 1 + g
    world, r = _rate_at(world, t0 + 55 * US - 1)
    assert r == LINE / 2
    world, r = _rate_at(world, t0 + 55 * US)
    assert r == 0.75 * LINE
    assert world.ccs[f]["alpha"] == pytest.approx(1 - 1 / 256)  # K = 55 us passed without a CNP


@pytest.mark.parametrize("variant", ["cx", "paper"])
def test_dcqcn_no_cnp_without_marks(variant):
    res = simulate(_incast("dcqcn", {"variant": variant}, ecn=False, output={"traces": ["rate"]}))
    assert res.summary["ecn_marks"] == 0
    assert res.summary["cnps_sent"] == 0
    rates = res.outcome.trace[res.outcome.trace[:, 1] == K.TR_RATE, 3]
    assert len(rates) > 8 and np.all(rates == LINE), "no CNP, no cut"


def test_dcqcn_cnps_follow_marks():
    cx = simulate(_incast("dcqcn", {}))
    assert cx.summary["ecn_marks"] > 0
    # lossless, every marked packet is delivered and its ACK carries the CNP flag
    assert cx.summary["cnps_sent"] == cx.summary["ecn_marks"]
    paper = simulate(_incast("dcqcn", {"variant": "paper"}))
    duration_us = paper.summary["last_finish_ns"] / 1000
    assert 0 < paper.summary["cnps_sent"] <= paper.summary["ecn_marks"]
    assert paper.summary["cnps_sent"] <= 8 * (duration_us / 50 + 1), "at most one CNP per flow per 50 us"


def _incast(algorithm, params, ecn=True, size=2_000_000, **extra):
    return scenario(
        topology={"kind": "single_switch", "hosts": 9},
        network={
            "cc": {"algorithm": algorithm, "params": params},
            "switch": {"buffer_bytes": 4 * 1024 * 1024, "ecn": {"enabled": ecn}},
        },
        workload={"flows": [{"src": s, "dst": 0, "bytes": size} for s in range(1, 9)]},
        **extra,
    )


def test_hpcc_window_update_matches_hand_computed_int():
    """One hop, T = 10 us, B = 100 Gb/s, eta = 0.95, R_AI = 40 Mb/s, maxStage = 0.
    Last INT: ts 1 us, txBytes 100,000, qlen 20,000. New INT: 2 us later, 25,000 bytes
    more, qlen 30,000. Then u = min(30000, 20000) * 8 / (1e11 * 1e-5) + 25000 * 8 / 2e-6 / 1e11
    = 0.16 + 1.0 = 1.16; tau / T = 0.2, so U = 0.8 * 0.9 + 0.2 * 1.16 = 0.952;
    R = R_c / (U / eta) + R_AI = 80e9 * 0.95 / 0.952 + 40e6 = 79,871,932,773.1 bit/s;
    W = R * T / 8 = 99,839.9 -> 99,839 bytes."""
    world = prepare_scenario(one_flow("hpcc", {"base_rtt_ns": 10_000}, size=10_000_000)).world
    switch_port = int(np.flatnonzero(world.port["at_host"] == 0)[0])
    f = qp_open(world, np.int64(0))
    world.ccs[f]["ref_rate"] = 80e9
    world.ccs[f]["util"] = 0.9
    world.ccs[f]["n_hops"] = 1
    world.ccs[f]["update_seq"] = 10
    world.qp[f]["snd_nxt"] = 50
    world.int_prev[f, 0, [INT_TS_PS, INT_TX_BYTES, INT_QLEN, INT_PORT]] = [1 * US, 100_000, 20_000, switch_port]
    k = pkt_alloc(world, K.PK_ACK, np.int64(f), np.int64(11), np.int64(88), K.CTRL_PRIO, np.int64(1))
    world.int_rec[k, 0, [INT_TS_PS, INT_TX_BYTES, INT_QLEN, INT_PORT]] = [3 * US, 125_000, 30_000, switch_port]
    world.pkt[k]["n_int"] = 1
    cc_hpcc.on_ack(world, np.int32(f), k)
    c = world.ccs[f]
    assert c["util"] == pytest.approx(0.952, rel=1e-12)
    assert c["rate"] == pytest.approx(79_871_932_773.1, rel=1e-10)
    assert world.qp[f]["window_bytes"] == 99_839
    assert c["ref_rate"] == c["rate"] and c["update_seq"] == 50, "seq 11 > 10: the per-RTT update commits"
    # a second ACK inside the same RTT reacts from the unchanged reference rate
    world.int_rec[k, 0, [INT_TS_PS, INT_TX_BYTES]] = [5 * US, 150_000]  # again 100 Gb/s
    world.pkt[k]["seq"] = 12
    committed = c["ref_rate"]
    cc_hpcc.on_ack(world, np.int32(f), k)
    u = 30_000 * 8 / 1e6 + 1.0
    U = 0.8 * 0.952 + 0.2 * u
    assert world.ccs[f]["rate"] == pytest.approx(committed / (U / 0.95) + 40e6, rel=1e-10)
    assert world.ccs[f]["ref_rate"] == committed


def test_hpcc_lone_flow_settles_at_eta_b_plus_rai():
    """docs/model.md §10.5: maxStage = 0, R_AI = 40 Mb/s at 100G: R = 0.95 * 100G + 40M = 95.04 Gb/s,
    with the queue near zero."""
    res = simulate(one_flow("hpcc", size=20_000_000, output={"traces": ["rate", "queue"], "trace_interval_ns": 10_000}))
    t = res.outcome.trace
    rates = t[(t[:, 1] == K.TR_RATE)][:, 3]
    settled = rates[len(rates) // 2 :]
    assert np.all(np.abs(settled / 95.04e9 - 1) < 1e-3), (settled.min(), settled.max())
    queue = t[t[:, 1] == K.TR_QUEUE][:, 3]
    assert queue[len(queue) // 2 :].max() <= 2 * 1124, "at most a packet or two queued"


def test_timely_gradient_rule_hand_computed():
    """HPCC-model TIMELY defaults (alpha 0.875, beta 0.8, T_low 50 us, T_high 500 us, minRTT 20 us,
    delta 100 Mb/s, HAI 500 Mb/s after 5 increases), from R_c = 50 Gb/s, last RTT 60 us."""
    p = np.zeros((1, cc_timely.N_PARAMS))  # one row of parameters
    p[
        0,
        [
            cc_timely.P_ALPHA,
            cc_timely.P_BETA,
            cc_timely.P_T_LOW_PS,
            cc_timely.P_T_HIGH_PS,
            cc_timely.P_MIN_RTT_PS,
            cc_timely.P_RAI,
            cc_timely.P_RHAI,
            cc_timely.P_HAI_N,
        ],
    ] = [0.875, 0.8, 50 * US, 500 * US, 20 * US, 100e6, 500e6, 5]
    # rtt 70 us: diff = 0.875 * 10 us = 8.75 us, gradient 0.4375 -> R * (1 - 0.8 * 0.4375) = 0.65 R
    rate, stage, diff = cc_timely.next_rate(p, 0, 50e9, 0, 0.0, 60 * US, 70 * US)
    assert (rate, stage, diff) == (pytest.approx(32.5e9), 0, pytest.approx(8.75 * US))
    # rtt 40 us < T_low: + delta; diff = 0.125 * 8.75 - 0.875 * 30 = -25.15625 us
    rate, stage, diff = cc_timely.next_rate(p, 0, rate, stage, diff, 70 * US, 40 * US)
    assert (rate, stage, diff) == (pytest.approx(32.6e9), 1, pytest.approx(-25.15625 * US))
    # rtt 600 us > T_high: R * (1 - 0.8 * (1 - 500/600)) = 32.6e9 * 13/15
    rate, stage, diff = cc_timely.next_rate(p, 0, rate, stage, diff, 40 * US, 600 * US)
    assert (rate, stage) == (pytest.approx(32.6e9 * 13 / 15), 0)
    assert diff == pytest.approx((0.125 * -25.15625 + 0.875 * 560) * US)
    # rtt 100 us, falling: gradient < 0 -> + delta
    r0 = rate
    rate, stage, diff = cc_timely.next_rate(p, 0, rate, stage, diff, 600 * US, 100 * US)
    assert (rate, stage) == (pytest.approx(r0 + 100e6), 1)
    # four more falling samples, then the sixth increase in a row is hyperactive
    for _ in range(4):
        rate, stage, diff = cc_timely.next_rate(p, 0, rate, stage, diff, 100 * US, 90 * US)
    assert (rate, stage) == (pytest.approx(r0 + 500e6), 5)
    rate, stage, diff = cc_timely.next_rate(p, 0, rate, stage, diff, 90 * US, 80 * US)
    assert (rate, stage) == (pytest.approx(r0 + 1000e6), 6)
    # rising between the thresholds with a large gradient: the factor floors at 0 (then min rate)
    rate, stage, diff = cc_timely.next_rate(p, 0, rate, 6, 0.0, 100 * US, 300 * US)
    assert (rate, stage) == (0.0, 0)


def test_timely_lone_flow_stays_at_line_rate():
    """With RTT far below T_low the rule only adds delta, capped at line rate. TIMELY acts all
    the while: its per-RTT updates count increases in a row (stage), and the same flow with
    T_high below its RTT is cut."""

    def rates(params):
        res = simulate(one_flow("timely", params, size=5_000_000, output={"traces": ["rate"]}))
        assert res.summary["pfc_pauses_sent"] == 0
        return res.outcome.trace[res.outcome.trace[:, 1] == K.TR_RATE, 3]

    steady = rates({})
    assert len(steady) > 1 and np.all(steady == LINE)
    world = advance_to(prepare_scenario(one_flow("timely", size=5_000_000)).world, 200 * US)
    c = world.ccs[qp_of(world, 0)]
    # an update per window of data (about 4.6 us at 100 Gb/s, 1 us links): dozens by 200 us
    assert c["stage"] >= 20 and 4 * US < c["last_rtt_ps"] < 10 * US
    cut = rates({"t_low_us": 0.5, "t_high_us": 1.0})  # every RTT is above T_high: multiplicative decrease
    assert cut.min() < 0.9 * LINE


@pytest.mark.parametrize(
    "override, needle",
    [
        (
            "network.cc.params.nope=1",
            "network.cc.params.nope: unknown parameter 'nope' for algorithm 'dcqcn' (allowed: variant, g,",
        ),
        ("network.cc.params.g=2", "network.cc.params.g: 2 is not allowed (range 0 to 1)"),
        ("network.cc.params.variant=ib", "network.cc.params.variant: 'ib' is not allowed (allowed: cx, paper)"),
        (
            "network.cc.params.rate_ai_mbps=fast",
            "network.cc.params.rate_ai_mbps: 'fast' is not allowed (a number in Mb/s)",
        ),
    ],
)
def test_bad_cc_params_name_the_key(tmp_path, override, needle):
    path = tmp_path / "s.yaml"
    path.write_text("network: {cc: {algorithm: dcqcn}}\nworkload: {flows: [{src: 0, dst: 1, bytes: 1000}]}\n")
    with pytest.raises(ScenarioError) as err:
        load_scenario(path, [override])
    assert needle in str(err.value)


@pytest.mark.parametrize(
    "overrides, needle",
    [
        (
            ["network.cc.params.t_high_us=1"],
            "network.cc.params.t_high_us: 1 is not allowed: t_low_us (50) must not exceed t_high_us (1); set both",
        ),
        (
            ["network.cc.params.t_low_us=600", "network.cc.params.t_high_us=500"],
            "network.cc.params.t_high_us: 500 is not allowed: t_low_us (600) must not exceed t_high_us (500)",
        ),
    ],
)
def test_timely_thresholds_that_cross_are_refused(tmp_path, overrides, needle):
    """Below T_low TIMELY adds delta before it looks at T_high, so a T_high under T_low (the
    default T_low included) could never cut: refused, naming both."""
    path = tmp_path / "s.yaml"
    path.write_text("network: {cc: {algorithm: timely}}\nworkload: {flows: [{src: 0, dst: 1, bytes: 1000}]}\n")
    with pytest.raises(ScenarioError) as err:
        load_scenario(path, overrides)
    assert needle in str(err.value) and "\n" not in str(err.value)
    load_scenario(path, ["network.cc.params.t_low_us=0.5", "network.cc.params.t_high_us=1"])


def test_defaults_follow_the_nic_rate_and_are_reported():
    res = simulate(
        scenario(
            topology={"kind": "single_switch", "hosts": 2, "link": {"rate_gbps": 200}},
            network={"cc": {"algorithm": "dcqcn", "params": {"g": 0.5}}},
            workload={"flows": [{"src": 1, "dst": 0, "bytes": 100_000}]},
        )
    )
    params = res.summary["cc_params"]
    assert params["g"] == 0.5
    assert params["rate_ai_mbps"] == 40.0  # 5 Mb/s per 25 Gb/s at 200 Gb/s
    assert params["variant"] == "cx"


def test_the_docs_and_the_model_document_every_parameter_table():
    from pathlib import Path

    from roce_emu.config.cc_params import markdown_table
    from roce_emu.core.cc.registry import ALGORITHMS

    root = Path(__file__).resolve().parent.parent
    for doc in ("docs/reference/congestion_control.md", "docs/model.md"):
        text = (root / doc).read_text()
        for algorithm in ALGORITHMS:
            if algorithm.params:
                assert markdown_table(algorithm.name) in text, f"{doc}'s {algorithm.name} table is out of date"


def test_every_citation_of_the_model_names_a_section_it_has():
    """Code, docs and tests cite "docs/model.md §N" (or §N-M, §N, §M); each N must be a heading."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    model = (root / "docs" / "model.md").read_text()
    sections = set(re.findall(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", model, flags=re.M))
    sections |= set(re.findall(r"^\| (\d+\.\d+) \|", model, flags=re.M))  # §10's numbered rows
    cited = {}
    files = [
        *root.glob("roce_emu/**/*.py"),
        *root.glob("tests/*.py"),
        *root.glob("benchmarks/*"),
        *root.glob("scenarios/*.yaml"),
        root / "README.md",
        *root.glob("docs/**/*.md"),
    ]
    for path in files:
        for cite in re.findall(r"docs/model\.md[`,]? ((?:§[\d.]+(?:-[\d.]+)?(?:, )?)+)", path.read_text()):
            for number in re.findall(r"[\d.]+", cite):
                cited.setdefault(number.rstrip("."), path.name)
    assert cited, "no citations found: the pattern is wrong"
    missing = {n: f for n, f in cited.items() if n not in sections}
    assert not missing, f"cited sections docs/model.md lacks: {missing}"
    outside = "REFERENCE" + ".md"  # the team's notes outside the repository
    assert not [p.name for p in files if outside in p.read_text()], "cite docs/model.md, which ships"
