"""HPCC ns-3 inputs: units, the shipped config/topology/flow files, every config key mapped
or named, faults and ECN maps, the custom topology kind, and bad files as one line."""

import os
from pathlib import Path

import pytest
import yaml

from conftest import cli, scenario, simulate
from roce_emu.config.load import load_scenario
from roce_emu.core.cc.registry import BY_NAME
from roce_emu.errors import ScenarioError
from roce_emu.importers import ns3
from roce_emu.run.inputs import check_inputs

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("ROCE_EMU_SHARED_DATA", ROOT.parent / "shared" / "data")) / "hpcc-ns3"
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data/hpcc-ns3 is not beside this checkout")

TOPO = "5 1 4\n0\n0 1 100Gbps 0.001ms 0\n0 2 100Gbps 1000ns 0\n0 3 100Gbps 1us 0\n0 4 100Gbps 0.000001s 0\n"
FLOWS = "2\n1 3 3 100 1000000 2\n2 3 3 101 1000000 2.0000005\n"


def files(tmp_path, config="", topo=TOPO, flows=FLOWS):
    (tmp_path / "topology.txt").write_text(topo)
    (tmp_path / "flow.txt").write_text(flows)
    path = tmp_path / "config.txt"
    path.write_text("TOPOLOGY_FILE mix/topology.txt\nFLOW_FILE mix/flow.txt\n" + config)
    return path


@pytest.mark.quick
@pytest.mark.parametrize(
    "text, bps",
    [
        ("100Gbps", 100e9),
        ("25Gbps", 25e9),
        ("50Mb/s", 50e6),
        ("1.5GBps", 12e9),
        ("400Mbps", 400e6),
        ("10Kibps", 10240),
        ("1e3kbps", 1e6),
    ],
)
def test_rates_as_ns3_writes_them(text, bps):
    assert ns3.rate_bps(text, "f", "k") == pytest.approx(bps)


@pytest.mark.quick
@pytest.mark.parametrize("text, ns", [("0.001ms", 1000), ("1000ns", 1000), ("1us", 1000), ("2", 2e9), ("5ps", 0.005)])
def test_times_as_ns3_writes_them(text, ns):
    assert ns3.time_ns(text, "f", "k") == pytest.approx(ns)


@pytest.mark.quick
def test_topology_and_flows_renumber_hosts(tmp_path):
    """Switch 0 first, hosts 1-4: host ids 0-3; flows keep bytes, start times and priorities."""
    doc, notes, sources = ns3.scenario(files(tmp_path))
    assert doc["topology"] == {
        "kind": "custom",
        "switches": [0],
        "links": [[0, v, 100.0, 1000.0] for v in (1, 2, 3, 4)],
    }
    assert doc["workload"]["flows"] == [
        {"src": 0, "dst": 2, "bytes": 1_000_000, "start_ns": 2e9, "priority": 3},
        {"src": 1, "dst": 2, "bytes": 1_000_000, "start_ns": pytest.approx(2.0000005e9), "priority": 3},
    ]
    assert sources == [str(tmp_path / "config.txt"), str(tmp_path / "topology.txt"), str(tmp_path / "flow.txt")]
    assert any(n.startswith("flow dport") for n in notes)


