"""Exact fast-forward (sim.fast_forward: exact) against the exact engine.

Every comparison is to the picosecond: each flow's row, each task's start and finish, each
collective, the iteration breakdown and every counter of summary.json must be identical.
Only the events processed, the wall time and the fast-forward's own counters may differ.
"""
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import assert_conservation, scenario
from roce_emu.api import prepare, prepare_scenario, run
from roce_emu.config import load_scenario
from roce_emu.errors import ScenarioError
from roce_emu.iteration import collective_rows, task_rows

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
#: summary keys that describe the run's cost, not its result
COST_KEYS = {"wall_s", "engine_load_s", "events", "events_per_s", "fast_forward", "fast_forward_jumps",
             "events_skipped", "skipped_ns", "fast_forward_checkpoints",
             "provenance"}  # names the sim.fast_forward override, which differs by design


def _results(prepared, slice_events=None):
    res = run(prepared, write=False, progress=False, slice_events=slice_events)
    assert_conservation(res.outcome.world)
    result = {k: v for k, v in res.summary.items() if k not in COST_KEYS}
    return (res.rows, task_rows(res.outcome.world, prepared.workload),
            collective_rows(res.outcome.world, prepared.workload), result), res.summary


def both(sc=None, path=None, overrides=()):
    """(exact results, fast-forward results, fast-forward summary) of one scenario."""
    out = []
    for mode in ("off", "exact"):
        if path is not None:
            prepared = prepare(path, [*overrides, f"sim.fast_forward={mode}"])
        else:
            prepared = prepare_scenario(sc.model_copy(update={"sim": sc.sim.model_copy(
                update={"fast_forward": mode})}))
        out.append(_results(prepared))
    (exact, _), (fast, summary) = out
    return exact, fast, summary


def assert_identical(exact, fast):
    names = ("flows", "tasks", "collectives", "summary")
    for name, a, b in zip(names, exact, fast):
        if a != b:
            if isinstance(a, dict):
                diff = {k: (a[k], b.get(k)) for k in a if a[k] != b.get(k)}
            else:
                diff = next((x, y) for x, y in zip(a, b) if x != y) if len(a) == len(b) else (len(a), len(b))
            raise AssertionError(f"fast-forward changed the {name}: {diff}")


# Each shipped scenario, made small where it is long; together they span the algorithms,
# collectives, training models, fabrics, congestion control, an incast and a link failure.
SHIPPED = [
    ("incast.yaml", ()),
    ("single_flow.yaml", ()),
    ("cc_none.yaml", ()),
    ("cc_dcqcn.yaml", ()),
    ("cc_hpcc.yaml", ()),
    ("cc_timely.yaml", ()),
    ("cc_dctcp.yaml", ()),
    ("fat_tree_permutation.yaml", ()),
    ("torus_neighbours.yaml", ()),
    ("allreduce_multi_dim.yaml", ("workload.collectives.0.bytes=4000000", "workload.collectives.0.chunks=2")),
    ("link_failure.yaml", ("workload.collectives.0.bytes=4000000",)),
    ("training_dlrm.yaml", ("workload.iterations=1", "topology.k=2")),
    ("training_transformer.yaml", ("workload.iterations=1", "workload.training.model.layers=1")),
    ("training_resnet50.yaml", ("workload.iterations=1", "topology.k=2")),
]


@pytest.mark.parametrize("name,overrides", SHIPPED, ids=[s[0].removesuffix(".yaml") for s in SHIPPED])
def test_shipped_scenarios_are_identical_with_fast_forward(name, overrides):
    exact, fast, _ = both(path=SCENARIOS / name, overrides=overrides)
    assert_identical(exact, fast)


def _collective(kind, algorithm, topology, cc, nbytes, chunks=1):
    return scenario(topology=topology, network={"cc": {"algorithm": cc}},
                    workload={"collectives": [{"kind": kind, "algorithm": algorithm, "bytes": nbytes,
                                               "chunks": chunks}]})


LEAF_SPINE = {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 4,
              "link": {"rate_gbps": 200, "delay_ns": 1000}}
FAT_TREE = {"kind": "fat_tree", "k": 4}
TORUS = {"kind": "torus", "dims": [4, 2]}
MESH = {"kind": "mesh", "dims": [2, 4]}
MULTI_DIM = {"kind": "multi_dim", "dims": [{"size": 2, "kind": "ring", "rate_gbps": 400},
                                           {"size": 4, "kind": "switch"}]}
COLLECTIVES = [
    ("all_reduce", "ring", LEAF_SPINE, "none", 8_000_000),
    ("all_reduce", "ring", FAT_TREE, "dcqcn", 16_000_000),
    ("all_reduce", "halving_doubling", FAT_TREE, "hpcc", 8_000_000),
    ("all_reduce", "direct", LEAF_SPINE, "timely", 4_000_000),
    ("all_reduce", "hierarchical", MULTI_DIM, "dctcp", 8_000_000),
    ("all_reduce", "hierarchical", TORUS, "none", 8_000_000),
    ("all_to_all", "direct", MESH, "dcqcn", 4_000_000),
    ("all_to_all", "ring", TORUS, "hpcc", 4_000_000),
    ("all_gather", "ring", MESH, "none", 8_000_000),
    ("reduce_scatter", "direct", LEAF_SPINE, "dctcp", 8_000_000),
]


