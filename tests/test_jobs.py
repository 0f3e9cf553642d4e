"""Several jobs on one fabric (scenario ``jobs``): a job alone and among others on disjoint
hosts of a non-blocking fabric takes the same time to the picosecond; on an oversubscribed one
they slow each other as the shared link's closed form says; placement, job-local ranks, start
times and priorities; the per-job tables and plot's slowdown against running alone."""

import copy
import csv

import pytest
import yaml
from click.testing import CliRunner

from conftest import scenario, simulate
from roce_emu.cli import main
from roce_emu.results.iteration import COLLECTIVE_COLUMNS, TASK_COLUMNS, TIMELINE_COLUMNS
from roce_emu.results.jobs import JOB_COLUMNS, SLOWDOWN_COLUMNS
from roce_emu.results.tables import FLOW_COLUMNS
from roce_emu.run.inputs import check_inputs

pytestmark = pytest.mark.quick

SMALL_MODEL = {"name": "transformer", "layers": 1, "hidden": 256, "sequence": 64, "batch_per_rank": 1}
TRAINING = {"training": {"model": SMALL_MODEL}, "iterations": 2}
RING = {"collectives": [{"kind": "all_reduce", "bytes": 400_000}], "iterations": 2}
STAR = {"kind": "single_switch", "hosts": 8, "link": {"rate_gbps": 100, "delay_ns": 1000}}


def two_jobs(**overrides) -> dict:
    doc = {
        "name": "jobs",
        "topology": STAR,
        "jobs": [
            {"name": "train", "hosts": [0, 1, 2, 3], "workload": TRAINING},
            {"name": "ring", "hosts": [4, 5, 6, 7], "workload": RING, "start_ns": 3000},
        ],
    }
    doc.update(overrides)
    return copy.deepcopy(doc)


def job_times(doc: dict) -> dict:
    """Each job's (time from start to last finish, iteration times), by name."""
    result = simulate(scenario(**{k: v for k, v in doc.items() if k not in ("name", "seed")}))
    assert result.outcome.status == "finished"
    return {j["job"]: (j["time_ns"], j.get("iteration_ns")) for j in result.summary["jobs"]}


def alone(doc: dict, i: int) -> dict:
    one = copy.deepcopy(doc)
    one["jobs"] = [doc["jobs"][i]]
    return one


@pytest.mark.parametrize("cc", ["none", "dcqcn", "hpcc"])
def test_jobs_on_disjoint_hosts_of_a_non_blocking_fabric_take_their_time_alone(cc):
    doc = two_jobs(network={"cc": {"algorithm": cc}})
    together = job_times(doc)
    assert together == {**job_times(alone(doc, 0)), **job_times(alone(doc, 1))}
    assert all(len(iterations) == 2 for _, iterations in together.values())


def test_jobs_that_share_an_oversubscribed_link_slow_each_other_by_its_share():
    """Two leaves of two hosts under one spine: each job sends 1 MB from its host on leaf 0 to
    its host on leaf 1. Alone a flow has the uplink to itself; together the two flows share it
    at half rate each (PFC alone, no CC), so each job takes about twice as long."""
    spine = {"kind": "leaf_spine", "leaves": 2, "spines": 1, "hosts_per_leaf": 2}
    flow = {"flows": [{"src": 0, "dst": 1, "bytes": 1_000_000}]}
    doc = {
        "topology": spine,
        "jobs": [{"name": "a", "hosts": [0, 2], "workload": flow}, {"name": "b", "hosts": [1, 3], "workload": flow}],
    }
    together = job_times(doc)
    for i, name in enumerate("ab"):
        result = simulate(scenario(**alone(doc, i)))
        time_alone = result.summary["jobs"][0]["time_ns"]
        assert time_alone * 1000 == result.flow_table["fct_ps"][0]  # the job is its flow
        assert together[name][0] / time_alone == pytest.approx(2.0, rel=0.05)


def leaf_spine_jobs(*jobs) -> dict:
    return {"topology": {"kind": "leaf_spine", "leaves": 4, "spines": 2, "hosts_per_leaf": 4}, "jobs": list(jobs)}


def placed(doc: dict, seed: int = 1) -> list[list[int]]:
    """Each job's hosts, as check_inputs places them (no engine)."""
    return [part.hosts for part in check_inputs(scenario(**doc, seed=seed)).workload.jobs]


