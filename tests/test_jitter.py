"""network.jitter (core/jitter.py): none is the exact model and draws nothing; a jittered run is the
same for a seed however it is sliced; the holds add their mean to a lone flow's completion; they
never reorder a link. And the statistics over seeds (results/seeds.py) and ``run --seeds``."""

import json
import math
from pathlib import Path

import numpy as np
import pytest

from roce_emu.api import prepare_scenario, run
from roce_emu.core import kinds as K
from roce_emu.results.seeds import SEED_COLUMNS, spread, t_quantile
from roce_emu.run.inputs import accuracy_warnings, check_inputs, memo_settings, why_no_memo, why_no_trains

from conftest import cli, scenario, simulate

ROOT = Path(__file__).resolve().parent.parent


def lone_flow(jitter: dict | None = None, seed: int = 1, nbytes: int = 200_000):
    """One flow (200 packets, else nbytes) between two hosts of one switch, no congestion control (nothing
    else draws)."""
    return scenario(
        seed=seed,
        topology={"kind": "single_switch", "hosts": 2, "link": {"rate_gbps": 100, "delay_ns": 1000}},
        network={} if jitter is None else {"jitter": jitter},
        workload={"flows": [{"src": 0, "dst": 1, "bytes": nbytes}]},
    )


def uniform(nic_ns: float, switch_ns: float) -> dict:
    return {
        "nic": {"distribution": "uniform", "mean_ns": nic_ns},
        "switch": {"distribution": "uniform", "mean_ns": switch_ns},
    }


def test_no_jitter_is_the_exact_model_and_draws_nothing():
    """Left out, none, or a mean of 0: the same flows to the picosecond, and the generator untouched."""
    exact = simulate(lone_flow())
    for jitter in (
        {"nic": {"distribution": "none"}},
        {"nic": {"distribution": "exponential", "mean_ns": 0}, "switch": {"distribution": "normal", "mean_ns": 0}},
    ):
        prepared = prepare_scenario(lone_flow(jitter))
        rng0 = prepared.world.rng[0]
        assert prepared.world.cfg[K.CFG_JITTER_NIC] == prepared.world.cfg[K.CFG_JITTER_SWITCH] == K.JD_NONE
        result = run(prepared, write=False, progress=False)
        assert result.rows == exact.rows
        assert result.outcome.world.rng[0] == rng0
    prepared = prepare_scenario(lone_flow(uniform(10, 10)))
    rng0 = prepared.world.rng[0]
    assert run(prepared, write=False, progress=False).outcome.world.rng[0] != rng0


def test_a_one_packet_flow_finishes_later_by_the_mean_holds_of_its_round_trip():
    """Closed form. A one-packet flow ends when its ACK is back, later than without jitter by the six
    holds of its round trip: the sending NIC, the switch and the receiving NIC on the way there, the
    receiving NIC, the switch and the sending NIC for the ACK. Uniform holds on [0, 2m]: the delay is
    0 to 8 m_nic + 4 m_switch, of mean 4 m_nic + 2 m_switch and variance 4 (2 m_nic)^2/12 + 2 (2 m_switch)^2/12."""
    m_nic, m_switch = 100.0, 40.0
    base = simulate(lone_flow(nbytes=1000)).summary["last_finish_ns"]
    added = np.array(
        [
            simulate(lone_flow(uniform(m_nic, m_switch), seed, nbytes=1000)).summary["last_finish_ns"] - base
            for seed in range(60)
        ]
    )
    assert (added >= 0).all() and (added <= 8 * m_nic + 4 * m_switch + 1e-6).all()
    expected = 4 * m_nic + 2 * m_switch
    sd_one = math.sqrt(4 * (2 * m_nic) ** 2 / 12 + 2 * (2 * m_switch) ** 2 / 12)
    assert abs(added.mean() - expected) < 4 * sd_one / math.sqrt(len(added)), (added.mean(), expected)
    assert added.std(ddof=1) == pytest.approx(sd_one, rel=0.3)


