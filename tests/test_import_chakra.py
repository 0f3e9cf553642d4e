"""Chakra execution traces as the workload: the field's sample traces load and run, a trace
gives the same times as the same workload written natively, sends meet their receives,
groups follow involved_dim, and bad traces are one line naming the file and the message."""

import gzip
import os
from pathlib import Path

import numpy as np
import pytest

from conftest import scenario, simulate
from roce_emu.config.load import load_scenario
from roce_emu.errors import ScenarioError
from roce_emu.importers.chakra import read_trace, trace_files
from roce_emu.importers.chakra_schema import COLLECTIVE_TYPES, NODE_TYPES, GlobalMetadata, Node
from roce_emu.results.iteration import collective_rows
from roce_emu.run.inputs import check_inputs

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("ROCE_EMU_SHARED_DATA", ROOT.parent / "shared" / "data"))
needs_shared = pytest.mark.skipif(
    not (SHARED / "chakra").is_dir(), reason="../shared/data/chakra is not beside this checkout"
)


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def node(id, type, deps=(), ctrl=(), us=0, **attrs):
    n = Node(id=id, name=f"n{id}", type=NODE_TYPES.index(type), duration_micros=us)
    n.data_deps.extend(deps)
    n.ctrl_deps.extend(ctrl)
    for key, value in attrs.items():
        a = n.attr.add(name=key)
        if key == "involved_dim":
            a.bool_list.values.extend(value)
        elif key == "comm_type":
            a.int64_val = COLLECTIVE_TYPES.index(value)
        elif key == "pg_name":
            a.string_val = value
        else:
            a.int64_val = value
    return n


def write_traces(folder: Path, ranks: list[list], gz=False) -> str:
    """One file per rank in Chakra's layout (varint length, GlobalMetadata, Nodes); the prefix."""
    for r, nodes in enumerate(ranks):
        data = b"".join(
            varint(len(m)) + m
            for m in [GlobalMetadata(version="0.0.4").SerializeToString()] + [n.SerializeToString() for n in nodes]
        )
        path = folder / f"t.{r}.et{'.gz' if gz else ''}"
        path.write_bytes(gzip.compress(data) if gz else data)
    return str(folder / "t")


def chakra_scenario(prefix, topology=None, **chakra):
    return scenario(
        topology=topology or {"kind": "single_switch", "hosts": 4}, workload={"chakra": {"prefix": prefix, **chakra}}
    )


def per_rank_program(rank):
    """Compute 10 us, all-reduce 1 MB, compute 5 us, all-gather 256 KB (rank-independent)."""
    return [
        node(1, "COMP_NODE", us=10),
        node(2, "COMM_COLL_NODE", [1], comm_type="ALL_REDUCE", comm_size=1_000_000),
        node(3, "COMP_NODE", [2], us=5),
        node(4, "COMM_COLL_NODE", [3], comm_type="ALL_GATHER", comm_size=262_144),
    ]


@pytest.mark.quick
@needs_shared
def test_the_fields_sample_traces_load():
    files = trace_files(str(SHARED / "chakra" / "mlp_model_parallel" / "MLP_ModelParallel"))
    assert len(files) == 32
    meta, nodes = read_trace(files[0])
    assert meta["schema"].startswith("1.0.2")
    kinds = [n.type for n in nodes]
    assert len(nodes) == 29 and kinds.count("COMP_NODE") == 18 and kinds.count("COMM_COLL_NODE") == 11
    sizes = [n.comm_size for n in nodes if n.type == "COMM_COLL_NODE"]
    assert min(sizes) == 37_632 and max(sizes) == 147_456
    # the PyTorch trace (gzip): 3,664 nodes; 7 collectives carry a type and size: 5 all-reduces and
    # 2 broadcasts, 424 B to 31.5 MB (shared/data/README.md)
    meta, nodes = read_trace(trace_files(str(SHARED / "chakra" / "pytorch" / "chakra"))[0])
    colls = [(n.comm_type, n.comm_size) for n in nodes if n.type == "COMM_COLL_NODE" and n.comm_type]
    assert len(nodes) == 3664 and sum(n.type == "COMM_COLL_NODE" for n in nodes) == 21
    assert sorted(t for t, _ in colls) == ["ALL_REDUCE"] * 5 + ["BROADCAST"] * 2
    assert min(s for _, s in colls) == 424 and round(max(s for _, s in colls) / 1e6, 1) == 31.5


