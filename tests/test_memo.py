"""The memo (sim.fast_forward: memo) against the exact engine (off).

A component the memo replays must give each flow the finish the exact engine gives it from the
same start state (within 1 ns: only the order of events at one picosecond may differ); a
component that meets another flow is run into the engine; congested components are never
replayed; the run does not depend on how it is sliced; and on the shipped training scenarios the
iteration time stays within 0.1 % of off.
"""

from pathlib import Path

import numpy as np
import pytest

from conftest import scenario, simulate
from roce_emu.api import prepare, run
from roce_emu.results.iteration import task_rows

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


@pytest.mark.parametrize("case", CASES)
def test_a_replayed_component_finishes_each_flow_as_the_engine_does(case):
    off, memo = _both(_repeated(CASES[case]))
    report = memo.summary["memo"]
    assert report["hits"] == 3 and report["misses"] == 1 and report["materialised"] == 0, report
    assert report["events_skipped"] > 0 and memo.summary["events"] < off.summary["events"]
    diff = np.abs(np.asarray(memo.flow_table["finish_ps"]) - np.asarray(off.flow_table["finish_ps"]))
    print(f"{case}: largest finish difference {diff.max()} ps over {len(diff)} flows")
    assert diff.max() <= 1000
    for key in ("data_packets_sent", "data_packets_delivered", "acks_sent", "flows_finished"):
        assert memo.summary[key] == off.summary[key], key


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
    assert memo["events"] < off["events"] / 1.5
    assert memo["approximate"]
    tasks_off = task_rows(runs["off"].outcome.world, runs["off"].prepared.workload)
    assert len(tasks_off) == len(task_rows(runs["memo"].outcome.world, runs["memo"].prepared.workload))


def test_faults_leave_the_memo_out_and_say_so():
    doc = _repeated(CASES["a lone flow"])
    doc["faults"] = [{"kind": "slow_link", "at_ns": 1000, "link": ["h0", "leaf0"], "rate_gbps": 50}]
    off, memo = _both(doc)
    assert memo.summary["memo"]["components"] == 0
    assert np.array_equal(memo.flow_table["finish_ps"], off.flow_table["finish_ps"])
    assert any("memo replays nothing here" in w for w in memo.prepared.warnings)
