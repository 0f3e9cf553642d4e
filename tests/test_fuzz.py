"""Fuzzed scenario files: every input either runs and passes the invariants, or is rejected with
one line naming the file (and the key), never a traceback, a hang or a half-written result.

Documents are mutations of small valid scenarios: any known or unknown key set to a value of any
type (huge, negative, NaN, wrong type, nested), keys deleted, and raw bytes (malformed YAML,
non-UTF-8). Runs are capped (sim.max_events, sim.max_wall_s) so a huge input ends on its own.
"""

import copy
import os

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from conftest import assert_conservation
from roce_emu.api import prepare, run
from roce_emu.errors import ScenarioError
from roce_emu.results.tables import flows_now

pytestmark = pytest.mark.extensive

BASES = [
    {
        "name": "a",
        "topology": {"kind": "single_switch", "hosts": 3},
        "workload": {"flows": [{"src": 1, "dst": 0, "bytes": 20000}, {"src": 2, "dst": 0, "bytes": 30000}]},
    },
    {
        "name": "b",
        "topology": {"kind": "fat_tree", "k": 2},
        "network": {"cc": {"algorithm": "dcqcn"}},
        "workload": {"patterns": [{"kind": "all_to_all", "bytes": 5000}]},
    },
    {
        "name": "c",
        "topology": {"kind": "torus", "dims": [2, 2]},
        "workload": {
            "collectives": [{"name": "ar", "kind": "all_reduce", "bytes": 40000, "chunks": 2}],
            "compute": [{"name": "fwd", "duration_ns": 1000}],
        },
    },
    {
        "name": "d",
        "topology": {"kind": "multi_dim", "dims": [{"size": 2}, {"size": 2, "kind": "switch"}]},
        "network": {"cc": {"algorithm": "hpcc"}},
        "workload": {
            "training": {
                "layers": [{"name": "l0", "forward_ns": 100, "backward_ns": 200, "weight_grad_bytes": 8000}],
                "tp": 2,
            }
        },
    },
    {
        "name": "e",
        "topology": {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 1},
        "network": {"routing": {"convergence_ns": 2000}, "nic": {"rto_ns": 20000}},
        "workload": {"flows": [{"src": 0, "dst": 1, "bytes": 200000}]},
        "faults": [
            {"kind": "link_down", "link": ["leaf0", "spine0"], "at_ns": 3000, "until_ns": 9000},
            {"kind": "lossy_port", "port": ["leaf1", "h1"], "loss": 0.05},
        ],
    },
]
KEYS = [
    "name",
    "seed",
    "topology.kind",
    "topology.hosts",
    "topology.k",
    "topology.dims",
    "topology.link.rate_gbps",
    "topology.link.delay_ns",
    "topology.tiers",
    "network.mtu_bytes",
    "network.switch.buffer_bytes",
    "network.switch.pfc.enabled",
    "network.switch.pfc.headroom_bytes",
    "network.switch.ecn.kmin_bytes",
    "network.switch.ecn.pmax",
    "network.cc.algorithm",
    "network.cc.params",
    "network.cc.params.g",
    "network.nic.rto_ns",
    "network.wire.ack_bytes",
    "workload.flows",
    "workload.flows.0.bytes",
    "workload.flows.0.src",
    "workload.flows.0.start_ns",
    "workload.patterns",
    "workload.collectives",
    "workload.collectives.0.algorithm",
    "workload.collectives.0.bytes",
    "workload.compute.0.after",
    "workload.iterations",
    "workload.training.tp",
    "sim.max_time_ns",
    "sim.stall_timeout_ns",
    "output.traces",
    "output.trace_interval_ns",
    "bogus",
    "topology.bogus",
    "network.cc.params.bogus",
    "faults",
    "faults.0.kind",
    "faults.0.link",
    "faults.0.link.1",
    "faults.0.at_ns",
    "faults.0.until_ns",
    "faults.1.loss",
    "faults.1.port",
    "faults.1.rate_gbps",
    "network.routing.convergence_ns",
    "network.transport",
    "network.irn.rto_low_ns",
    "network.irn.bdp_cap_packets",
]
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.sampled_from([0, 1, 2, 3, 64, 1000, 2**50, 2**63]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(
        [
            "none",
            "dcqcn",
            "hpcc",
            "timely",
            "dctcp",
            "irn",
            "go_back_n",
            "ring",
            "direct",
            "hierarchical",
            "halving_doubling",
            "fat_tree",
            "torus",
            "mesh",
            "multi_dim",
            "all",
            "rate",
            "queue",
            "link_down",
            "slow_link",
            "lossy_port",
            "leaf0",
            "spine1",
            "h0",
            "sw0",
        ]
    ),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=6,
)
MUTATION = st.tuples(st.sampled_from(KEYS), st.one_of(VALUES, st.just("__delete__")))
CAP = {"max_events": 200_000, "max_wall_s": 5.0}
FUZZ_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", 1500))  # per test; raise it locally to search longer