RAIL_4X8 = "{kind: rail_optimized, nodes: 4, gpus_per_node: 8, nodes_per_leaf: 2, spines: 2}"


@needs_shared
@pytest.mark.parametrize("topology", ["dgx", "rail"])
def test_mlp_trace_runs_on_its_dgx_fabric_and_on_a_rail_fabric(tmp_path, topology):
    """32 ranks of the MLP trace on DGX_H100-32.yml (8 x 4 NPUs behind switches), and on a
    rail-optimised fabric of 4 servers x 8 GPUs (rank r on GPU r % 8 of server r // 8): every
    collective of the trace runs over the 32 ranks, each flow between two of the 32 GPUs. The
    forward pass chains compute and all-gathers; in the backward pass each all-reduce runs
    beside the weight-gradient compute of its layer (microseconds against milliseconds), so
    the iteration is all the compute plus the all-gathers."""
    sc = tmp_path / "mlp.yaml"
    mlp = SHARED / "chakra" / "mlp_model_parallel" / "MLP_ModelParallel"
    fabric = {"dgx": f"{{kind: astra_sim, file: {SHARED / 'astra-sim' / 'DGX_H100-32.yml'}}}", "rail": RAIL_4X8}
    sc.write_text(f"topology: {fabric[topology]}\nworkload: {{chakra: {{prefix: {mlp}}}}}\n")
    res = simulate(load_scenario(sc))
    rows = collective_rows(res.outcome.world, res.prepared.workload)
    assert len(rows) == 11 and {r["ranks"] for r in rows} == {32}
    assert res.prepared.fabric.n_hosts == 32 and res.summary["flows_finished"] == res.summary["flows"] > 0
    _, nodes = read_trace(SHARED / "chakra" / "mlp_model_parallel" / "MLP_ModelParallel.0.et")
    compute_ns = sum(n.duration_us for n in nodes if n.type == "COMP_NODE") * 1000
    gathers_ns = sum(float(r["time_ns"]) for r in rows if r["kind"] == "all_gather")
    shortest_wg_ns = min(n.duration_us for n in nodes if n.name.endswith("BWD_WG")) * 1000
    assert max(float(r["time_ns"]) for r in rows if r["kind"] == "all_reduce") < shortest_wg_ns
    # at most the sum, and within 250 ns per all-gather (6) of it: a collective's row spans its
    # first rank's start to its last rank's end, where the critical path goes through one rank
    # (tens of ns of skew per collective behind switches, up to about 200 ns across the rails)
    assert compute_ns + gathers_ns - 6 * 250 <= res.summary["iteration_ns"][0] <= compute_ns + gathers_ns
    assert "workload_notes" not in res.summary  # every node has an equivalent


@pytest.mark.parametrize("gz", [False, True])
def test_trace_gives_the_times_of_the_same_workload_written_natively(tmp_path, gz):
    prefix = write_traces(tmp_path, [per_rank_program(r) for r in range(4)], gz=gz)
    imported = simulate(chakra_scenario(prefix))
    native = simulate(
        scenario(
            topology={"kind": "single_switch", "hosts": 4},
            workload={
                "compute": [
                    {"name": "c1", "duration_ns": 10_000},
                    {"name": "c3", "duration_ns": 5_000, "after": ["ar"]},
                ],
                "collectives": [
                    {"name": "ar", "kind": "all_reduce", "bytes": 1_000_000, "after": ["c1"]},
                    {"name": "ag", "kind": "all_gather", "bytes": 262_144, "after": ["c3"]},
                ],
            },
        )
    )
    assert imported.summary["iteration_ns"] == native.summary["iteration_ns"]
    a = collective_rows(imported.outcome.world, imported.prepared.workload)
    b = collective_rows(native.outcome.world, native.prepared.workload)
    assert [(r["kind"], r["start_ns"], r["finish_ns"]) for r in a] == [
        (r["kind"], r["start_ns"], r["finish_ns"]) for r in b
    ]


