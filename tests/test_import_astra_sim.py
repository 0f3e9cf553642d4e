"""ASTRA-sim network and system files: the mapping onto multi_dim, runs on imported fabrics,
the import command, and bad files as one line naming the file and the key."""

import json
import os
from pathlib import Path

import pytest
import yaml

from conftest import cli, simulate
from roce_emu.config.load import load_scenario
from roce_emu.core.paths import ser_ps
from roce_emu.errors import ScenarioError
from roce_emu.importers import astra_sim

ROOT = Path(__file__).resolve().parent.parent
#: the field's own files (../shared/data/astra-sim), where this checkout has them
SHARED = Path(os.environ.get("ROCE_EMU_SHARED_DATA", ROOT.parent / "shared" / "data")) / "astra-sim"
MTU, DATA, ACK = 1000, 1082, 86  # payload, data frame and ACK frame on the wire (bytes)


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.quick
def test_network_maps_dimension_by_dimension(tmp_path):
    net = write(
        tmp_path,
        "net.yml",
        "topology: [ Ring, FullyConnected, Switch ]\nnpus_count: [ 2, 8, 4 ]\n"
        "bandwidth: [ 200.0, 100.0, 50.0 ]  # GB/s\nlatency: [ 50.0, 500.0, 2000.0 ]\n",
    )
    assert astra_sim.network_dims(net) == [
        {"size": 2, "kind": "ring", "rate_gbps": 1600.0, "delay_ns": 50.0},
        {"size": 8, "kind": "fully_connected", "rate_gbps": 800.0, "delay_ns": 500.0},
        {"size": 4, "kind": "switch", "rate_gbps": 400.0, "delay_ns": 2000.0},
    ]


@pytest.mark.quick
@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data/astra-sim is not beside this checkout")
@pytest.mark.parametrize("name", ["DGX_H100-32.yml", "FullyConnected_8.yml", "Ring_8.yml", "TPUv4-32.yml"])
def test_the_fields_network_files_load(name):
    raw = yaml.safe_load((SHARED / name).read_text())
    dims = astra_sim.network_dims(SHARED / name)
    assert [d["size"] for d in dims] == raw["npus_count"]
    assert [d["kind"] for d in dims] == [
        {"Ring": "ring", "FullyConnected": "fully_connected", "Switch": "switch"}[b] for b in raw["topology"]
    ]
    assert [d["rate_gbps"] for d in dims] == [8 * b for b in raw["bandwidth"]]
    assert [d["delay_ns"] for d in dims] == raw["latency"]


@pytest.mark.quick
@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data/astra-sim is not beside this checkout")
@pytest.mark.parametrize("system", ["DGX_H100.json", "Direct_sys.json", "Ring_sys.json", "TPUv4.json"])
def test_every_system_key_is_mapped_or_named(system):
    keys = set(json.loads((SHARED / system).read_text()))
    algorithms, chunks, notes, _ = astra_sim.read_system(SHARED / system)
    mapped = {f"{k.replace('_', '-')}-implementation" for k in algorithms} | {"preferred-dataset-splits"}
    named = {n.split(":")[0] for n in notes}
    assert keys <= mapped | named
    assert chunks == 4 and algorithms["all_reduce"] in ("ring", "direct", "hierarchical")
    if system == "DGX_H100.json":  # halving-doubling in two dimensions: hierarchical, the defaults there, said so
        assert algorithms["all_reduce"] == "hierarchical"
        assert any(n.startswith("all-reduce-implementation") for n in notes)


@pytest.mark.quick
def test_a_scenario_names_the_network_file(tmp_path):
    """topology: {kind: astra_sim, file: ...} is found beside the scenario and validates to
    the multi_dim section written by hand, tier overrides kept."""
    os.makedirs(tmp_path / "nets")
    write(
        tmp_path / "nets",
        "dgx.yml",
        "topology: [ Switch, Switch ]\nnpus_count: [ 8, 4 ]\nbandwidth: [ 450, 50.0 ]\nlatency: [ 500.0, 500.0 ]\n",
    )
    imported = write(
        tmp_path, "a.yaml", "topology: {kind: astra_sim, file: nets/dgx.yml, tiers: {host: {rate_gbps: 5000}}}\n"
    )
    by_hand = write(
        tmp_path,
        "b.yaml",
        yaml.safe_dump(
            {
                "topology": {
                    "kind": "multi_dim",
                    "tiers": {"host": {"rate_gbps": 5000}},
                    "dims": [
                        {"size": 8, "kind": "switch", "rate_gbps": 3600, "delay_ns": 500},
                        {"size": 4, "kind": "switch", "rate_gbps": 400, "delay_ns": 500},
                    ],
                }
            }
        ),
    )
    assert load_scenario(imported) == load_scenario(by_hand)