@needs_shared
def test_shipped_config_imports_every_key_and_runs(tmp_path):
    """The simulator's own config.txt: every key is mapped or named in the notes. Its two
    200 MB flows into one host under HPCC drain the bottleneck at eta = 95 %, in the
    simulator's frames (profile hpcc_ns3: a 48 B header, 42 B of INT, no gap): the last flow
    ends 400 MB x (1000 + 48 + 42) / 1000 x 8 / (0.95 x 100 Gb/s) after they start at 2 s."""
    doc, notes, _ = ns3.scenario(SHARED / "config.txt")
    keys = [line.split()[0] for line in (SHARED / "config.txt").read_text().splitlines() if line.strip()]
    named = {n.split(":")[0].split()[0] for n in notes}
    mapped = {
        "TOPOLOGY_FILE",
        "FLOW_FILE",
        "CC_MODE",
        "U_TARGET",
        "MI_THRESH",
        "RATE_AI",
        "MIN_RATE",
        "PACKET_PAYLOAD_SIZE",
        "BUFFER_SIZE",
        "ENABLE_QCN",
        "KMAX_MAP",
        "KMIN_MAP",
        "PMAX_MAP",
        "SIMULATOR_STOP_TIME",
        "LINK_DOWN",
        "ERROR_RATE_PER_LINK",
        "USE_DYNAMIC_PFC_THRESHOLD",
        "L2_ACK_INTERVAL",
        "HAS_WIN",
        "GLOBAL_T",
        "VAR_WIN",
        "FAST_REACT",
        "MULTI_RATE",
        "SAMPLE_FEEDBACK",
        "RATE_BOUND",
    }
    assert set(keys) <= mapped | named, set(keys) - mapped - named
    assert doc["network"]["cc"] == {
        "algorithm": "hpcc",
        "params": {"eta": 0.95, "max_stage": 0, "rate_ai_mbps": 50.0, "min_rate_mbps": 100.0},
    }
    assert doc["network"]["switch"]["ecn"]["kmin_bytes"] == 400_000  # KMIN_MAP's 400 KB at 100 Gb/s
    path = tmp_path / "hpcc.yaml"
    path.write_text(yaml.safe_dump(doc))
    res = simulate(load_scenario(path))
    assert doc["network"]["profile"] == "hpcc_ns3"
    wire = 1000 + 48 + BY_NAME["hpcc"].int_header_bytes
    drain_ns = 400e6 * wire / 1000 * 8 / (0.95 * 100)
    assert res.summary["flows_finished"] == 2
    assert res.summary["last_finish_ns"] - 2e9 == pytest.approx(drain_ns, rel=0.01)


def test_dcqcn_parameters_and_faults(tmp_path):
    config = (
        "CC_MODE 1\nALPHA_RESUME_INTERVAL 1\nRATE_DECREASE_INTERVAL 4\nRP_TIMER 900\nEWMA_GAIN 0.00390625\n"
        "FAST_RECOVERY_TIMES 1\nRATE_AI 50Mb/s\nRATE_HAI 100Mb/s\nMIN_RATE 100Mb/s\nCLAMP_TARGET_RATE 1\n"
        "HAS_WIN 0\nU_TARGET 0.9\nLINK_DOWN 500 0 2\nERROR_RATE_PER_LINK 0.001\n"
    )
    doc, notes, _ = ns3.scenario(files(tmp_path, config))
    assert doc["network"]["cc"] == {
        "algorithm": "dcqcn",
        "params": {
            "variant": "cx",
            "alpha_interval_us": 1.0,
            "decrease_interval_us": 4.0,
            "increase_interval_us": 900.0,
            "g": 0.00390625,
            "fast_recovery_steps": 1,
            "rate_ai_mbps": 50.0,
            "rate_hai_mbps": 100.0,
            "min_rate_mbps": 100.0,
            "clamp_target_rate": True,
        },
    }
    assert "U_TARGET: not used by dcqcn (CC_MODE 1)" in notes
    # LINK_DOWN time is in microseconds after 2 s (where the simulator's flows start); node 2 is h1
    assert doc["faults"][0] == {"kind": "link_down", "link": ["sw0", "h1"], "at_ns": 2e9 + 500e3}
    lossy = [f for f in doc["faults"] if f["kind"] == "lossy_port"]
    assert len(lossy) == 8 and {f["loss"] for f in lossy} == {0.001}
    check_inputs(load_scenario_doc(tmp_path, doc))