def test_holds_are_latency_not_occupancy():
    """A 200-packet flow at line rate: each stage (NIC, switch, NIC, and back) delays the packets by at
    most its longest hold, since the port serialises the next packet meanwhile; so the flow ends no
    later than the six longest holds, not 200 holds, after it would without jitter. (With equal link
    rates the switch's queue carries an early packet's long hold on to the packets behind it: the
    delay is near the longest holds, not the mean ones.)"""
    m = 500.0
    base = simulate(lone_flow()).summary["last_finish_ns"]
    for seed in range(3):
        added = simulate(lone_flow(uniform(m, m), seed)).summary["last_finish_ns"] - base
        assert 2 * m < added <= 6 * 2 * m + 1e-6, added


@pytest.mark.parametrize("distribution", ["uniform", "exponential", "normal"])
def test_holds_far_longer_than_a_packet_never_reorder_a_link(distribution):
    """Holds of microseconds, many packet times: the receivers see every flow in order (no NACK, no
    retransmission), through a switch where three flows meet, and every packet arrives."""
    sc = scenario(
        seed=3,
        topology={"kind": "single_switch", "hosts": 4, "link": {"rate_gbps": 100, "delay_ns": 1000}},
        network={
            "jitter": {
                "nic": {"distribution": distribution, "mean_ns": 2000},
                "switch": {"distribution": distribution, "mean_ns": 1000},
            }
        },
        workload={"flows": [{"src": s, "dst": 0, "bytes": 300_000} for s in (1, 2, 3)]},
    )
    s = simulate(sc).summary
    assert s["flows_finished"] == 3
    assert s["nacks_sent"] == 0 and s["retransmits"] == 0 and s["data_packets_dropped"] == 0


def _congested(seed: int):
    """DCQCN on a shared bottleneck (ECN marks draw too) under every kind of jitter."""
    return scenario(
        seed=seed,
        topology={"kind": "single_switch", "hosts": 3, "link": {"rate_gbps": 100, "delay_ns": 1000}},
        network={
            "cc": {"algorithm": "dcqcn"},
            "jitter": {"nic": {"distribution": "normal"}, "switch": {"distribution": "exponential"}},
        },
        workload={
            "flows": [
                {"src": 1, "dst": 0, "bytes": 2_000_000},
                {"src": 2, "dst": 0, "bytes": 1_000_000, "start_ns": 5000},
            ]
        },
    )


def test_jitter_is_deterministic_per_seed_whatever_the_slice():
    whole = simulate(_congested(1))
    sliced = simulate(_congested(1), slice_events=997)
    assert whole.rows == sliced.rows
    assert whole.summary["ecn_marks"] == sliced.summary["ecn_marks"]
    assert simulate(_congested(2)).rows != whole.rows


def test_jitter_runs_every_packet_alone_and_without_the_memo():
    """Trains would send a train's packets with one hold, and the memo's components never repeat: both
    are off under jitter, and the run says so."""
    sc = _congested(1)
    assert "jitter" in why_no_trains(sc) and "jitter" in why_no_memo(sc)
    for mode in ("trains", "memo"):
        moded = sc.model_copy(update={"sim": sc.sim.model_copy(update={"fast_forward": mode})})
        inputs = check_inputs(moded)
        (line,) = accuracy_warnings(moded, inputs.fabric, inputs.workload)
        assert "network.jitter" in line and "exact engine" in line
    trains = sc.model_copy(update={"sim": sc.sim.model_copy(update={"fast_forward": "trains"})})
    assert prepare_scenario(trains).world.cfg[K.CFG_TRAIN_MAX] == 0
    assert not memo_settings(sc.model_copy(update={"sim": sc.sim.model_copy(update={"fast_forward": "memo"})})).enabled


def test_the_literature_defaults_fill_in_a_left_out_mean():
    sc = lone_flow({"nic": {"distribution": "normal"}, "switch": {"distribution": "uniform", "mean_ns": 30}})
    assert sc.network.jitter.nic.resolved("nic") == ("normal", 100.0, 50.0)
    assert sc.network.jitter.switch.resolved("switch") == ("uniform", 30.0, 0.0)
    cfg = prepare_scenario(sc).world.cfg
    assert cfg[K.CFG_JITTER_NIC] == K.JD_NORMAL and cfg[K.CFG_JITTER_NIC_MEAN_PS] == 100_000
    assert cfg[K.CFG_JITTER_NIC_SD_PS] == 50_000 and cfg[K.CFG_JITTER_SWITCH_MEAN_PS] == 30_000