def _set(doc, key, value):
    node = doc
    parts = key.split(".")
    for part in parts[:-1]:
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                return
            node = node[int(part)]
        elif isinstance(node, dict):
            if not isinstance(node.get(part), (dict, list)):
                node[part] = {}
            node = node[part]
        else:
            return
    last = parts[-1]
    if isinstance(node, dict):
        if value == "__delete__":
            node.pop(last, None)
        else:
            node[last] = value
    elif isinstance(node, list) and last.isdigit() and int(last) < len(node) and value != "__delete__":
        node[int(last)] = value


def _check_outcome(path, overrides=()):
    """Either a ScenarioError of one line naming the file, or a run that passes the invariants."""
    try:
        prepared = prepare(path, list(overrides))
    except ScenarioError as err:
        text = str(err)
        assert "\n" not in text, text
        assert text.startswith((str(path), "--set")), text
        return "rejected"
    result = run(prepared, write=False, progress=False, check=True)
    world = result.outcome.world
    assert result.outcome.status in ("finished", "incomplete", "deadlock", "stalled"), result.outcome.reason
    assert_conservation(world)
    for row in result.rows:
        if row["fct_ns"] != "":
            assert float(row["fct_ns"]) >= float(row["ideal_fct_ns"]) - 1e-6, row
    # a queue pair still open when a limit stops the run holds its flow's finish: flows_now shows it
    finished = int((flows_now(world)["finish_ps"] >= 0).sum())
    assert finished == result.summary["flows_finished"]
    if result.outcome.status == "finished":
        assert finished == len(world.flow)
    assert world.node["used_bytes"].min() >= 0 and (world.node["used_bytes"] <= world.node["buffer_bytes"]).all()
    return result.outcome.status


def _capped(doc):
    doc = copy.deepcopy(doc)
    sim = doc.get("sim")
    if not isinstance(sim, dict):
        sim = {}
    doc["sim"] = sim
    return doc, [f"sim.max_events={CAP['max_events']}", f"sim.max_wall_s={CAP['max_wall_s']}"]


@settings(
    max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None, print_blob=True
)
@given(base=st.sampled_from(range(len(BASES))), mutations=st.lists(MUTATION, min_size=1, max_size=3))
@example(base=0, mutations=[("network.switch.buffer_bytes", 2**63)])  # once overflowed int64 with a traceback
@example(base=2, mutations=[("network.nic.rto_ns", True)])  # flows done, queue pairs still open at the limit
@example(base=0, mutations=[("topology.kind", [])])  # an unhashable kind once broke the file-topology check
@example(base=0, mutations=[("network.profile", "hpcc_ns3"), ("network.cc.algorithm", [])])  # and the profile
@example(base=0, mutations=[("topology.link.rate_gbps", 1e-12)])  # 0 b/s once: ZeroDivisionError in busy_ps
@example(base=4, mutations=[("network.transport", "irn")])  # IRN through a down link and a lossy port
def test_mutated_documents_run_or_fail_cleanly(tmp_path_factory, base, mutations):
    doc = copy.deepcopy(BASES[base])
    for key, value in mutations:
        _set(doc, key, value)
    doc, caps = _capped(doc)
    path = tmp_path_factory.mktemp("fuzz") / "scenario.yaml"
    try:
        text = yaml.safe_dump(doc)
    except yaml.YAMLError:  # pragma: no cover - safe_dump takes every generated value
        return
    path.write_text(text)
    _check_outcome(path, caps)


@settings(
    max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None, print_blob=True
)
@given(
    data=st.one_of(
        st.binary(max_size=200),
        st.text(max_size=200).map(
            lambda s: s.encode("utf-8", "surrogatepass") if not any(0xD800 <= ord(c) <= 0xDFFF for c in s) else b"\xff"
        ),
        st.sampled_from(
            [
                b"name: [unclosed\n",
                b"topology: {kind: fat_tree, k: 3}\n",
                b"\xff\xfe\x00",
                b"- 1\n- 2\n",
                b"",
                b"workload: {flows: [{src: 0, dst: 1, bytes: 1e999}]}",
            ]
        ),
    )
)
def test_raw_bytes_fail_cleanly(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("raw") / "scenario.yaml"
    path.write_bytes(data)
    status = _check_outcome(path, [f"sim.max_events={CAP['max_events']}"])
    assert status in ("rejected", "finished", "incomplete", "deadlock", "stalled")


def test_a_directory_or_a_missing_file_is_one_line(tmp_path):
    for path, needle in ((tmp_path, "is a directory"), (tmp_path / "missing.yaml", "no such file")):
        with pytest.raises(ScenarioError) as err:
            prepare(path)
        assert needle in str(err.value) and "\n" not in str(err.value)


def test_huge_sizes_end_on_their_own(tmp_path):
    """The largest flow and a near-unlimited simulated time: the event cap ends the run."""
    path = tmp_path / "s.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "topology": {"kind": "single_switch", "hosts": 2},
                "sim": {"max_time_ns": 1e15},
                "workload": {"flows": [{"src": 0, "dst": 1, "bytes": 2**50}]},
            }
        )
    )
    assert _check_outcome(path, ["sim.max_events=100000"]) == "incomplete"