def test_send_meets_its_receive_by_tag(tmp_path):
    """Rank 0 computes 20 us, then sends 1 MB (tag 7) to rank 1, which computes 3 us once the
    data is in. The receive is done when the last of 1000 packets (1082 B on the wire, 86.56 ns
    at 100 Gb/s) has crossed the switch: 1001 serialisations and two 1 us links after the send
    starts. So the iteration ends at 20 + 86.646 56 + 2 + 3 us."""
    prefix = write_traces(
        tmp_path,
        [
            [node(1, "COMP_NODE", us=20), node(2, "COMM_SEND_NODE", [1], comm_dst=1, comm_size=1_000_000, comm_tag=7)],
            [node(5, "COMM_RECV_NODE", comm_src=0, comm_size=1_000_000, comm_tag=7), node(6, "COMP_NODE", [5], us=3)],
        ],
    )
    res = simulate(chakra_scenario(prefix, topology={"kind": "single_switch", "hosts": 2}))
    assert res.summary["flows"] == 1
    assert res.summary["iteration_ns"][0] == pytest.approx(20_000 + 1001 * 86.56 + 2_000 + 3_000, abs=1e-3)


def test_involved_dim_picks_the_group(tmp_path):
    """On a 2 x 2 multi_dim fabric, an all-reduce over dimension 0 only runs in two groups of
    two ranks (those sharing their dimension-1 coordinate); over both dimensions, in one."""
    ranks = [
        [
            node(1, "COMM_COLL_NODE", comm_type="ALL_REDUCE", comm_size=100_000, involved_dim=[True, False]),
            node(2, "COMM_COLL_NODE", [1], comm_type="ALL_REDUCE", comm_size=100_000, involved_dim=[True, True]),
        ]
        for _ in range(4)
    ]
    prefix = write_traces(tmp_path, ranks)
    res = simulate(
        chakra_scenario(
            prefix, topology={"kind": "multi_dim", "dims": [{"size": 2, "kind": "ring"}, {"size": 2, "kind": "switch"}]}
        )
    )
    rows = collective_rows(res.outcome.world, res.prepared.workload)
    assert sorted((r["ranks"], r["group"]) for r in rows) == [(2, 0), (2, 2), (4, 0)]
    with pytest.raises(ScenarioError, match="involved_dim"):
        check_inputs(chakra_scenario(prefix))  # a single switch has no dimensions


def test_process_groups_are_named_in_the_notes(tmp_path):
    prefix = write_traces(
        tmp_path, [[node(1, "COMM_COLL_NODE", comm_type="ALL_REDUCE", comm_size=1000, pg_name="7")] for _ in range(2)]
    )
    res = simulate(chakra_scenario(prefix, topology={"kind": "single_switch", "hosts": 2}))
    assert any("process group (pg_name)" in n and n.startswith("2 ") for n in res.summary["workload_notes"])


def test_ranks_map_to_hosts(tmp_path):
    prefix = write_traces(tmp_path, [per_rank_program(r) for r in range(4)])
    res = simulate(chakra_scenario(prefix, topology={"kind": "single_switch", "hosts": 8}, ranks=[7, 5, 3, 1]))
    flows = res.prepared.workload.flows
    assert set(np.unique(flows.src)) == {1, 3, 5, 7}


