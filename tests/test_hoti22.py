"""benchmarks/hoti22.py's scenario builder at a tiny scale: every setting under every policy is a valid
scenario with the fabric, workload and jobs it names, and one of them runs to the end."""

import importlib.util
import sys
from pathlib import Path

import pytest

from roce_emu.api import prepare, run
from roce_emu.config.load import validate_document

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))  # the script imports its sibling tables.py
_spec = importlib.util.spec_from_file_location("hoti22", ROOT / "benchmarks" / "hoti22.py")
hoti22 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(hoti22)


@pytest.mark.parametrize("setting", hoti22.SETTINGS)
def test_every_setting_and_policy_is_a_valid_scenario(setting):
    for cc in hoti22.POLICIES.values():
        doc = hoti22.scenario(setting, leaves=2, hosts_per_leaf=4)
        doc["network"]["cc"] = cc
        sc = validate_document(doc, setting)
        assert sc.network.cc.algorithm == cc["algorithm"]
        assert sc.topology.leaves == 2 and sc.topology.hosts_per_leaf == 4
        ratio = {"1:1": 1, "4:1": 4}.get(setting, hoti22.PAPER_OVERSUBSCRIPTION)
        assert sc.topology.spines == 4 // ratio  # every link at one rate: NPUs per leaf / spines


def test_two_jobs_take_half_the_npus_each_spread_over_the_leaves():
    doc = hoti22.scenario("two_jobs", leaves=2, hosts_per_leaf=4)
    assert [j["ranks"] for j in doc["jobs"]] == [4, 4] and "workload" not in doc
    assert all(j["placement"] == "spread" for j in doc["jobs"])


def test_summary_is_relative_to_pfc_alone():
    times = {"PFC alone": [2.0, 2.2], "DCQCN": [3.0, 3.3]}  # the other policies: no finished run
    runs = [{"setting": "paper", "policy": p, "iteration_ms": t} for p, ts in times.items() for t in ts]
    table = {r["policy"]: r for r in hoti22.summarize(runs)}
    assert table["PFC alone"]["iteration_ms"] == 2.1 and table["DCQCN"]["vs_pfc_alone"] == round(3.15 / 2.1, 3)
    assert table["HPCC"]["seeds"] == 0


def test_a_tiny_dlrm_setting_runs_to_the_end(tmp_path):
    doc = hoti22.scenario("dlrm", leaves=2, hosts_per_leaf=2)
    doc["network"]["cc"] = hoti22.POLICIES["DCQCN"]
    path = tmp_path / "dlrm.yaml"
    path.write_text(hoti22.yaml.safe_dump(doc))
    result = run(prepare(path, []), tmp_path / "out", progress=False)
    assert result.summary["status"] == "finished"
    assert result.summary["flows_finished"] == result.summary["flows"] > 0
    assert result.summary["mean_iteration_ns"] > 0