def test_placement_packs_spreads_over_leaves_or_draws_seeded_hosts_the_other_jobs_leave_free():
    job = {"workload": {"collectives": [{"kind": "all_reduce", "bytes": 1000}]}, "ranks": 4}
    doc = leaf_spine_jobs(
        {**job, "name": "fixed", "hosts": [0, 5]},
        {**job, "name": "packed", "placement": "packed"},
        {**job, "name": "spread", "placement": "spread"},
        {**job, "name": "random", "placement": "random"},
        {**job, "name": "random2", "placement": "random", "ranks": 2},
    )
    doc["jobs"][0]["ranks"] = 2
    hosts = placed(doc)
    assert hosts[:3] == [[0, 5], [1, 2, 3, 4], [6, 7, 8, 12]]  # spread: a leaf's lowest free host in turn
    taken = sum(hosts[:3], [])
    assert not set(hosts[3]) & set(taken) and not set(hosts[4]) & set(taken + hosts[3])
    assert hosts == placed(doc)  # the same draw every time
    assert [placed(doc, seed)[3] for seed in range(2, 6)] != [hosts[3]] * 4
    # a job's draw is its own: the other random job left out, it draws the same hosts
    assert placed({**doc, "jobs": doc["jobs"][:4]})[3] == hosts[3]


def test_ranks_and_all_are_the_jobs_own_hosts():
    ring = {
        "collectives": [{"kind": "all_reduce", "bytes": 4000, "hosts": "all"}],
        "patterns": [{"kind": "incast", "bytes": 1000, "dst": 1}],
    }
    flow = {"flows": [{"src": 0, "dst": 3, "bytes": 1000, "priority": 2}]}
    doc = {
        "topology": STAR,
        "jobs": [
            {"name": "ring", "hosts": [6, 2, 7], "workload": ring, "priority": 5},
            {"name": "flow", "hosts": [4, 5, 1, 0], "workload": flow, "start_ns": 2000},
        ],
    }
    w = check_inputs(scenario(**doc)).workload
    assert w.collectives[0].ranks == [6, 2, 7]
    job = w.job[: len(w.flows)]
    assert set(w.flows.prio[job == 0].tolist()) == {5}  # the job's priority class
    incast = (job == 0) & (w.flows.size_bytes == 1000)
    assert sorted(zip(w.flows.src[incast].tolist(), w.flows.dst[incast].tolist())) == [(6, 2), (7, 2)]
    mine = job == 1
    assert (w.flows.src[mine].tolist(), w.flows.dst[mine].tolist(), w.flows.prio[mine].tolist()) == ([4], [0], [2])
    assert w.flows.start_ps[mine].tolist() == [2_000_000]
    assert check_inputs(scenario(**alone(doc, 1))).workload.flows.src.tolist() == [4]


def test_a_job_that_starts_later_takes_the_same_time_from_its_start():
    doc = two_jobs()
    late = copy.deepcopy(doc)
    late["jobs"][1]["start_ns"] = 123_456.789
    assert job_times(doc)["ring"] == job_times(late)["ring"]


def write(tmp_path, doc: dict, name: str = "jobs.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize(
    "change, key, words",
    [
        (lambda d: d["jobs"][1].update(hosts=[4, 3, 5, 6]), "jobs.1.hosts.1", "share: true"),
        (lambda d: d["jobs"][1].update(hosts=[4, 8, 5, 6]), "jobs.1.hosts.1", "from 0 to 7"),
        (
            lambda d: d["jobs"][0]["workload"]["training"].update(hosts=[0, 4]),
            "jobs.0.workload.training.hosts.1",
            "ranks 0 to 3",
        ),
        (lambda d: d["jobs"][1].update(name="train"), "jobs.1.name", "has that name already"),
        (lambda d: d.update(workload=RING), "workload", "not allowed beside jobs"),
        (lambda d: d["jobs"][1].update(placement="packed"), "jobs.1", "either hosts or placement"),
        (lambda d: d["jobs"][1].pop("hosts") and d["jobs"][1].update(placement="packed"), "jobs.1.ranks", "required"),
        (lambda d: d["jobs"][1].update(hosts=None, placement="spread", ranks=5), "jobs.1.ranks", "4 of the 8 hosts"),
        (lambda d: d["jobs"][0].update(cc={"algorithm": "bbr"}), "jobs.0.cc.algorithm", "dcqcn, hpcc"),
        (lambda d: d["jobs"][0].update(cc={"algorithm": "dcqcn", "params": {"eta": 1}}), "jobs.0.cc.params.eta", "g,"),
        # DCTCP's marking (one threshold) is not the fabric's (network.cc none's RED)
        (lambda d: d["jobs"][1].update(cc={"algorithm": "dctcp"}), "jobs.1.cc.algorithm", "mark all traffic alike"),
    ],
)
def test_bad_jobs_are_one_line_naming_the_key(tmp_path, change, key, words):
    doc = two_jobs()
    change(doc)
    result = CliRunner().invoke(main, ["validate", str(write(tmp_path, doc))])
    assert result.exit_code == 2, result.output
    line = result.output.strip()
    assert "\n" not in line and "jobs.yaml" in line and f"{key}:" in line and words in line, line


