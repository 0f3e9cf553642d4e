"""The memo (sim.fast_forward: memo) against the exact engine (off).

A component the memo replays must give each flow the finish the exact engine gives it from the
same start state (within 1 ns: only the order of events at one picosecond may differ); a
component that meets another flow is run into the engine; congested components are never
replayed; the run does not depend on how it is sliced; and on the shipped training scenarios the
iteration time stays within 0.1 % of off.
"""

import json
import os
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings

from conftest import assert_one_line_error, scenario, simulate
from roce_emu.api import prepare, prepare_scenario, run
from roce_emu.results.iteration import task_rows
from test_fast_forward import (
    COLLECTIVE_BOUND,
    ITERATION_BOUND,
    NUDGES_NS,
    SENSITIVITY_FACTOR,
    SHIPPED,
    _prepared,
    _results,
    nudged,
    relative_errors,
    workloads,
)

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
LEAF_SPINE = {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 4, "link": {"delay_ns": 1000}}
GAP_NS = 300_000  # far apart: each repetition starts on an idle network


def _repeated(pairs, times=4, nbytes=400_000, **extra):
    """The flows (src, dst) started together, again every GAP_NS."""
    flows = [{"src": s, "dst": d, "bytes": nbytes, "start_ns": k * GAP_NS} for k in range(times) for s, d in pairs]
    return {"topology": LEAF_SPINE, "workload": {"flows": flows}, **extra}


def _both(doc, **sim):
    """(off, memo) results of the same scenario."""
    off = simulate(scenario(**doc, sim={"fast_forward": "off", **sim}))
    memo = simulate(scenario(**doc, sim={"fast_forward": "memo", **sim}))
    return off, memo


CASES = {
    "a lone flow": [(0, 1)],
    "two flows sharing a NIC": [(0, 1), (0, 2)],
    "a flow with its reverse ACKs": [(0, 1), (1, 0)],
    "a two-leaf crossing": [(0, 4)],
    "a ring of four": [(0, 1), (1, 2), (2, 3), (3, 0)],
}


#: cases whose flows go in order on one connection (network.nic.queue_pair: connection): the
#: second flow of a pair waits for the first to have sent its last packet, inside the component
ON_CONNECTIONS = {
    "two flows on one connection": [(0, 1), (0, 1)],
    "a connection and a flow beside it": [(0, 1), (0, 1), (0, 2)],
}


@pytest.mark.parametrize("case", [*CASES, *ON_CONNECTIONS])
def test_a_replayed_component_finishes_each_flow_as_the_engine_does(case):
    if case in ON_CONNECTIONS:
        off, memo = _both(_repeated(ON_CONNECTIONS[case], network={"nic": {"queue_pair": "connection"}}))
    else:
        off, memo = _both(_repeated(CASES[case]))
    report = memo.summary["memo"]
    assert report["hits"] == 3 and report["misses"] == 1 and report["materialised"] == 0, report
    assert report["distinct_keys"] == 1, report
    assert report["events_skipped"] > 0 and memo.summary["events"] < off.summary["events"]
    diff = np.abs(np.asarray(memo.flow_table["finish_ps"]) - np.asarray(off.flow_table["finish_ps"]))
    print(f"{case}: largest finish difference {diff.max()} ps over {len(diff)} flows")
    assert diff.max() <= 1000
    for key in ("data_packets_sent", "data_packets_delivered", "acks_sent", "flows_finished"):
        assert memo.summary[key] == off.summary[key], key


@pytest.mark.parametrize("cc", ["dcqcn", "hpcc", "timely", "dctcp"])
def test_a_replayed_component_is_the_engine_s_under_every_congestion_control(cc):
    """Outcomes come from the exact engine, whatever the algorithm: two flows sharing a NIC, each
    repetition from an idle network, give each flow's finish as the engine does."""
    off, memo = _both(_repeated(CASES["two flows sharing a NIC"], network={"cc": {"algorithm": cc}}))
    report = memo.summary["memo"]
    assert report["hits"] == 3 and report["misses"] == 1, report
    diff = np.abs(np.asarray(memo.flow_table["finish_ps"]) - np.asarray(off.flow_table["finish_ps"]))
    assert diff.max() <= 1000, f"{cc}: largest finish difference {diff.max()} ps"