def test_an_ack_interval_in_bytes_is_noted_not_mapped(tmp_path):
    """The HPCC simulator's L2_ACK_INTERVAL is in bytes, and its receiver resets the milestone
    to the interval at every packet: past a flow's first interval bytes it ACKs every packet.
    So it is not roce-emu's ack_every_packets (an ACK per N packets all along): the import keeps
    one ACK per packet and says why."""
    doc, notes, _ = ns3.scenario(files(tmp_path, "L2_ACK_INTERVAL 4000\nL2_CHUNK_SIZE 4000\n"))
    assert "nic" not in doc["network"]
    (note,) = [n for n in notes if n.startswith("L2_ACK_INTERVAL")]
    assert note.startswith("L2_ACK_INTERVAL 4000: not modelled (the simulator resets its ACK milestone")
    assert note.endswith("roce-emu acknowledges every packet, as with 1)")


def load_scenario_doc(tmp_path, doc):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    return load_scenario(path)


def test_ecn_maps_scale_with_rate_or_are_refused(tmp_path):
    topo = "4 1 3\n0\n0 1 100Gbps 1us 0\n0 2 25Gbps 1us 0\n0 3 25Gbps 1us 0\n"
    flows = "1\n2 1 3 100 100000 2\n"
    ok = (
        "KMIN_MAP 2 25000000000 100 100000000000 400\nKMAX_MAP 2 25000000000 400 100000000000 1600\n"
        "PMAX_MAP 2 25000000000 0.2 100000000000 0.2\n"
    )
    doc, _, _ = ns3.scenario(files(tmp_path, ok, topo, flows))
    assert doc["network"]["switch"]["ecn"] == {
        "scale_with_rate": True,
        "reference_rate_gbps": 100.0,
        "kmin_bytes": 400_000,
        "kmax_bytes": 1_600_000,
        "pmax": 0.2,
    }
    with pytest.raises(ScenarioError, match="scales one threshold with the rate"):
        ns3.scenario(files(tmp_path, ok.replace("25000000000 100 ", "25000000000 150 "), topo, flows))
    with pytest.raises(ScenarioError, match="no entry for 25000000000 b/s"):
        ns3.scenario(files(tmp_path, "KMIN_MAP 1 100000000000 400\n", topo, flows))


@pytest.mark.parametrize(
    "which, text, where, message",
    [
        ("topo", TOPO.replace("100Gbps 1us", "100Gbits 1us"), "line 5", "'100Gbits' is not a rate"),
        ("topo", TOPO.replace("1000ns", "1000fortnights"), "line 4", "is not a time"),
        ("topo", TOPO.replace("5 1 4", "5 1 6"), "line 1", "says 6 links; the file has 4"),
        ("topo", TOPO.replace("0 3 100", "0 9 100"), "line 5", "node 9 is out of range"),
        (
            "flows",
            FLOWS.replace("2 3 3 101 1000000 2.0000005", "2 3 3 101 1000000 1.5"),
            "line 3",
            "before the line above",
        ),
        ("flows", FLOWS.replace("1 3 3 100", "0 3 3 100"), "line 2", "src 0 is a switch"),
        ("flows", FLOWS.replace("1 3 3 100", "7 3 3 100"), "line 2", "src 7 is out of range"),
        ("config", "CC_MODE 10\n", "CC_MODE", "HPCC-PINT is not modelled"),
        ("config", "RATE_AI fast\nCC_MODE 1\n", "RATE_AI", "is not a rate"),
    ],
)
def test_bad_input_is_one_line_naming_file_and_line(tmp_path, which, text, where, message):
    kwargs = {"topo": {"topo": text}, "flows": {"flows": text}, "config": {"config": text}}[which]
    with pytest.raises(ScenarioError) as err:
        ns3.scenario(files(tmp_path, **kwargs))
    name = {"topo": "topology.txt", "flows": "flow.txt", "config": "config.txt"}[which]
    assert err.value.source == str(tmp_path / name) and err.value.key == where and message in err.value.message


