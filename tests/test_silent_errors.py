"""Input that could give a silent wrong answer: each is an error naming the file and the key
the user wrote, or a warning, and each test is named for the defect it guards."""

import typing
from pathlib import Path

import pytest
from click.testing import CliRunner
from pydantic import BaseModel

from conftest import scenario, simulate
from roce_emu.cli import main
from roce_emu.config import load_scenario, parse_override
from roce_emu.config.load import validate_document
from roce_emu.config.schema import MIN_RATE_GBPS, Scenario
from roce_emu.errors import ScenarioError
from roce_emu.importers import ns3
from roce_emu.run.inputs import check_inputs, run_warnings
from roce_emu.sweep import load_sweep_file

ROOT = Path(__file__).resolve().parent.parent
RESNET = ROOT / "scenarios" / "training_resnet50.yaml"
INCAST = ROOT / "scenarios" / "incast.yaml"


def _error(path, overrides=()) -> str:
    """The one line of the ScenarioError that loading and checking ``path`` raises."""
    with pytest.raises(ScenarioError) as info:
        check_inputs(load_scenario(path, list(overrides)), str(path))
    line = str(info.value)
    assert "\n" not in line
    return line


# ---- 7: a duplicate YAML key -------------------------------------------------------------------
TWO_NETWORKS = """name: twice
network:
  cc: {algorithm: hpcc}
topology: {kind: single_switch, hosts: 2}
network:
  mtu_bytes: 1000
workload:
  flows:
    - {src: 0, dst: 1, bytes: 1000}
"""


@pytest.mark.quick
def test_duplicate_top_level_key_is_refused_not_dropped(tmp_path):
    """Two network blocks: PyYAML alone keeps the second (cc none) and says nothing."""
    path = tmp_path / "twice.yaml"
    path.write_text(TWO_NETWORKS)
    line = _error(path)
    assert line.startswith(f"{path}: network: the key is given twice, on lines 2 and 5"), line


@pytest.mark.quick
@pytest.mark.parametrize(
    "text, key, lines",
    [
        ("network:\n  cc:\n    algorithm: hpcc\n    algorithm: none\n", "network.cc.algorithm", "on lines 3 and 4"),
        (
            "topology: {kind: single_switch, hosts: 2}\nworkload:\n  flows:\n"
            "    - {src: 0, dst: 1, bytes: 5, src: 1}\n",
            "workload.flows.0.src",
            "on line 4",
        ),
    ],
)
def test_duplicate_key_at_any_depth_names_the_key_and_lines(tmp_path, text, key, lines):
    path = tmp_path / "deep.yaml"
    path.write_text(text)
    assert f"{path}: {key}: the key is given twice, {lines}" in _error(path)