def test_links_count_the_replayed_bytes():
    off, memo = _both(_repeated(CASES["a two-leaf crossing"]))
    w_off, w_memo = off.outcome.world, memo.outcome.world
    for field in ("tx_bytes", "tx_data_pkts", "max_q_bytes"):
        assert np.array_equal(w_off.port[field], w_memo.port[field]), field
    assert np.array_equal(w_off.pq["tx_bytes"], w_memo.pq["tx_bytes"])
    assert off.summary["hottest_links"] == memo.summary["hottest_links"]


def test_a_flow_that_meets_a_replayed_component_runs_it_into_the_engine():
    """The fourth repetition meets a flow from another host on its receiver's link, while the
    replayed component sends: the component is materialised and both go on exactly."""
    doc = _repeated(CASES["a lone flow"])
    doc["workload"]["flows"].append({"src": 2, "dst": 1, "bytes": 400_000, "start_ns": 3 * GAP_NS + 10_000})
    off, memo = _both(doc)
    report = memo.summary["memo"]
    assert report["materialised"] == 1, report
    diff = np.abs(np.asarray(memo.flow_table["finish_ps"]) - np.asarray(off.flow_table["finish_ps"]))
    assert diff.max() <= 1000, diff


def test_a_congested_component_is_never_replayed():
    """An incast marks and pauses: volatile, so it runs in the engine every time, as off does."""
    doc = _repeated([(0, 4), (1, 4), (2, 4), (3, 4)], nbytes=2_000_000)
    doc["network"] = {"cc": {"algorithm": "dcqcn"}}
    off, memo = _both(doc)
    report = memo.summary["memo"]
    assert report["hits"] == 0 and report["volatile"] >= 1, report
    assert np.array_equal(memo.flow_table["finish_ps"], off.flow_table["finish_ps"])


def test_the_run_does_not_depend_on_its_slices():
    doc = _repeated(CASES["a ring of four"])
    sc = scenario(**doc, sim={"fast_forward": "memo"})
    whole = simulate(sc)
    sliced = simulate(sc, slice_events=997)
    assert np.array_equal(whole.flow_table["finish_ps"], sliced.flow_table["finish_ps"])
    assert whole.summary["memo"] == sliced.summary["memo"]


def test_sampled_replays_report_the_difference_they_find():
    off, memo = _both(_repeated(CASES["a ring of four"], times=6), memo_sample_per_mille=1000)
    report = memo.summary["memo"]
    assert report["sampled_components"] == 5 and report["hits"] == 0, report
    assert report["sample_max_error"] == 0.0  # the same start state gives the same outcome
    assert "warnings" not in memo.summary


def test_sampled_replays_beyond_one_percent_warn(tmp_path, monkeypatch):
    """A sampled replay that differs from the engine by more than 1 % of a flow's duration means a
    key misses something: summary.json and `roce-emu run` warn."""
    from click.testing import CliRunner

    from roce_emu.cli import main
    from roce_emu.run import driver

    honest = driver.memo_report

    def off_by_three_percent(mm, table):
        return {**honest(mm, table), "sampled_components": 2, "sample_max_error": 0.03, "sample_mean_error": 0.02}

    monkeypatch.setattr(driver, "memo_report", off_by_three_percent)
    path = tmp_path / "repeated.yaml"
    path.write_text(yaml.safe_dump({"name": "repeated", **_repeated(CASES["a lone flow"])}))
    out = CliRunner().invoke(main, ["run", str(path), "--set", "sim.fast_forward=memo", "--out", str(tmp_path / "r")])
    assert out.exit_code == 0, out.output
    (line,) = [w for w in out.output.splitlines() if w.startswith("warning: the memo's sampled replays")]
    assert "up to 3.00 %" in line and "2 components" in line and "sim.fast_forward: off" in line
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["warnings"] == [line.removeprefix("warning: ")]