def test_topology_kind_reads_the_file_beside_the_scenario(tmp_path):
    (tmp_path / "t.txt").write_text(TOPO)
    path = tmp_path / "s.yaml"
    path.write_text("topology: {kind: ns3, file: t.txt}\nworkload: {flows: [{src: 0, dst: 3, bytes: 1000000}]}\n")
    res = simulate(load_scenario(path))
    by_hand = simulate(
        scenario(
            topology={"kind": "single_switch", "hosts": 4},
            workload={"flows": [{"src": 0, "dst": 3, "bytes": 1_000_000}]},
        )
    )
    assert res.summary["last_finish_ns"] == by_hand.summary["last_finish_ns"]
    (tmp_path / "t.txt").write_text(TOPO.replace("1000ns 0", "1000ns 0.01"))
    with pytest.raises(ScenarioError, match="import ns3"):
        load_scenario(path)


@pytest.mark.parametrize(
    "switches, links, message",
    [
        ([0], [[0, 1, 100, 1000], [0, 1, 100, 1000]], "a second time"),
        ([0], [[0, 1, 100, 1000], [1, 2, 100, 1000]], "joins two hosts"),
        ([0, 3], [[0, 1, 100, 1000], [3, 2, 100, 1000]], "not connected to node 0"),
        ([0], [[0, 1, 100, 1000], [0, 3, 100, 1000]], "host node 2 has 0 links"),
        ([0], [[0, 1, 100, 1000], [0, 2, 100, 1000], [0, 0, 100, 1000]], "to itself"),
    ],
)
def test_custom_topology_must_hang_hosts_off_switches(switches, links, message):
    with pytest.raises(Exception, match=message):
        scenario(topology={"kind": "custom", "switches": switches, "links": links})


