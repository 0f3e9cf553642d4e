"""Background traffic (patterns of kind poisson) and FCT slowdown by flow size: the load, the
size distribution and the arrivals against what the CDF and the Poisson process give, and
the table and figure a run reports."""

import numpy as np
import pandas as pd
import pytest

from conftest import scenario
from roce_emu.api import prepare_scenario, run
from roce_emu.errors import ScenarioError
from roce_emu.run.inputs import check_inputs
from roce_emu.workload.background import BUILTIN, cdf_path, draw_sizes, mean_size, read_cdf

RATE = 100e9


def poisson(load=0.5, cdf="websearch", duration_ns=2e7, seed=1, extra=(), **topology):
    return scenario(
        seed=seed,
        topology=topology or {"kind": "fat_tree", "k": 4},
        workload={"patterns": [{"kind": "poisson", "load": load, "cdf": cdf, "duration_ns": duration_ns}, *extra]},
    )


def second_moment(sizes, cum):
    """E[X^2] of the piecewise-linear CDF: each step uniform on its interval."""
    a, b, p = sizes[:-1], sizes[1:], np.diff(cum)
    return float(np.sum(p * (a * a + a * b + b * b) / 3))


@pytest.mark.quick
@pytest.mark.parametrize("name", BUILTIN)
def test_shipped_distributions_read(name):
    sizes, cum = read_cdf(name, "s", "k")
    assert cum[0] == 0 and cum[-1] == 1 and (np.diff(sizes) >= 0).all() and mean_size(sizes, cum) > 0


@pytest.mark.quick
def test_load_sizes_and_arrivals_follow_the_model():
    """16 hosts at 100 Gb/s, load 0.5 of web-search flows for 20 ms. The offered bytes are a
    compound Poisson sum: mean load x rate x time per host, variance (arrival rate x time) x
    E[size^2]; within 4 standard deviations. The sizes pass a Kolmogorov-Smirnov test against
    the CDF at the 1 % level (1.63 / sqrt(n)); no flow goes to its own host."""
    flows = check_inputs(poisson()).workload.flows
    sizes, cum = read_cdf("websearch", "s", "k")
    mean, m2 = mean_size(sizes, cum), second_moment(sizes, cum)
    per_host = 0.5 * RATE * 0.02 / (8 * mean)  # expected flows per host
    expected_bytes = 16 * per_host * mean
    sigma = np.sqrt(16 * per_host * m2)
    assert abs(flows.size_bytes.sum() - expected_bytes) < 4 * sigma
    assert abs(len(flows) - 16 * per_host) < 4 * np.sqrt(16 * per_host)
    empirical = np.searchsorted(np.sort(flows.size_bytes), sizes, side="right") / len(flows)
    assert np.max(np.abs(empirical - cum)) < 1.63 / np.sqrt(len(flows))
    assert (flows.src != flows.dst).all() and set(flows.src.tolist()) == set(range(16))
    assert flows.start_ps.min() >= 0 and flows.start_ps.max() < 2e7 * 1000
    assert (np.diff(flows.start_ps) >= 0).all()


@pytest.mark.quick
def test_draws_are_the_inverse_cdf():
    sizes, cum = np.array([0.0, 100, 1100]), np.array([0.0, 0.5, 1.0])
    assert draw_sizes(sizes, cum, np.array([0.25, 0.5, 0.75, 1.0])).tolist() == [50, 100, 600, 1100]


@pytest.mark.quick
def test_seeded_and_apart_from_other_patterns():
    a, b = (check_inputs(poisson(seed=7)).workload.flows for _ in range(2))
    assert np.array_equal(a.size_bytes, b.size_bytes) and np.array_equal(a.start_ps, b.start_ps)
    assert not np.array_equal(check_inputs(poisson(seed=8)).workload.flows.size_bytes[:20], a.size_bytes[:20])
    perm = {"kind": "permutation", "bytes": 1000}
    alone = check_inputs(scenario(topology={"kind": "fat_tree", "k": 4}, workload={"patterns": [perm]}))
    beside = check_inputs(poisson(extra=[perm]))
    n = len(alone.workload.flows)
    assert np.array_equal(alone.workload.flows.dst, beside.workload.flows.dst[-n:])  # the same derangement


def test_run_reports_slowdown_by_size(tmp_path):
    """Background traffic beside a ring all-reduce: fct_by_size.csv covers every finished
    background flow in size deciles with ordered percentiles (the all-reduce's own flows are in
    collectives.csv), and the fct_slowdown figure draws them."""
    from roce_emu.results.figures import fct_figure

    sc = scenario(
        topology={"kind": "fat_tree", "k": 4},
        workload={
            "patterns": [{"kind": "poisson", "load": 0.3, "cdf": "fb_hadoop", "duration_ns": 2e5}],
            "collectives": [{"kind": "all_reduce", "bytes": 1_000_000}],
        },
    )
    res = run(prepare_scenario(sc), tmp_path / "run", progress=False)
    table = pd.read_csv(tmp_path / "run" / "fct_by_size.csv")
    flows = pd.read_csv(tmp_path / "run" / "flows.csv")
    ring_flows = 16 * 2 * 15  # 2 (p - 1) steps of 16 flows
    assert table["flows"].sum() == flows["fct_ns"].notna().sum() == res.summary["flows_finished"] - ring_flows
    assert (table["slowdown_p50"] <= table["slowdown_p95"]).all()
    assert (table["slowdown_p95"] <= table["slowdown_p99"]).all()
    assert (table["slowdown_p50"] >= 1 - 1e-9).all()
    assert (table["min_bytes"].iloc[1:].to_numpy() >= table["max_bytes"].iloc[:-1].to_numpy()).all()
    assert fct_figure(tmp_path / "run") is not None


def test_bad_background_input(tmp_path):
    bad = tmp_path / "cdf.txt"
    bad.write_text("0 0\n1000 50\n500 100\n")
    with pytest.raises(ScenarioError) as err:
        check_inputs(poisson(cdf=str(bad)))
    assert err.value.source == str(bad) and err.value.key == "line 3" and "must grow" in err.value.message
    bad.write_text("0 0\n1000 90\n")
    with pytest.raises(ScenarioError, match="must end at 100"):
        check_inputs(poisson(cdf=str(bad)))
    with pytest.raises(ScenarioError, match="neither a shipped distribution"):
        check_inputs(poisson(cdf="no_such_thing"))
    with pytest.raises(Exception, match="duration_ns is required by kind 'poisson'"):
        scenario(workload={"patterns": [{"kind": "poisson", "load": 0.3, "cdf": "websearch"}]})
    with pytest.raises(Exception, match="bytes is not used by kind 'poisson'"):
        scenario(
            workload={"patterns": [{"kind": "poisson", "load": 0.3, "cdf": "websearch", "duration_ns": 1, "bytes": 5}]}
        )
    assert cdf_path("websearch").is_file()