def test_control_dependency_cycle_is_broken_and_counted(tmp_path):
    """A CPU operator that waits (control) for the kernel it launched, which waits (data) for it:
    the control dependency goes, and the note counts it."""
    prefix = write_traces(tmp_path, [[node(1, "COMP_NODE", ctrl=[2], us=4), node(2, "COMP_NODE", [1], us=6)]])
    res = simulate(chakra_scenario(prefix, topology={"kind": "single_switch", "hosts": 2}))
    assert res.summary["iteration_ns"] == [10_000.0]
    assert res.summary["workload_notes"] == ["1 control dependencies that closed a cycle: dropped"]


@pytest.mark.parametrize(
    "case, where, message",
    [
        ("truncated", "message 4", "needs"),  # the metadata, then 4 nodes: the last one cut short
        ("not_a_node", "message 1", "not a Chakra Node"),
        ("data_cycle", "node 1", "data dependencies form a cycle"),
        ("unmatched", "", "never comes on rank 1"),
        ("different", "node 2", "ALL_GATHER of 5000 B here but ALL_REDUCE"),
        ("no_send", "node 5", "waits for a send from rank 0"),
    ],
)
def test_bad_trace_is_one_line_naming_file_and_message(tmp_path, case, where, message):
    if case in ("truncated", "not_a_node"):
        prefix = write_traces(tmp_path, [per_rank_program(r) for r in range(2)])
        path = Path(prefix + ".1.et")
        data = path.read_bytes()
        if case == "truncated":
            path.write_bytes(data[:-3])
        else:
            meta_len = data[0]
            path.write_bytes(data[: 1 + meta_len] + varint(3) + b"\xff\xff\xff")
    elif case == "data_cycle":
        prefix = write_traces(tmp_path, [[node(1, "COMP_NODE", [2]), node(2, "COMP_NODE", [1])]] * 2)
    elif case == "unmatched":
        prefix = write_traces(tmp_path, [per_rank_program(0), [node(1, "COMP_NODE", us=1)]])
    elif case == "different":
        other = [node(1, "COMP_NODE", us=10), node(2, "COMM_COLL_NODE", [1], comm_type="ALL_GATHER", comm_size=5000)]
        prefix = write_traces(tmp_path, [per_rank_program(0), other])
    else:
        prefix = write_traces(
            tmp_path, [[node(1, "COMP_NODE", us=1)], [node(5, "COMM_RECV_NODE", comm_src=0, comm_size=10, comm_tag=1)]]
        )
    with pytest.raises(ScenarioError) as err:
        check_inputs(chakra_scenario(prefix, topology={"kind": "single_switch", "hosts": 2}))
    assert err.value.source.startswith(prefix) and err.value.key == where and message in err.value.message
    assert "\n" not in str(err.value)


def test_scenario_errors(tmp_path):
    prefix = write_traces(tmp_path, [per_rank_program(r) for r in range(4)])
    with pytest.raises(ScenarioError, match="ranks: 2 hosts for 4 trace files"):
        check_inputs(chakra_scenario(prefix, ranks=[0, 1]))
    with pytest.raises(ScenarioError, match="host ids run from 0 to 3"):
        check_inputs(chakra_scenario(prefix, ranks=[0, 1, 2, 9]))
    with pytest.raises(ScenarioError, match="chakra.0.et: no such file"):
        check_inputs(chakra_scenario(str(tmp_path / "chakra")))
    sc = tmp_path / "s.yaml"
    sc.write_text("workload:\n  chakra: {prefix: t}\n  collectives: [{kind: all_reduce, bytes: 1000}]\n")
    with pytest.raises(ScenarioError) as err:
        load_scenario(sc)
    assert err.value.key == "workload.chakra" and "not both" in err.value.message
    sc.write_text("topology: {kind: single_switch, hosts: 4}\nworkload:\n  chakra: {prefix: t}\n")
    assert load_scenario(sc).workload.chakra.prefix == str(tmp_path / "t")  # beside the scenario file