def test_import_command(tmp_path):
    files(tmp_path, "CC_MODE 8\nEWMA_GAIN 0.0625\nDCTCP_RATE_AI 1000Mb/s\nSOMETHING_NEW 1\n")
    p = cli("import", "ns3", "config.txt", "-o", "s.yaml", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "note: SOMETHING_NEW: not a key of the HPCC simulator" in p.stderr
    doc = yaml.safe_load((tmp_path / "s.yaml").read_text())
    assert doc["network"]["cc"] == {"algorithm": "dctcp", "params": {"g": 0.0625, "rate_ai_mbps": 1000.0}}
    run = cli("run", "s.yaml", "--out", "out", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    (tmp_path / "flow.txt").write_text(FLOWS.replace("1000000 2.0000005", "1000000 1"))
    bad = cli("import", "ns3", "config.txt", "-o", "t.yaml", cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "flow.txt: line 3" in bad.stderr
    assert not (tmp_path / "t.yaml").exists()


@needs_shared
@pytest.mark.parametrize("topology", ["topology.txt", "fat.txt"])
def test_round_trip_through_the_simulators_files(tmp_path, topology):
    """Import, write the topology and flow files back in the simulator's layout, import again:
    the same scenario."""
    config = SHARED / "config.txt"
    if topology == "fat.txt":  # its 400 Gb/s links need ECN map entries (the simulator's maps scale with rate)
        config = tmp_path / "config.txt"
        config.write_text(
            "CC_MODE 1\nKMIN_MAP 2 100000000000 400 400000000000 1600\n"
            "KMAX_MAP 2 100000000000 1600 400000000000 6400\n"
            "PMAX_MAP 2 100000000000 0.2 400000000000 0.2\n"
        )
    doc, _, _ = ns3.scenario(
        config, topology=SHARED / topology, flows=None if topology == "topology.txt" else _fat_flows(tmp_path)
    )
    (tmp_path / "t2.txt").write_text(ns3.topology_text(doc["topology"]))
    (tmp_path / "f2.txt").write_text(ns3.flows_text(doc["workload"]["flows"], doc["topology"]))
    again, _, _ = ns3.scenario(config, topology=tmp_path / "t2.txt", flows=tmp_path / "f2.txt")
    assert again == doc
    assert load_scenario_doc(tmp_path, doc).topology.kind == "custom"


def _fat_flows(tmp_path):
    """Flows between hosts of fat.txt (its hosts are nodes 0-319), unsorted ids, staggered starts."""
    path = tmp_path / "fat_flows.txt"
    path.write_text("3\n5 300 3 100 100000 2\n17 4 3 100 2000 2.000001\n319 0 3 100 1 2.5\n")
    return path


def test_ns3_output_files_match_the_run(tmp_path):
    """An 8-to-1 incast under PFC alone, with output.formats: [ns3] and the PFC log: fct.txt has a
    line per flow, in finishing order, with flows.csv's times (whole ns); pfc.txt and
    traces_pfc.csv have a line per PFC frame, as many pauses and resumes as summary.json counts,
    each on the sender host that was paused (node type 0, its one device)."""
    import json

    import pandas as pd

    out = tmp_path / "run"
    p = cli(
        "run",
        ROOT / "scenarios" / "incast.yaml",
        "--out",
        out,
        "--set",
        "output.formats=[ns3]",
        "--set",
        "output.traces=[pfc]",
        cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr
    summary = json.loads((out / "summary.json").read_text())
    flows = pd.read_csv(out / "flows.csv").sort_values("finish_ns", kind="stable")
    fct = [line.split() for line in (out / "fct.txt").read_text().splitlines()]
    assert len(fct) == len(flows) == summary["flows_finished"]
    for (sip, dip, sport, dport, size, start, f, ideal), (_, row) in zip(fct, flows.iterrows()):
        assert int(sip, 16) == 0x0B000001 + row["src"] * 0x100 and int(dip, 16) == 0x0B000001 + row["dst"] * 0x100
        assert (int(size), int(start), int(f), int(ideal)) == (
            row["bytes"],
            int(row["start_ns"]),
            int(row["fct_ns"]),
            int(row["ideal_fct_ns"]),
        )
    pfc = [list(map(int, line.split())) for line in (out / "pfc.txt").read_text().splitlines()]
    assert summary["pfc_pauses_sent"] > 0
    assert sum(t == 1 for *_, t in pfc) == summary["pfc_pauses_sent"]
    assert sum(t == 0 for *_, t in pfc) == summary["pfc_resumes_sent"]
    assert all(node_type == 0 and device == 1 for _, _, node_type, device, _ in pfc)
    assert [row[0] for row in pfc] == sorted(row[0] for row in pfc)
    log = pd.read_csv(out / "traces_pfc.csv")
    assert len(log) == len(pfc) and set(log["event"]) == {"pause", "resume"}


def test_ns3_output_keeps_the_files_node_ids(tmp_path):
    """On an imported topology (switch 0, hosts 1-4), host 0 is node 1: 0b000101 in fct.txt."""
    doc, _, _ = ns3.scenario(files(tmp_path))
    doc["output"] = {"formats": ["ns3"]}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    p = cli("run", path, "--out", tmp_path / "run", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    fct = [line.split() for line in (tmp_path / "run" / "fct.txt").read_text().splitlines()]
    assert sorted((sip, dip) for sip, dip, *_ in fct) == [("0b000101", "0b000301"), ("0b000201", "0b000301")]
    assert sorted(sport for _, _, sport, *_ in fct) == ["10000", "10000"]


def test_pfc_log_refuses_exact_fast_forward():
    with pytest.raises(Exception, match="jumps over repeated PFC frames"):
        scenario(output={"traces": ["pfc"]}, sim={"fast_forward": "exact"})


@pytest.mark.quick
def test_fct_txt_source_ports_count_per_host_pair_as_the_simulator_numbers_them():
    from roce_emu.results.ns3_format import source_ports

    # third.cc keeps a port counter per (source, destination): a host's flows to two hosts both use 10000
    assert source_ports([1, 1, 1, 2], [3, 4, 3, 3]) == [10000, 10000, 10001, 10000]