def test_ring_all_reduce_on_an_imported_ring_matches_alpha_beta(tmp_path):
    """8 NPUs on an ASTRA-sim Ring of 50 GB/s links (400 Gb/s) and 500 ns: a ring all-reduce
    is 14 steps of N/8, each a packet's trip NPU -> router -> router -> NPU (the NPU's own link
    runs at its two ring links' sum, with no delay) plus N/8 of payload at the ring link's
    time per byte (its ACKs go back on the reverse link, which carries no data)."""
    write(tmp_path, "ring.yml", "topology: [ Ring ]\nnpus_count: [ 8 ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n")
    n = 8_000_000
    sc = load_scenario(
        write(
            tmp_path,
            "s.yaml",
            "topology: {kind: astra_sim, file: ring.yml}\nworkload:\n"
            f"  collectives: [{{kind: all_reduce, bytes: {n}}}]\n",
        )
    )
    res = simulate(sc)
    rate, host_rate, prop = 400 * 10**9, 800 * 10**9, 500_000
    alpha = 2 * ser_ps(DATA, host_rate) + prop
    tau = DATA * 8e12 / rate / MTU
    predicted = 14 * (alpha + n / 8 * tau)
    measured = res.summary["iteration_ns"][0] * 1000
    print(f"ring on an imported Ring: {measured / 1e6:.2f} us, alpha-beta {predicted / 1e6:.2f} us")
    assert measured == pytest.approx(predicted, rel=0.01)


@pytest.mark.parametrize(
    "text, key, message",
    [
        ("topology: [ Ring ]\nnpus_count: [ 8 ]\nbandwidth: [ 50 ]\n", "latency", "required key is missing"),
        (
            "topology: [ Ring, Ring ]\nnpus_count: [ 8 ]\nbandwidth: [ 50, 50 ]\nlatency: [ 5, 5 ]\n",
            "npus_count",
            "1 entries for 2 dimensions",
        ),
        (
            "topology: [ Torus ]\nnpus_count: [ 8 ]\nbandwidth: [ 50 ]\nlatency: [ 5 ]\n",
            "topology.0",
            "'Torus' is not a building block",
        ),
        ("topology: [ Ring ]\nnpus_count: [ 8 ]\nbandwidth: [ fast ]\nlatency: [ 5 ]\n", "bandwidth.0", "not a number"),
        ("topology: [ Ring ]\nnpus_count: [ 2.5 ]\nbandwidth: [ 5 ]\nlatency: [ 5 ]\n", "npus_count.0", "whole"),
        (
            "topology: [ Ring ]\nnpus_count: [ 8 ]\nbandwidth: [ 5 ]\nlatency: [ 5 ]\nlinks_count: [ 2 ]\n",
            "links_count",
            "not supported",
        ),
    ],
)
def test_bad_network_file_is_one_line_naming_file_and_key(tmp_path, text, key, message):
    net = write(tmp_path, "net.yml", text)
    with pytest.raises(ScenarioError) as err:
        load_scenario(write(tmp_path, "s.yaml", "topology: {kind: astra_sim, file: net.yml}\n"))
    assert err.value.source == str(net) and err.value.key == key and message in err.value.message


def test_scenario_without_the_file_key(tmp_path):
    with pytest.raises(ScenarioError) as err:
        load_scenario(write(tmp_path, "s.yaml", "topology: {kind: astra_sim, path: x.yml}\n"))
    assert err.value.key == "topology.path" and "allowed: kind, file" in err.value.message


def test_import_command_writes_a_scenario_that_runs(tmp_path):
    write(
        tmp_path,
        "net.yml",
        "topology: [ Ring, Switch ]\nnpus_count: [ 2, 2 ]\nbandwidth: [ 50, 25 ]\nlatency: [ 500, 1000 ]\n",
    )
    write(
        tmp_path,
        "sys.json",
        json.dumps(
            {"scheduling-policy": "LIFO", "preferred-dataset-splits": 2, "all-reduce-implementation": ["ring", "ring"]}
        ),
    )
    p = cli("import", "astra-sim", "net.yml", "--system", "sys.json", "--bytes", "100000", "-o", "s.yaml", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "note: scheduling-policy: not modelled" in p.stderr
    text = (tmp_path / "s.yaml").read_text()
    assert text.startswith("# Imported by roce-emu from net.yml, sys.json.") and "scheduling-policy" in text
    doc = yaml.safe_load(text)
    assert doc["workload"]["collectives"] == [
        {"kind": "all_reduce", "algorithm": "hierarchical", "bytes": 100000, "chunks": 2}
    ]
    assert doc["topology"]["dim_algorithms"] == ["ring_bidir", "ring"]  # ASTRA-sim's rings: both ways on the Ring
    run = cli("run", "s.yaml", "--out", "out", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    again = cli("import", "astra-sim", "net.yml", "-o", "s.yaml", cwd=tmp_path)
    assert again.returncode == 2 and again.stderr.count("\n") == 1 and "--overwrite" in again.stderr
    assert (tmp_path / "s.yaml").read_text() == text  # nothing half-written over it
    bad = cli("import", "astra-sim", "missing.yml", cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.strip() == "error: missing.yml: no such file"


@pytest.mark.quick
def test_per_dimension_implementations_become_dim_algorithms():
    """["ring", "direct", "halvingDoubling"] on Ring x FullyConnected x Switch: both ways round on
    the Ring, direct on the full mesh, the switch's default (a ring) for halvingDoubling; direct
    on a Ring has no equivalent and takes the ring's default."""
    dims = [{"kind": "ring"}, {"kind": "fully_connected"}, {"kind": "switch"}]
    assert astra_sim.dimension_algorithms(["ring", "direct", "halving_doubling"], dims) == [
        "ring_bidir",
        "direct",
        "ring",
    ]
    assert astra_sim.dimension_algorithms(["direct", "ring", "ring"], dims) == ["ring_bidir", "ring", "ring"]