@pytest.mark.quick
def test_duplicate_key_in_a_sweep_file_is_refused(tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_text(f"scenario: {INCAST}\ngrid:\n  seed: [1, 2]\nrepeat: 2\nrepeat: 3\n")
    with pytest.raises(ScenarioError, match=r"sweep.yaml: repeat: the key is given twice, on lines 4 and 5"):
        load_sweep_file(path)


@pytest.mark.quick
def test_a_yaml_merge_is_not_a_duplicate(tmp_path):
    """A key beside a merge (<<) overrides the merged one, as YAML means: no error."""
    path = tmp_path / "merge.yaml"
    path.write_text(
        "topology:\n  kind: single_switch\n  link: &l {rate_gbps: 100, delay_ns: 500}\n"
        "  tiers:\n    host: {<<: *l, delay_ns: 100}\nworkload: {flows: [{src: 0, dst: 1, bytes: 10}]}\n"
    )
    assert load_scenario(path).topology.tiers["host"].delay_ns == 100


# ---- 9: YAML 1.1 booleans ----------------------------------------------------------------------
@pytest.mark.quick
@pytest.mark.parametrize("written, mode", [("trains", "trains"), ("off", "off"), ("exact", "exact"), ("on", "trains")])
def test_fast_forward_mode_names_arrive_as_written(tmp_path, written, mode):
    path = tmp_path / "ff.yaml"
    path.write_text(INCAST.read_text() + f"sim:\n  fast_forward: {written}\n")
    assert load_scenario(path).sim.fast_forward == mode
    assert load_scenario(INCAST, [f"sim.fast_forward={written}"]).sim.fast_forward == mode


@pytest.mark.quick
@pytest.mark.parametrize("written", ["yes", "no", "true", "y"])
def test_fast_forward_yes_is_not_silently_on(tmp_path, written):
    """YAML 1.1 read yes as True, which became the approximate mode (then named on)."""
    path = tmp_path / "ff.yaml"
    path.write_text(INCAST.read_text() + f"sim:\n  fast_forward: {written}\n")
    for line in (_error(path), _error(INCAST, [f"sim.fast_forward={written}"])):
        assert "sim.fast_forward:" in line and "is not allowed" in line
        assert "(allowed: off, exact, trains, memo)" in line


@pytest.mark.quick
def test_set_values_read_as_yaml_1_2():
    assert parse_override("a.b=on") == ("a.b", "on")
    assert parse_override("a.b=yes") == ("a.b", "yes")
    assert parse_override("a.b=false") == ("a.b", False)
    assert parse_override("a.b=TRUE") == ("a.b", True)
    with pytest.raises(ScenarioError, match="a.b.x: the key is given twice"):
        parse_override("a.b={x: 1, x: 2}")


def _bool_keys(annotation=Scenario, path: tuple = ()) -> list[str]:
    """Every boolean key of the schema, dotted (a list's items as index 0; cc params, a mapping
    of any names, are checked by the registry)."""
    if annotation is bool:
        return [".".join(path)]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [k for name, f in annotation.model_fields.items() for k in _bool_keys(f.annotation, (*path, name))]
    if typing.get_origin(annotation) is dict:
        return []
    if typing.get_origin(annotation) is list:
        return _bool_keys(typing.get_args(annotation)[0], (*path, "0"))
    return sorted({k for arg in typing.get_args(annotation) for k in _bool_keys(arg, path)})


BOOL_KEYS = _bool_keys()


@pytest.mark.quick
def test_the_schema_has_the_boolean_keys_this_file_checks():
    assert set(BOOL_KEYS) >= {
        "network.switch.pfc.enabled",
        "network.switch.ecn.enabled",
        "network.switch.ecn.scale_with_rate",
        "workload.training.concurrent_all_reduces",
        "output.collective_flows",
    }, BOOL_KEYS


@pytest.mark.quick
@pytest.mark.parametrize("key", [k for k in BOOL_KEYS if ".0." not in k])
def test_boolean_keys_take_true_or_false_only(key):
    """pydantic would read 'yes', 'on' and 1 as true: a boolean key takes true or false alone."""
    kind = ["topology={kind: rail_optimized}"] if key == "topology.pxn" else []  # the one kind with that key
    if key == "workload.training.model.sequence_parallel":
        kind = ["workload.training.model={kind: gpt}"]  # a gpt model's key
    for value in ("true", "false", "True", "FALSE"):
        load_scenario(RESNET, [*kind, f"{key}={value}"])
    for value in ("yes", "on", "off", "1", "0", "y"):
        with pytest.raises(ScenarioError) as info:
            load_scenario(RESNET, [*kind, f"{key}={value}"])
        assert f"{key}: " in str(info.value) and "write true or false" in str(info.value)


# ---- 10: an error names a key that does not exist ----------------------------------------------
@pytest.mark.quick
@pytest.mark.parametrize(
    "overrides, key",
    [
        (["workload.training.dp_algorithm=hierarchical"], "workload.training.dp_algorithm"),
        (
            ["workload.training.dp_algorithm=in_network", "topology={kind: torus, dims: [4, 4]}"],
            "workload.training.dp_algorithm",
        ),
        (
            [
                "workload.training.dp_algorithm=halving_doubling",
                "workload.training.dp=3",
                "workload.training.hosts=[0,1,2]",
            ],
            "workload.training.dp",
        ),
        (["workload.training.scheduler=themis_fifo"], "workload.training.scheduler"),
        (["workload.training.chunks=4096", "workload.training.bucket_bytes=0"], "workload.training.chunks"),
        (
            ["workload.training.model=null", "workload.training.layers=[{name: a}, {name: a}]"],
            "workload.training.layers.1.name",
        ),
        (
            [
                "workload.training.model=null",
                "workload.training.tp=2",
                "workload.training.dp=8",
                "workload.training.layers=[{name: a, forward_comm: {kind: all_reduce, bytes: 1}}]",
            ],
            "workload.training.layers.0.forward_comm.bytes",
        ),
        (
            [
                "workload.training.model=null",
                "workload.training.tp=2",
                "workload.training.dp=8",
                "workload.training.layers=[{name: a, backward_comm: {kind: all_gather, bytes: 64, "
                "algorithm: halving_doubling}}]",
            ],
            "workload.training.layers.0.backward_comm.algorithm",
        ),
        (["workload.collectives=[{name: bwd.fc, kind: all_reduce, bytes: 1000}]"], "workload.collectives.0.name"),
        (["sim.stall_timeout_ns=10"], "sim.stall_timeout_ns"),
        (["sim.fast_forward=exact", "output.traces=[pfc]"], "sim.fast_forward"),
        (["network.mtu_bytes=64", "network.wire.data_header_bytes=1"], "network.mtu_bytes"),
    ],
)
def test_errors_name_the_key_the_user_wrote(overrides, key):
    line = _error(RESNET, overrides)
    assert line.startswith(f"{RESNET}: {key}: "), line


# ---- 8: idle hosts -----------------------------------------------------------------------------
@pytest.mark.quick
@pytest.mark.parametrize(
    "overrides, key, idle",
    [
        (
            ["workload.training.tp=3"],
            "workload.training.tp",
            "3 x 1 x 5 = 15 ranks is not allowed: the topology has 16 hosts, and host 15 would do nothing",
        ),
        (
            ["workload.training.tp=3", "workload.training.dp=4"],
            "workload.training.dp",
            "hosts 12 to 15 would do nothing",
        ),
        (["workload.training.pp=3"], "workload.training.pp", "host 15 would do nothing"),
        (["workload.training.dp=17"], "workload.training.dp", "17 ranks is not allowed: the topology has 16 hosts"),
        (
            ["workload.training.dp=4", "workload.training.hosts=[0, 1, 2]"],
            "workload.training.dp",
            "lists 3 hosts, one per rank",
        ),
        (["workload.training.hosts=[0, 1, 1]"], "workload.training.hosts", "distinct"),
        (["workload.training.hosts=[0, 16]"], "workload.training.hosts.1", "host ids run from 0 to 15"),
    ],
)
def test_a_split_that_leaves_hosts_idle_is_an_error(overrides, key, idle):
    """tp 3 on 16 hosts trained on 15 and left host 15 idle without a word."""
    line = _error(RESNET, overrides)
    assert line.startswith(f"{RESNET}: {key}: ") and idle in line, line


def _layers_on(hosts, n_hosts=4):
    layer = {"name": "l0", "forward_ns": 1000, "backward_ns": 2000, "weight_grad_bytes": 30_000}
    training = {"layers": [layer]} if hosts is None else {"layers": [layer], "hosts": hosts}
    return scenario(topology={"kind": "single_switch", "hosts": n_hosts}, workload={"training": training})


def test_listed_training_hosts_are_the_ones_used():
    """workload.training.hosts places rank r on hosts[r]: hosts 1 to 3 train, host 0 does nothing,
    as the user asked, so no warning."""
    res = simulate(_layers_on([3, 1, 2]))
    assert res.outcome.status == "finished"
    tasks = res.prepared.workload.tasks
    flows = res.prepared.workload.flows
    assert set(tasks.host[tasks.host >= 0].tolist()) == {1, 2, 3}
    assert set(flows.src.tolist()) | set(flows.dst.tolist()) == {1, 2, 3}
    assert "warnings" not in res.summary


POISSON = {"patterns": [{"kind": "poisson", "load": 0.1, "cdf": "websearch", "duration_ns": 300_000}]}


def test_hosts_idle_by_chance_are_warned_of():
    """A poisson pattern over all hosts that reaches only some of them: a warning line naming the
    idle hosts, in summary.json's warnings too."""
    sc = scenario(topology={"kind": "single_switch", "hosts": 16}, workload=POISSON)
    res = simulate(sc)
    flows = res.prepared.workload.flows
    idle = sorted(set(range(16)) - set(flows.src.tolist()) - set(flows.dst.tolist()))
    assert idle, "the case needs hosts the pattern does not reach"
    (warning,) = res.summary["warnings"]
    assert f"({len(idle)} of 16) do nothing in this run" in warning
    assert warning.startswith("hosts 0, 1, 3, 5, 7, 9 to 11, 15 ") and idle == [0, 1, 3, 5, 7, 9, 10, 11, 15]


def test_cli_prints_the_idle_host_warning(tmp_path):
    import yaml

    path = tmp_path / "poisson.yaml"
    path.write_text(yaml.safe_dump({"topology": {"kind": "single_switch", "hosts": 16}, "workload": POISSON}))
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 0
    assert "warning: hosts 0, 1, 3, 5, 7, 9 to 11, 15 (9 of 16) do nothing in this run" in result.output


@pytest.mark.quick
@pytest.mark.parametrize(
    "workload",
    [
        {"flows": [{"src": 0, "dst": 1, "bytes": 1000}]},  # single_flow: the user chose the hosts
        {"patterns": [{"kind": "incast", "hosts": [0, 1, 2], "bytes": 1000}]},
        {"collectives": [{"kind": "all_reduce", "hosts": [0, 1], "bytes": 1000}]},
        {"compute": [{"name": "c", "host": 2, "duration_ns": 10}]},
        {"collectives": [{"kind": "all_reduce", "bytes": 1000}]},  # all hosts: none idle
    ],
)
def test_no_idle_warning_where_the_user_chose_the_hosts(workload):
    sc = scenario(topology={"kind": "single_switch", "hosts": 8}, workload=workload)
    inputs = check_inputs(sc)
    assert run_warnings(sc, inputs.fabric, inputs.workload) == []


# ---- 12: FRED with its own defaults ------------------------------------------------------------
FRED = {"kind": "fred", "npus": 20, "group_size": 4, "io_controllers": 2}


def test_fred_with_its_defaults_runs():
    """FRED's 3 TB/s ports on 1 us links needed 9 MB of PFC headroom each, more than the 32 MiB
    buffer holds for a group: refused. Its links default to 100 ns now, and a small run of its
    defaults finishes."""
    sc = scenario(
        topology=FRED,
        workload={
            "patterns": [{"kind": "weight_streaming", "bytes": 20_000}],
            "flows": [{"src": 0, "dst": 19, "bytes": 50_000}],
        },
    )
    assert sc.topology.link.delay_ns == 100
    res = simulate(sc)
    assert res.outcome.status == "finished" and res.summary["flows_finished"] == 21


@pytest.mark.quick
def test_a_buffer_too_small_for_pfc_says_what_would_do():
    sc = scenario(
        topology={**FRED, "link": {"delay_ns": 1000}}, workload={"flows": [{"src": 0, "dst": 1, "bytes": 10}]}
    )
    with pytest.raises(ScenarioError) as info:
        check_inputs(sc)
    line = str(info.value)
    assert "network.switch.buffer_bytes: 33554432 is not allowed: switch 'l1.0' needs more than 37553052" in line
    assert "give 71303168 (" in line, line
    check_inputs(
        sc.model_copy(
            update={
                "network": sc.network.model_copy(
                    update={"switch": sc.network.switch.model_copy(update={"buffer_bytes": 71303168})}
                )
            }
        )
    )


@pytest.mark.quick
@pytest.mark.parametrize("section", [{"link": {"rate_gbps": 400}}, {"tiers": {"uplink": {"rate_gbps": 400}}}])
def test_a_fred_rate_that_would_be_ignored_is_refused(section):
    key = "topology.link.rate_gbps" if "link" in section else "topology.tiers.uplink.rate_gbps"
    with pytest.raises(ScenarioError) as info:
        validate_document({"topology": {**FRED, **section}}, "fred.yaml")
    assert f"{key}: 400 is not allowed: fred's rates are npu_rate_gbps" in str(info.value)


# ---- small ones --------------------------------------------------------------------------------
@pytest.mark.quick
def test_the_empty_workload_error_names_every_kind():
    line = _error(INCAST, ["workload.flows=[]", "workload.patterns=[]"])
    assert "nothing to do: give flows, patterns, collectives, compute, training, chakra or inference" in line


@pytest.mark.quick
def test_the_ns3_output_file_notes_say_what_roce_emu_writes(tmp_path):
    (tmp_path / "topology.txt").write_text("3 1 2\n0\n0 1 100Gbps 1us 0\n0 2 100Gbps 1us 0\n")
    (tmp_path / "flow.txt").write_text("1\n1 2 3 100 1000 2\n")
    config = tmp_path / "config.txt"
    config.write_text(
        "TOPOLOGY_FILE mix/topology.txt\nFLOW_FILE mix/flow.txt\nFCT_OUTPUT_FILE fct.txt\nPFC_OUTPUT_FILE pfc.txt\n"
    )
    _, notes, _ = ns3.scenario(config)
    for key, written in (("FCT_OUTPUT_FILE", "fct.txt"), ("PFC_OUTPUT_FILE", "pfc.txt")):
        (note,) = [n for n in notes if n.startswith(key)]
        assert "port tables" not in note and written in note and "output.formats: [ns3]" in note


def _rate_bounds(annotation=Scenario, seen: set | None = None) -> dict[str, float | None]:
    """Every rate key of the schema (a field named *_gbps) as Model.field: its lower bound."""
    seen = set() if seen is None else seen
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if annotation in seen:
            return {}
        seen.add(annotation)
        out: dict[str, float | None] = {}
        for name, f in annotation.model_fields.items():
            if name.endswith("_gbps"):
                bounds = [getattr(m, "ge", None) or getattr(m, "gt", None) for m in f.metadata]
                out[f"{annotation.__name__}.{name}"] = max((b for b in bounds if b is not None), default=None)
            out.update(_rate_bounds(f.annotation, seen))
        return out
    return {k: v for arg in typing.get_args(annotation) for k, v in _rate_bounds(arg, seen).items()}


@pytest.mark.quick
def test_every_rate_is_at_least_a_megabit_per_second():
    """A rate under 0.5 b/s was 0 in the engine's integer bits per second: a ZeroDivisionError
    with a traceback (the fuzz test's mutation topology.link.rate_gbps = 1e-12)."""
    bounds = _rate_bounds()
    assert {"Link.rate_gbps", "RailOptimized.nic_rate_gbps", "Fault.rate_gbps"} <= set(bounds), bounds
    assert all(b is not None and b >= MIN_RATE_GBPS for b in bounds.values()), bounds


@pytest.mark.quick
@pytest.mark.parametrize(
    "overrides, key",
    [
        (["topology.link.rate_gbps=1e-12"], "topology.link.rate_gbps"),
        (["network.switch.ecn.reference_rate_gbps=1e-300"], "network.switch.ecn.reference_rate_gbps"),
        (["faults=[{kind: slow_link, link: [sw0, h1], rate_gbps: 0.0000001}]"], "faults.0.rate_gbps"),
        (
            ["topology={kind: custom, switches: [0], links: [[0, 1, 1.0e-12, 1000], [0, 2, 100, 1000]]}"],
            "topology.links.0.2",
        ),
    ],
)
def test_a_rate_below_a_megabit_per_second_is_one_line_exit_2(overrides, key):
    result = CliRunner().invoke(main, ["run", str(INCAST), "--out", "unused", *(f"--set={o}" for o in overrides)])
    assert result.exit_code == 2, result.output
    line = result.output.strip()
    assert "\n" not in line and f"{INCAST}: {key}: " in line and "greater than or equal to 0.001" in line, line
