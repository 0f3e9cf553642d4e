"""Each job's own congestion control (a job's ``cc``): on disjoint hosts of a non-blocking fabric
a job takes, to the picosecond, its time alone under its algorithm; on a shared bottleneck a job
that backs off on ECN marks (DCQCN) leaves the link to one that does not (PFC alone); the fast
forwards and the results see each job's algorithm. (What the fabric cannot serve is refused:
test_jobs.test_bad_jobs_are_one_line_naming_the_key.)"""

import copy

import pytest
from click.testing import CliRunner

from conftest import scenario, simulate
from roce_emu.cli import main
from roce_emu.core.cc import dcqcn
from roce_emu.run.inputs import check_inputs, why_no_trains
from roce_emu.run.world import build_world
from test_jobs import RING, STAR, TRAINING, read, write

pytestmark = pytest.mark.quick

#: DCTCP's marking (one threshold, always marked above it), written out for the switches
DCTCP_MARKING = {"kmin_bytes": 300_000, "kmax_bytes": 300_000, "pmax": 1.0}


def mixed(first: dict, second: dict, network: dict | None = None) -> dict:
    """A training job on hosts 0-3 and a ring All-Reduce on hosts 4-7 of one switch, each with the
    congestion control given (None: network.cc's)."""
    jobs = [
        {"name": "train", "hosts": [0, 1, 2, 3], "workload": TRAINING},
        {"name": "ring", "hosts": [4, 5, 6, 7], "workload": RING, "start_ns": 3000},
    ]
    for job, cc in zip(jobs, (first, second)):
        if cc is not None:
            job["cc"] = cc
    return copy.deepcopy({"topology": STAR, "network": network or {}, "jobs": jobs})


def times(doc: dict) -> dict:
    """Each job's (congestion control, time from start to last finish, iteration times), by name."""
    result = simulate(scenario(**doc))
    assert result.outcome.status == "finished"
    return {j["job"]: (j["cc"], j["time_ns"], j.get("iteration_ns")) for j in result.summary["jobs"]}


def alone_under(doc: dict, i: int, network: dict) -> dict:
    """Job i alone, its congestion control the run's (``network``), the job's own left out."""
    one = copy.deepcopy(doc)
    job = one["jobs"][i]
    job.pop("cc", None)
    return {**one, "network": network, "jobs": [job]}


@pytest.mark.parametrize(
    "first, second, fabric",
    [
        ({"algorithm": "dcqcn"}, {"algorithm": "hpcc"}, {}),
        ({"algorithm": "timely", "params": {"t_low_us": 20}}, None, {}),
        (None, {"algorithm": "hpcc", "params": {"eta": 0.9}}, {"cc": {"algorithm": "dctcp"}}),
    ],
)
def test_jobs_with_their_own_cc_on_disjoint_hosts_take_their_time_alone_under_it(first, second, fabric):
    doc = mixed(first, second, fabric)
    together = times(doc)
    marking = {"switch": {"ecn": DCTCP_MARKING}} if fabric else {}  # the same switches alone
    for i, cc in enumerate((first, second)):
        name = doc["jobs"][i]["name"]
        own = cc or fabric.get("cc", {"algorithm": "none"})
        alone = times(alone_under(doc, i, {"cc": own, **marking}))
        assert together[name] == alone[name]
        assert together[name][0] == own["algorithm"]
        assert len(together[name][2]) == 2


SPINE = {"kind": "leaf_spine", "leaves": 2, "spines": 1, "hosts_per_leaf": 2}
FLOW = {"flows": [{"src": 0, "dst": 1, "bytes": 4_000_000}]}


def shared_uplink(a: dict, b: dict, **sections) -> dict:
    """Two jobs each send 4 MB from leaf 0 to leaf 1 through the one spine, job a under congestion
    control ``a``, job b under ``b``: the leaf's uplink is their bottleneck."""
    jobs = [
        {"name": "a", "hosts": [0, 2], "workload": FLOW, "cc": a},
        {"name": "b", "hosts": [1, 3], "workload": FLOW, "cc": b},
    ]
    return {"topology": SPINE, "jobs": jobs, **sections}