@pytest.mark.parametrize("name", ["training_gpt_rail", "training_transformer"])
def test_a_training_iteration_stays_within_a_tenth_of_a_percent(name, tmp_path):
    runs = {}
    for mode in ("off", "memo"):
        prepared = prepare(SCENARIOS / f"{name}.yaml", [f"sim.fast_forward={mode}"])
        runs[mode] = run(prepared, tmp_path / mode, progress=False)
    off, memo = runs["off"].summary, runs["memo"].summary
    error = abs(memo["mean_iteration_ns"] - off["mean_iteration_ns"]) / off["mean_iteration_ns"]
    report = memo["memo"]
    print(f"{name}: iteration error {100 * error:.4f} %, events {memo['events']} of {off['events']}, {report}")
    assert error < 1e-3
    assert report["hits"] > 10 * report["misses"]
    assert memo["events"] < off["events"] / 1.2  # measured 3.4x (gpt_rail), 1.3x (transformer: DDP's first
    # bucket's all-reduce overlaps the backward pass's tensor-parallel collectives, whose components it meets)
    assert memo["approximate"]
    tasks_off = task_rows(runs["off"].outcome.world, runs["off"].prepared.workload)
    assert len(tasks_off) == len(task_rows(runs["memo"].outcome.world, runs["memo"].prepared.workload))


def test_the_engine_s_flows_in_trains_keep_the_gpt_iteration_and_take_fewer_events(tmp_path):
    """sim.memo_engine: trains: what the memo leaves to the engine sends packet trains; what it
    stores and replays stays the exact engine's (every sampled replay gives its stored outcome)."""
    runs = {}
    for engine in ("exact", "trains"):
        overrides = ["sim.fast_forward=memo", f"sim.memo_engine={engine}", "sim.memo_sample_per_mille=100"]
        prepared = prepare(SCENARIOS / "training_gpt_rail.yaml", overrides)
        runs[engine] = run(prepared, tmp_path / engine, progress=False).summary
    exact, trains = runs["exact"], runs["trains"]
    error = abs(trains["mean_iteration_ns"] - exact["mean_iteration_ns"]) / exact["mean_iteration_ns"]
    print(f"memo_engine trains: {100 * error:.4f} % from the exact engine's memo, events {trains['events']} of "
          f"{exact['events']}, {trains['trains_sent']} trains, {trains['memo']}")  # fmt: skip
    assert trains["status"] == "finished"
    assert error < 1e-3  # measured 0 (the iteration's last flows are replayed)
    assert trains["events"] < exact["events"] / 1.5  # measured 1.9x fewer (2.4x with the default sample)
    assert trains["trains_sent"] > 0 and exact["trains_sent"] == 0
    assert trains["memo"]["sampled_flows"] > 0 and trains["memo"]["sample_max_error"] == 0.0


def test_the_engine_s_flows_in_trains_warn_as_trains_do():
    engine_in_trains = ["sim.fast_forward=memo", "sim.memo_engine=trains"]
    (line,) = prepare(SCENARIOS / "training_gpt_rail.yaml", engine_in_trains).warnings
    assert line.startswith("sim.memo_engine: trains with training with tensor") and "more than 1 %" in line, line
    (line,) = prepare(SCENARIOS / "training_gpt_rail.yaml", [*engine_in_trains, "network.cc.algorithm=hpcc"]).warnings
    assert "sends no packet trains here: hpcc is clocked by a window" in line, line
    assert "The memo's engine is the exact one" in line, line


def test_memo_engine_needs_the_memo(tmp_path):
    doc = {"name": "t", "workload": {"flows": [{"src": 0, "dst": 1, "bytes": 10_000}]}}
    doc["sim"] = {"fast_forward": "trains", "memo_engine": "trains"}
    assert_one_line_error(tmp_path / "bad.yaml", doc, "sim.memo_engine", "trains applies with fast_forward: memo only")