@pytest.mark.parametrize(
    "value, needle",
    [
        (
            "{nic: {distribution: uniform, sd_ns: 5}}",
            "network.jitter.nic.sd_ns: 5 is not allowed with distribution uniform",
        ),
        ("{switch: {mean_ns: 5}}", "network.jitter.switch.mean_ns: 5 is not allowed without a distribution"),
        ("{nic: {distribution: gamma}}", "network.jitter.nic.distribution"),
        ("{nic: {distribution: normal, mean_ns: -1}}", "network.jitter.nic.mean_ns"),
    ],
)
def test_bad_jitter_is_one_line_exit_2(value, needle):
    p = cli("validate", "scenarios/single_flow.yaml", "--set", f"network.jitter={value}", timeout=120)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert needle in p.stderr and "single_flow.yaml" in p.stderr


# ---- statistics over seeds ------------------------------------------------------------------------
@pytest.mark.quick
def test_t_quantiles_and_the_interval():
    assert t_quantile(1) == pytest.approx(12.7062, abs=1e-4)
    assert t_quantile(4) == pytest.approx(2.7764, abs=1e-4)
    assert t_quantile(30) == pytest.approx(2.0423, abs=1e-4)
    assert t_quantile(31) == pytest.approx(2.0395, abs=1e-4)  # beyond the table: the expansion
    assert t_quantile(120) == pytest.approx(1.9799, abs=1e-4)
    assert t_quantile(10**6) == pytest.approx(1.95997, abs=1e-5)
    st = spread([1.0, 2.0, 3.0, 4.0, 5.0, float("nan")])
    assert (st.n, st.mean, st.sd) == (5, 3.0, pytest.approx(math.sqrt(2.5)))
    assert st.half == pytest.approx(2.776445 * math.sqrt(2.5) / math.sqrt(5))
    assert (st.low, st.high) == (pytest.approx(3 - st.half), pytest.approx(3 + st.half))
    one = spread([7.0])
    assert (one.n, one.mean, one.sd, one.bar) == (1, 7.0, 0.0, 0.0) and math.isnan(one.half)


def test_run_seeds_writes_each_seed_and_their_statistics(tmp_path):
    out = tmp_path / "seeds"
    p = cli(
        "run",
        "scenarios/single_flow.yaml",
        "--set",
        "network.jitter.nic.distribution=exponential",
        "--set",
        "seed=4",
        "--seeds",
        "3",
        "--out",
        out,
    )
    assert p.returncode == 0, p.stderr
    assert sorted(x.name for x in out.iterdir() if not x.name.startswith(".")) == [
        "seed-4",
        "seed-5",
        "seed-6",
        "seeds.csv",
        "seeds.json",
    ]
    lines = (out / "seeds.csv").read_text().splitlines()
    assert lines[0].split(",") == list(SEED_COLUMNS)
    finish = [float(line.split(",")[SEED_COLUMNS.index("last_finish_ns")]) for line in lines[1:]]
    summaries = [json.loads((out / f"seed-{s}" / "summary.json").read_text()) for s in (4, 5, 6)]
    assert [s["seed"] for s in summaries] == [4, 5, 6]
    assert finish == [s["last_finish_ns"] for s in summaries] and len(set(finish)) == 3
    info = json.loads((out / "seeds.json").read_text())
    st = spread(finish)
    assert info["metric"] == "last_finish_ns" and info["n"] == 3 and info["seeds"] == [4, 5, 6]
    assert info["mean_ns"] == pytest.approx(st.mean) and info["sd_ns"] == pytest.approx(st.sd)
    assert info["interval_low_ns"] == pytest.approx(st.low) and info["interval_high_ns"] == pytest.approx(st.high)
    last = p.stderr.strip().splitlines()[-1]
    assert "last finish over 3 seeds" in last and "95% interval" in last and str(out) in last