def test_jobs_that_both_say_share_may_run_on_the_same_hosts(tmp_path):
    doc = two_jobs()
    doc["jobs"][1].update(hosts=[3, 4, 5, 6], share=True)
    doc["jobs"][0]["share"] = True
    assert CliRunner().invoke(main, ["validate", str(write(tmp_path, doc))]).exit_code == 0


def read(path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_jobs_csv_and_the_job_column_of_every_table(tmp_path):
    doc = two_jobs(output={"collective_flows": True})
    out = tmp_path / "run"
    result = CliRunner().invoke(main, ["run", str(write(tmp_path, doc)), "--out", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "jobs train " in result.output and ", ring " in result.output  # each job's time on the run's line
    jobs = read(out / "jobs.csv")
    assert tuple(jobs[0]) == JOB_COLUMNS
    assert [(r["job"], r["iteration"], r["hosts"]) for r in jobs] == [
        ("train", "0", "0 1 2 3"),
        ("train", "1", "0 1 2 3"),
        ("ring", "0", "4 5 6 7"),
        ("ring", "1", "4 5 6 7"),
    ]
    ring = [r for r in jobs if r["job"] == "ring"]
    assert float(ring[0]["start_ns"]) == 3000
    assert float(ring[0]["last_finish_ns"]) - 3000 == pytest.approx(float(ring[0]["time_ns"]))
    # the iterations end when the last receiver has its bytes; the job, when the last ACK is back
    assert 0 < float(ring[0]["time_ns"]) - sum(float(r["iteration_ns"]) for r in ring) < 5000
    for table, columns in (
        ("flows", FLOW_COLUMNS + ("job",)),
        ("tasks", TASK_COLUMNS + ("job",)),
        ("collectives", COLLECTIVE_COLUMNS + ("job",)),
        ("timeline", ("job",) + TIMELINE_COLUMNS),
    ):
        rows = read(out / f"{table}.csv")
        assert tuple(rows[0]) == columns, table
        assert {r["job"] for r in rows} == {"train", "ring"}, table
    flows = read(out / "flows.csv")
    assert {int(r["src"]) for r in flows if r["job"] == "ring"} == {4, 5, 6, 7}


def test_plot_shows_each_jobs_slowdown_against_running_alone(tmp_path):
    doc = two_jobs()
    path = write(tmp_path, doc)
    runner = CliRunner()
    assert runner.invoke(main, ["run", str(path), "--out", str(tmp_path / "both"), "--no-progress"]).exit_code == 0
    result = runner.invoke(main, ["plot", str(tmp_path / "both"), "--baseline", "alone"])
    assert result.exit_code == 0, result.output
    rows = read(tmp_path / "both" / "plots" / "jobs_slowdown.csv")
    assert tuple(rows[0]) == SLOWDOWN_COLUMNS
    assert [(r["job"], float(r["slowdown"]), float(r["iteration_slowdown"])) for r in rows] == [
        ("train", 1.0, 1.0),
        ("ring", 1.0, 1.0),
    ]
    assert (tmp_path / "both" / "plots" / "jobs_slowdown.png").is_file()
    assert "| train |" in result.output
    # the same from runs of each job alone, given as a folder of run directories
    for i, name in enumerate(("train", "ring")):
        one = write(tmp_path, alone(doc, i), f"{name}.yaml")
        runner.invoke(main, ["run", str(one), "--out", str(tmp_path / "alone" / name), "--no-progress"])
    result = runner.invoke(
        main, ["plot", str(tmp_path / "both"), "--baseline", str(tmp_path / "alone"), "-o", str(tmp_path / "p")]
    )
    assert result.exit_code == 0, result.output
    assert read(tmp_path / "p" / "jobs_slowdown.csv") == rows
    # a baseline without one of the jobs, or a run without jobs: one line, exit 2
    missing = runner.invoke(main, ["plot", str(tmp_path / "both"), "--baseline", str(tmp_path / "alone" / "ring")])
    assert missing.exit_code == 2 and "no run of job train alone" in missing.output
    plain = tmp_path / "plain"
    plain_doc = {"name": "plain", "topology": STAR, "workload": RING}
    runner.invoke(main, ["run", str(write(tmp_path, plain_doc, "plain.yaml")), "--out", str(plain), "--no-progress"])
    refused = runner.invoke(main, ["plot", str(plain), "--baseline", "alone"])
    assert refused.exit_code == 2 and "the run has no jobs" in refused.output