def test_on_a_shared_link_the_job_under_dcqcn_backs_off_for_the_one_under_pfc_alone():
    doc = shared_uplink({"algorithm": "dcqcn"}, {"algorithm": "none"})
    together = times(doc)
    alone = {name: times(alone_under(doc, i, {}))[name][1] for i, name in enumerate("ab")}
    assert alone["a"] == alone["b"]  # each alone has the link to itself at line rate
    slow_a, slow_b = together["a"][1] / alone["a"], together["b"][1] / alone["b"]
    # DCQCN cuts job a's rate on the marks the shared queue draws, and regains it slowly; PFC alone
    # lets job b keep sending: b has most of the link while both send (1.19x its time alone), and
    # a, slowed, ends after the time both flows' bytes would take at line rate (2.75x)
    assert slow_b < 1.5 and slow_a > 2.0
    both_none = times(shared_uplink({"algorithm": "none"}, {"algorithm": "none"}))
    assert both_none["b"][1] / alone["b"] == pytest.approx(2.0, rel=0.05)  # an even share, as test_jobs's
    assert slow_b < both_none["b"][1] / alone["b"] < slow_a


@pytest.mark.parametrize("mode", ["exact", "memo"])
def test_the_fast_forwards_give_a_mixed_runs_job_times(mode):
    doc = shared_uplink({"algorithm": "dcqcn"}, {"algorithm": "none"})
    doc_fast = {**doc, "sim": {"fast_forward": mode}}
    assert times(doc_fast) == times(doc)


def test_trains_stay_off_when_a_job_runs_a_windowed_algorithm():
    doc = mixed(None, {"algorithm": "hpcc"})
    sc = scenario(**doc, sim={"fast_forward": "trains"})
    assert why_no_trains(sc) == "hpcc is clocked by a window (a job's cc.algorithm)"
    doc = mixed(None, {"algorithm": "dcqcn"})
    assert why_no_trains(scenario(**doc, sim={"fast_forward": "trains"})) == ""


def test_each_jobs_flows_carry_its_algorithm_and_its_parameters():
    doc = mixed({"algorithm": "dcqcn", "params": {"rate_ai_mbps": 7}}, {"algorithm": "hpcc"})
    world = build_world(check_inputs(scenario(**doc)))
    assert world.ccp.shape[0] == 3  # network.cc (none), then each job's own
    job = check_inputs(scenario(**doc)).workload.job[: len(world.flow)]
    assert set(world.flow["cc_row"][job == 0]) == {1} and set(world.flow["cc_row"][job == 1]) == {2}
    assert world.ccp[1, dcqcn.P_RAI] == 7e6
    assert world.int_rec.shape[1] > 0  # room for the HPCC job's INT records


def test_jobs_csv_has_each_jobs_cc_and_scenario_yaml_its_parameters(tmp_path):
    doc = {"name": "jobs", **mixed({"algorithm": "dcqcn"}, None)}
    out = tmp_path / "run"
    result = CliRunner().invoke(main, ["run", str(write(tmp_path, doc)), "--out", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert {(r["job"], r["cc"]) for r in read(out / "jobs.csv")} == {("train", "dcqcn"), ("ring", "none")}
    written = (out / "scenario.yaml").read_text()
    assert "rate_ai_mbps" in written  # the job's parameters as the run used them, defaults filled in


def test_dctcp_beside_dcqcn_runs_once_the_switches_marking_is_set(tmp_path):
    doc = {"name": "jobs", **mixed({"algorithm": "dctcp"}, None, {"cc": {"algorithm": "dcqcn"}})}
    doc["network"]["switch"] = {"ecn": DCTCP_MARKING}
    assert CliRunner().invoke(main, ["validate", str(write(tmp_path, doc))]).exit_code == 0