def test_the_engine_s_flows_in_trains_do_not_depend_on_the_slices():
    doc = _repeated(CASES["a ring of four"] + [(4, 5)], nbytes=2_000_000)
    doc["workload"]["flows"].append({"src": 0, "dst": 4, "bytes": 3_000_000, "start_ns": 5_000})
    sc = scenario(**doc, sim={"fast_forward": "memo", "memo_engine": "trains"})
    whole = simulate(sc)
    sliced = simulate(sc, slice_events=997)
    assert whole.summary["trains_sent"] > 0
    assert np.array_equal(whole.flow_table["finish_ps"], sliced.flow_table["finish_ps"])
    assert whole.summary["memo"] == sliced.summary["memo"]


def test_faults_leave_the_memo_out_and_say_so():
    doc = _repeated(CASES["a lone flow"])
    doc["faults"] = [{"kind": "slow_link", "at_ns": 1000, "link": ["h0", "leaf0"], "rate_gbps": 50}]
    off, memo = _both(doc)
    assert memo.summary["memo"]["components"] == 0
    assert np.array_equal(memo.flow_table["finish_ps"], off.flow_table["finish_ps"])
    assert any("memo replays nothing here" in w for w in memo.prepared.warnings)


def _memo_misses(sc=None, path=None, overrides=(), sample=10):
    """The memo against the exact engine: {what: (error, bound)} of the iteration and
    collectives beyond ITERATION_BOUND / COLLECTIVE_BOUND and beyond twice the exact engine's own
    sensitivity to 1-5 ns longer links (rail_allreduce: the memo +2.5 %, a 1 ns longer NVLink +1.9 %)."""
    exact, _ = _results(_prepared(sc, path, overrides, "off"))
    if path is not None:
        memo_run = prepare(path, [*overrides, "sim.fast_forward=memo", f"sim.memo_sample_per_mille={sample}"])
    else:
        sim = sc.sim.model_copy(update={"fast_forward": "memo", "memo_sample_per_mille": sample})
        memo_run = prepare_scenario(sc.model_copy(update={"sim": sim}))
    memo, summary = _results(memo_run)
    assert summary["approximate"] and summary["memo"]["sample_max_error"] == 0.0, summary["memo"]
    (_, _, _, res_a), (_, _, _, res_b) = exact, memo
    for key in ("flows_finished", "data_packets_delivered", "status"):
        assert res_a[key] == res_b[key], (key, res_a[key], res_b[key])
    errors = relative_errors(exact, memo)
    misses = {
        what: (err, COLLECTIVE_BOUND if what.startswith("collective") else ITERATION_BOUND)
        for what, err in errors.items()
        if abs(err) > (COLLECTIVE_BOUND if what.startswith("collective") else ITERATION_BOUND)
    }
    if misses:
        if sc is None:
            sc = prepare(path, list(overrides)).scenario
        spread: dict = {}
        for ns in NUDGES_NS:
            for what, err in relative_errors(exact, _results(prepare_scenario(nudged(sc, ns)))[0]).items():
                spread[what] = max(spread.get(what, 0.0), abs(err))
        misses = {w: (e, SENSITIVITY_FACTOR * spread[w]) for w, (e, _) in misses.items() if abs(e) > 2 * spread[w]}
    return misses


@pytest.mark.parametrize("name,overrides", SHIPPED, ids=[s[0].removesuffix(".yaml") for s in SHIPPED])
def test_shipped_scenarios_with_the_memo(name, overrides):
    misses = _memo_misses(path=SCENARIOS / name, overrides=overrides)
    assert not misses, f"the memo beyond the bounds (error, bound): {misses}"


@pytest.mark.extensive
@settings(
    max_examples=int(os.environ.get("MEMO_EXAMPLES", 20)),
    deadline=None,
    print_blob=True,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(workloads())
def test_random_workloads_with_the_memo(sc):
    """Every hit is run again (1000 per mille): from the same start state the stored outcome is
    the engine's, so the reported error is 0; the run as a whole stays within the bounds."""
    misses = _memo_misses(sc, sample=1000)
    assert not misses, f"the memo beyond the bounds (error, bound): {misses}"