@pytest.mark.parametrize("kind,algorithm,topology,cc,nbytes", COLLECTIVES,
                         ids=[f"{c[0]}-{c[1]}-{c[2]['kind']}-{c[3]}" for c in COLLECTIVES])
def test_collectives_are_identical_with_fast_forward(kind, algorithm, topology, cc, nbytes):
    exact, fast, _ = both(_collective(kind, algorithm, topology, cc, nbytes))
    assert_identical(exact, fast)


def test_a_long_ring_all_reduce_skips_most_of_its_events():
    """The case fast-forward is for: every ring step is a long steady state. It must skip the
    bulk of the events (so the identity tests above are not vacuous) and still be exact."""
    exact, fast, summary = both(_collective("all_reduce", "ring", LEAF_SPINE, "none", 32_000_000))
    assert_identical(exact, fast)
    assert summary["fast_forward"] == "exact" and summary["fast_forward_exact"] is True
    assert summary["fast_forward_jumps"] >= 14  # at least one per ring step
    assert summary["events_skipped"] > 3 * summary["events"]
    assert 0 < summary["skipped_ns"] < summary["sim_time_ns"]


def test_fast_forward_results_do_not_depend_on_slicing():
    sc = _collective("all_reduce", "ring", LEAF_SPINE, "dcqcn", 8_000_000)
    sc = sc.model_copy(update={"sim": sc.sim.model_copy(update={"fast_forward": "exact"})})
    (one, s1), (many, s2) = (_results(prepare_scenario(sc), slice_events=n) for n in (1 << 30, 997))
    assert_identical(one, many)
    assert s1["fast_forward_jumps"] == s2["fast_forward_jumps"] > 0
    assert s1["events"] == s2["events"] and s1["events_skipped"] == s2["events_skipped"]


def test_signature_arrays_grow_when_a_checkpoint_needs_room():
    """A fabric with hundreds of flows in flight outgrows the first signature arrays; the run
    grows them (ST_FF_GROW) and stays exact."""
    sc = _collective("all_to_all", "direct", {"kind": "single_switch", "hosts": 24}, "none", 24_000_000)
    exact, fast, summary = both(sc)
    assert_identical(exact, fast)
    assert summary["fast_forward_checkpoints"] > 0


TOPOLOGIES = st.sampled_from([LEAF_SPINE, FAT_TREE, TORUS, MESH, MULTI_DIM,
                              {"kind": "single_switch", "hosts": 8}])


@st.composite
def workloads(draw):
    topology = draw(TOPOLOGIES)
    cc = draw(st.sampled_from(["none", "dcqcn", "hpcc", "timely", "dctcp"]))
    hosts = 8 if topology["kind"] != "fat_tree" else 16
    flows = [{"src": s, "dst": d, "bytes": draw(st.integers(1, 3_000_000)),
              "start_ns": draw(st.sampled_from([0, 0, 1000, 25_000]))}
             for s, d in draw(st.lists(st.tuples(st.integers(0, hosts - 1), st.integers(0, hosts - 1))
                                       .filter(lambda p: p[0] != p[1]), min_size=1, max_size=6))]
    collectives, compute = [], []
    if draw(st.booleans()):
        kind = draw(st.sampled_from(["all_reduce", "all_to_all", "all_gather", "reduce_scatter"]))
        algorithm = draw(st.sampled_from(["ring", "direct"]))
        collectives.append({"name": "coll", "kind": kind, "algorithm": algorithm,
                            "bytes": draw(st.integers(64_000, 4_000_000)), "chunks": draw(st.integers(1, 3))})
        if draw(st.booleans()):  # compute before it, and after it (task ends amid the traffic)
            compute.append({"name": "before", "duration_ns": draw(st.integers(0, 50_000))})
            compute.append({"name": "after", "duration_ns": draw(st.integers(1, 200_000)), "after": ["coll"],
                            "hosts": [0]})
            collectives[0]["after"] = ["before"]
    return scenario(topology=topology, network={"cc": {"algorithm": cc}},
                    workload={"flows": flows, "collectives": collectives, "compute": compute,
                              "iterations": draw(st.integers(1, 2))},
                    seed=draw(st.integers(0, 1000)))


@settings(max_examples=int(os.environ.get("FF_EXAMPLES", 25)), deadline=None, print_blob=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(workloads())
def test_random_workloads_are_identical_with_fast_forward(sc):
    exact, fast, _ = both(sc)
    assert_identical(exact, fast)


def test_on_and_off_are_read_as_yaml_writes_them(tmp_path):
    path = tmp_path / "s.yaml"
    for text, want in (("on", "on"), ("off", "off"), ("exact", "exact"), ("'on'", "on"), ("true", "on")):
        path.write_text(f"sim: {{fast_forward: {text}}}\nworkload: {{flows: [{{src: 0, dst: 1, bytes: 1000}}]}}\n")
        assert load_scenario(path).sim.fast_forward == want
    path.write_text("sim: {fast_forward: fast}\nworkload: {flows: [{src: 0, dst: 1, bytes: 1000}]}\n")
    with pytest.raises(ScenarioError) as err:
        load_scenario(path)
    assert "sim.fast_forward" in str(err.value) and "\n" not in str(err.value)
