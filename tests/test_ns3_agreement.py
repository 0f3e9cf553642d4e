"""benchmarks/ns3_agreement.py without the simulator: it skips with one line, reads fct.txt and
the simulator's port numbering, and writes cases the importer reads back."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from roce_emu.importers import ns3

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "ns3_agreement.py"


def load():
    spec = importlib.util.spec_from_file_location("ns3_agreement", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = load()


@pytest.mark.quick
def test_skips_with_a_clear_message_without_the_simulator(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HPCC_NS3": str(tmp_path / "absent")}
    ran = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith("skipped: the HPCC ns-3 simulator is not built")


@pytest.mark.quick
def test_reads_fct_txt_and_matches_flows_by_the_simulators_ports():
    flows = "3\n2 1 3 100 5000 2\n2 1 3 100 7000 2\n3 1 3 100 9000 2.000001\n"
    keys = bench.flow_keys(flows)
    assert keys == [(2, 1, 10000), (2, 1, 10001), (3, 1, 10000)]  # ports count per (src, dst) pair
    # finished out of order; node 2 is 0b000201, node 1 0b000101
    text = (
        "0b000301 0b000101 10000 100 9000 2000001000 4000 3000\n0b000201 0b000101 10001 100 7000 2000000000 6000 5000\n"
    )
    fct = bench.read_fct(text)
    assert fct["src"].tolist() == [3, 2] and fct["dst"].tolist() == [1, 1]
    got, standalone = bench.align(fct, keys)
    assert got.tolist() == [-1, 6000, 4000]  # the first flow did not finish
    assert standalone.tolist() == [-1, 5000, 3000]


@pytest.mark.quick
def test_stats_and_difference():
    median, p99 = bench.stats(np.arange(1, 101, dtype=float))
    assert median == 50.5 and p99 == pytest.approx(99.01)
    assert bench.diff_pct(105.0, 100.0) == pytest.approx(5.0)


@pytest.mark.quick
def test_fat_tree_k8_and_its_permutation_round_trip_through_the_importer(tmp_path):
    section = bench.fat_tree_section(8)
    assert len(section["switches"]) == 80 and len(section["links"]) == 3 * 128
    degree = np.bincount(np.array([[a, b] for a, b, _, _ in section["links"]]).ravel())
    assert set(degree[:128].tolist()) == {1} and set(degree[128:].tolist()) == {8}
    flows = bench.permutation_flows(128, 1000, seed=1)
    dst = [f["dst"] for f in flows]
    assert sorted(dst) == list(range(128)) and all(f["src"] != f["dst"] for f in flows)
    (tmp_path / "topology.txt").write_text(ns3.topology_text(section))
    topo = ns3.read_topology(tmp_path / "topology.txt")
    assert topo.custom() == section
    (tmp_path / "flow.txt").write_text(ns3.flows_text(flows, section))
    read, _ = ns3.read_flows(tmp_path / "flow.txt", topo)
    assert [(f["src"], f["dst"], f["bytes"]) for f in read] == [(f["src"], f["dst"], 1000) for f in flows]


@pytest.mark.quick
@pytest.mark.parametrize("cc, mode", [("dcqcn", "dcqcn"), ("hpcc", "hpcc"), ("none", "dcqcn")])
def test_written_configs_import_as_the_algorithm_they_name(tmp_path, cc, mode):
    case = bench.Case(
        "pfc_join" if cc == "none" else "k8",
        "",
        "3 1 2\n0\n0 1 100Gbps 1000ns 0\n0 2 100Gbps 1000ns 0\n",
        "1\n1 2 3 100 1000 2\n",
    )
    doc, notes, _ = ns3.scenario(bench.write_case(tmp_path, case, cc))
    assert doc["network"]["cc"]["algorithm"] == mode
    assert doc["network"]["switch"]["ecn"]["enabled"] is (cc != "none")
    assert doc["network"]["switch"]["buffer_bytes"] == 32 * 2**20
    assert not any("not a key" in n for n in notes)


@pytest.mark.quick
def test_incast_cases_and_the_seed_columns(tmp_path):
    case = bench.build_case("incast3", None, tmp_path)
    (tmp_path / "topology.txt").write_text(case.topology)
    topo = ns3.read_topology(tmp_path / "topology.txt")
    assert topo.custom()["switches"] == [0] and len(topo.custom()["links"]) == 4
    keys = bench.flow_keys(case.flows)
    assert len({src for src, _, _ in keys}) == 3 and len({dst for _, dst, _ in keys}) == 1
    spread = bench._spread("ns3", [np.array([100e3, 300e3]), np.array([200e3, 400e3])])
    assert spread["ns3_seed_median_us"] == (200.0, 300.0, 250.0)
    row = {"ns3_median_us": 1.0, "emu_median_us": 2.0, **spread}
    assert bench._seeds(row, "median") == "200.0-300.0 (250.0) / 2.0"
