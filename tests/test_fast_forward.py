"""Fast-forward against the exact engine: every case runs with sim.fast_forward off, exact and trains.

- **exact**: every comparison is to the picosecond. Each flow's row, each task's start and
  finish, each collective, the iteration breakdown and every counter of summary.json must be
  identical. Only the events processed, the wall time and the fast-forward's own counters
  may differ.
- **trains** (packet trains): the accuracy the approximation promises where it does not warn
  (docs/fast_forward.md, "Accuracy"). The iteration time within 1 % (or, without
  iterations, the last completion), every collective within 2 % of its own duration, the same
  flows finished and the same bytes delivered. A run that sent no train says it is not
  ``approximate`` and must then be identical. Random workloads find cases beyond those
  bounds: they are held to 3 % (RANDOM_TOLERANCE), or where the exact engine's own
  result is more sensitive than that, to twice its sensitivity: the largest change that
  making every link delay 1, 2, 3 or 5 ns longer makes to the exact result. The random draws
  are the same in every run (derandomize), so the test is not flaky; FF_EXAMPLES=300 explores
  further.
- **off** itself: the shipped scenarios' exact results are those recorded in
  tests/golden_exact.json (GOLDEN), so that no change moves the exact engine unnoticed.
"""

import hashlib
import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from conftest import assert_conservation, scenario
from roce_emu.api import prepare, prepare_scenario, run
from roce_emu.config import load_scenario
from roce_emu.errors import ScenarioError
from roce_emu.results.iteration import collective_rows, task_rows
from roce_emu.run import driver
from roce_emu.run.world import grow_fast_forward

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
#: summary keys that describe the run (its cost, its mode, what it says of itself), not its result
COST_KEYS = {
    "wall_s",
    "engine_load_s",
    "events",
    "events_per_s",
    "fast_forward",
    "fast_forward_jumps",
    "events_skipped",
    "skipped_ns",
    "fast_forward_checkpoints",
    "trains_sent",
    "packets_in_trains",
    "provenance",
    "warnings",  # what the run says of its approximation (no trains under HPCC, say): not a result
}  # names the sim.fast_forward override, which differs by design


def _results(prepared, slice_events=None):
    res = run(prepared, write=False, progress=False, slice_events=slice_events)
    assert_conservation(res.outcome.world)
    result = {k: v for k, v in res.summary.items() if k not in COST_KEYS}
    return (
        res.rows,
        task_rows(res.outcome.world, prepared.workload),
        collective_rows(res.outcome.world, prepared.workload),
        result,
    ), res.summary


def _prepared(sc, path, overrides, mode):
    if path is not None:
        return prepare(path, [*overrides, f"sim.fast_forward={mode}"])
    return prepare_scenario(sc.model_copy(update={"sim": sc.sim.model_copy(update={"fast_forward": mode})}))


#: the exact engine's results of each shipped scenario (test_shipped_scenarios_with_fast_forward), as
#: digests: a change that moves any of them fails here. A change meant to move them records them again:
#: GOLDEN_RECORD=1 python -m pytest tests/test_fast_forward.py -k shipped -n 0
GOLDEN = Path(__file__).resolve().parent / "golden_exact.json"


def _plain(x):
    """x with NumPy scalars as Python ones and floats to 12 significant digits (a change of the
    engine moves picoseconds and counts; the last bit of a mean may move with NumPy's version)."""
    if hasattr(x, "item"):
        x = x.item()
    if isinstance(x, float):
        return float(f"{x:.12g}")
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


def golden_digest(exact, summary) -> str:
    """A SHA-256 of a run's results: every flow's row, task, collective, summary value but the
    version, and the events the engine processed."""
    rows, tasks, collectives, result = exact
    payload = [rows, tasks, collectives, {k: v for k, v in result.items() if k != "version"}, summary["events"]]
    text = json.dumps(_plain(payload), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def assert_golden(name, exact, summary):
    digests = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
    if os.environ.get("GOLDEN_RECORD"):
        digests[name] = golden_digest(exact, summary)
        GOLDEN.write_text(json.dumps(dict(sorted(digests.items())), indent=1) + "\n")
    assert golden_digest(exact, summary) == digests.get(name), (
        f"the exact engine's results of {name} changed (see GOLDEN in {Path(__file__).name})"
    )


def both(sc=None, path=None, overrides=(), golden=None):
    """(exact results, fast-forward results, fast-forward summary) of one scenario; with
    ``golden``, the exact results are also those recorded under that name (GOLDEN)."""
    exact, exact_summary = _results(_prepared(sc, path, overrides, "off"))
    if golden is not None:
        assert_golden(golden, exact, exact_summary)
    fast, summary = _results(_prepared(sc, path, overrides, "exact"))
    return exact, fast, summary


def all_modes(sc=None, path=None, overrides=(), sensitivity=False, tolerance=0.0, golden=None):
    """Run a case off, exact and trains; assert exact identical and trains within ITERATION_BOUND and COLLECTIVE_BOUND,
    or (with sensitivity, for a scenario object) within RANDOM_TOLERANCE, or twice the exact
    engine's own sensitivity where that is larger."""
    exact, fast, summary = both(sc, path, overrides, golden)
    trains, trains_summary = _results(_prepared(sc, path, overrides, "trains"))
    assert_identical(exact, fast)
    if exact[3]["data_packets_dropped"] == 0:  # trains keep a fabric lossless where it is exactly
        assert trains_summary["data_packets_dropped"] == 0
    if exact[3]["retransmits"] == 0:  # and each flow's packets in order (no NACK, no resend)
        assert trains_summary["retransmits"] == 0
    misses = train_errors(exact, trains, trains_summary, RANDOM_TOLERANCE if sensitivity else tolerance)
    if misses and sensitivity:
        spread = {}
        for ns in NUDGES_NS:
            nudged_off = _results(prepare_scenario(nudged(sc, ns)))[0]
            for what, err in relative_errors(exact, nudged_off).items():
                spread[what] = max(spread.get(what, 0.0), abs(err))
        misses = {
            what: (err, SENSITIVITY_FACTOR * spread[what])
            for what, (err, _) in misses.items()
            if abs(err) > SENSITIVITY_FACTOR * spread[what]
        }
    assert not misses, f"packet trains beyond the bounds (error, bound): {misses}"
    return summary, trains_summary


def assert_identical(exact, fast):
    names = ("flows", "tasks", "collectives", "summary")
    for name, a, b in zip(names, exact, fast):
        if a != b:
            if isinstance(a, dict):
                diff = {k: (a[k], b.get(k)) for k in a if a[k] != b.get(k)}
            else:
                diff = next((x, y) for x, y in zip(a, b) if x != y) if len(a) == len(b) else (len(a), len(b))
            raise AssertionError(f"fast-forward changed the {name}: {diff}")


#: packet trains' bound on the iteration time: the 1 % within which ``trains`` runs without a warning (run/inputs.py)
ITERATION_BOUND = 0.01
COLLECTIVE_BOUND = 0.02  #: and on each collective's duration
NUDGES_NS = (1, 2, 3, 5)  #: the exact engine's sensitivity: every link delay this much longer
SENSITIVITY_FACTOR = 2  #: trains may differ from the exact engine this many times as much as the nudges do
#: random workloads: trains within this of the exact engine (ring steps of about a hundred
#: packets on a k=4 fat-tree miss 1 % by up to 2.1 %: docs/fast_forward.md, "Small cases")
RANDOM_TOLERANCE = 0.03


def nudged(sc, ns):
    """The scenario with every link delay ns longer: a change no study would notice, which shows
    how sensitive the exact engine's result is (rings at full load amplify it; see
    docs/fast_forward.md)."""
    topo = sc.topology
    update = {
        "link": topo.link.model_copy(update={"delay_ns": topo.link.delay_ns + ns}),
        "tiers": {
            k: v if v.delay_ns is None else v.model_copy(update={"delay_ns": v.delay_ns + ns})
            for k, v in topo.tiers.items()
        },
    }
    if topo.kind == "multi_dim":
        update["dims"] = [d.model_copy(update={"delay_ns": d.delay_ns + ns}) for d in topo.dims]
    if topo.kind == "rail_optimized":
        update["nvlink_delay_ns"] = topo.nvlink_delay_ns + ns
    return sc.model_copy(update={"topology": topo.model_copy(update=update)})


def relative_errors(exact, other):
    """{what: other / exact - 1} for the iteration (or the last completion) and each collective."""
    (_, _, colls_a, res_a), (_, _, colls_b, res_b) = exact, other
    key = "mean_iteration_ns" if res_a.get("mean_iteration_ns") else "last_finish_ns"
    out = {key: res_b[key] / res_a[key] - 1}
    assert len(colls_a) == len(colls_b)
    for x, y in zip(colls_a, colls_b):
        what = f"collective {x['name']} #{x['iteration']} group {x['group']}"
        out[what] = float(y["time_ns"]) / float(x["time_ns"]) - 1
    return out


def train_errors(exact, trains, summary, tolerance=0.0):
    """Packet trains against the exact engine: {what: (error, bound)} of those beyond
    ITERATION_BOUND and COLLECTIVE_BOUND (or the tolerance, if larger). A run that sent no train must be identical."""
    (_, _, _, res_a), (_, _, _, res_b) = exact, trains
    if not summary["approximate"]:
        assert_identical(exact, trains)
        return {}
    assert summary["trains_sent"] > 0
    for key in ("flows_finished", "data_packets_delivered", "status"):
        assert res_a[key] == res_b[key], (key, res_a[key], res_b[key])
    errors = relative_errors(exact, trains)
    bounds = {
        what: max(tolerance, COLLECTIVE_BOUND if what.startswith("collective") else ITERATION_BOUND) for what in errors
    }
    return {what: (err, bounds[what]) for what, err in errors.items() if abs(err) > bounds[what]}


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
    ("allreduce_in_network.yaml", ("workload.collectives.0.bytes=2000000", "workload.collectives.0.chunks=4")),
    ("rail_allreduce.yaml", ("workload.collectives.0.bytes=4000000",)),
    ("link_failure.yaml", ("workload.collectives.0.bytes=4000000",)),
    ("training_dlrm.yaml", ("workload.iterations=1", "topology.k=2")),
    ("training_transformer.yaml", ("workload.iterations=1", "workload.training.model.layers=1")),
    ("training_resnet50.yaml", ("workload.iterations=1", "topology.k=2")),
]


#: trains' stated tolerance where it is wider than ITERATION_BOUND / COLLECTIVE_BOUND: DLRM's embedding
#: all-to-alls, which each rank enters when its own compute ends, move by up to 7 % (docs/fast_forward.md)
TRAINS_TOLERANCE = {"training_dlrm.yaml": 0.10}


@pytest.mark.parametrize("name,overrides", SHIPPED, ids=[s[0].removesuffix(".yaml") for s in SHIPPED])
def test_shipped_scenarios_with_fast_forward(name, overrides):
    all_modes(path=SCENARIOS / name, overrides=overrides, tolerance=TRAINS_TOLERANCE.get(name, 0.0), golden=name)


#: the shipped scenarios the cases above leave out: the exact engine's results, as they ship
UNLISTED = sorted({p.name for p in SCENARIOS.glob("*.yaml")} - {name for name, _ in SHIPPED})


@pytest.mark.parametrize("name", UNLISTED, ids=[n.removesuffix(".yaml") for n in UNLISTED])
def test_the_exact_engine_keeps_every_shipped_scenario_s_results(name):
    exact, summary = _results(prepare(SCENARIOS / name, []))
    assert_golden(name, exact, summary)


def _collective(kind, algorithm, topology, cc, nbytes, chunks=1):
    return scenario(
        topology=topology,
        network={"cc": {"algorithm": cc}},
        workload={"collectives": [{"kind": kind, "algorithm": algorithm, "bytes": nbytes, "chunks": chunks}]},
    )


LEAF_SPINE = {
    "kind": "leaf_spine",
    "leaves": 2,
    "spines": 2,
    "hosts_per_leaf": 4,
    "link": {"rate_gbps": 200, "delay_ns": 1000},
}
FAT_TREE = {"kind": "fat_tree", "k": 4}
TORUS = {"kind": "torus", "dims": [4, 2]}
MESH = {"kind": "mesh", "dims": [2, 4]}
MULTI_DIM = {
    "kind": "multi_dim",
    "dims": [{"size": 2, "kind": "ring", "rate_gbps": 400}, {"size": 4, "kind": "switch"}],
}
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


@pytest.mark.parametrize(
    "kind,algorithm,topology,cc,nbytes", COLLECTIVES, ids=[f"{c[0]}-{c[1]}-{c[2]['kind']}-{c[3]}" for c in COLLECTIVES]
)
def test_collectives_with_fast_forward(kind, algorithm, topology, cc, nbytes):
    all_modes(_collective(kind, algorithm, topology, cc, nbytes))


@pytest.mark.parametrize(
    "algorithm,topology,chunks", [("ring", LEAF_SPINE, 1), ("hierarchical", MULTI_DIM, 4)], ids=["ring", "hierarchical"]
)
def test_connection_queue_pairs_with_fast_forward(algorithm, topology, chunks):
    """network.nic.queue_pair: connection, whose waiting flows are part of the state."""
    sc = _collective("all_reduce", algorithm, topology, "dcqcn", 8_000_000, chunks)
    nic = sc.network.nic.model_copy(update={"queue_pair": "connection"})
    all_modes(sc.model_copy(update={"network": sc.network.model_copy(update={"nic": nic})}))


def test_a_long_ring_all_reduce_skips_most_of_its_events():
    """The case fast-forward is for: every ring step is a long steady state. It must skip the
    bulk of the events (so the identity tests above are not vacuous) and still be exact."""
    exact, fast, summary = both(_collective("all_reduce", "ring", LEAF_SPINE, "none", 32_000_000))
    assert_identical(exact, fast)
    assert summary["fast_forward"] == "exact" and summary["approximate"] is False
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


def test_signature_arrays_grow_when_a_checkpoint_needs_room(monkeypatch):
    """A fabric with hundreds of flows in flight outgrows the first signature arrays; the run
    grows them (ST_FF_GROW) and stays exact."""
    sizes = []  # (capacity before, capacity after) of the stored signatures at each growth

    def recording(fast, world):
        grown = grow_fast_forward(fast, world)
        sizes.append((fast.sig.shape[2], grown.sig.shape[2]))
        return grown

    monkeypatch.setattr(driver, "grow_fast_forward", recording)
    sc = _collective("all_to_all", "direct", {"kind": "single_switch", "hosts": 24}, "none", 24_000_000)
    exact, fast, summary = both(sc)
    assert_identical(exact, fast)
    assert summary["fast_forward_checkpoints"] > 0
    assert any(after > before for before, after in sizes), sizes


TOPOLOGIES = st.sampled_from([LEAF_SPINE, FAT_TREE, TORUS, MESH, MULTI_DIM, {"kind": "single_switch", "hosts": 8}])


@st.composite
def workloads(draw):
    topology = draw(TOPOLOGIES)
    cc = draw(st.sampled_from(["none", "dcqcn", "hpcc", "timely", "dctcp"]))
    hosts = 8 if topology["kind"] != "fat_tree" else 16
    flows = [
        {
            "src": s,
            "dst": d,
            "bytes": draw(st.integers(1, 3_000_000)),
            "start_ns": draw(st.sampled_from([0, 0, 1000, 25_000])),
        }
        for s, d in draw(
            st.lists(
                st.tuples(st.integers(0, hosts - 1), st.integers(0, hosts - 1)).filter(lambda p: p[0] != p[1]),
                min_size=1,
                max_size=6,
            )
        )
    ]
    collectives, compute = [], []
    if draw(st.booleans()):
        kind = draw(st.sampled_from(["all_reduce", "all_to_all", "all_gather", "reduce_scatter"]))
        algorithm = draw(st.sampled_from(["ring", "direct"]))
        collectives.append(
            {
                "name": "coll",
                "kind": kind,
                "algorithm": algorithm,
                "bytes": draw(st.integers(64_000, 4_000_000)),
                "chunks": draw(st.integers(1, 3)),
            }
        )
        if draw(st.booleans()):  # compute before it, and after it (task ends amid the traffic)
            compute.append({"name": "before", "duration_ns": draw(st.integers(0, 50_000))})
            compute.append(
                {"name": "after", "duration_ns": draw(st.integers(1, 200_000)), "after": ["coll"], "hosts": [0]}
            )
            collectives[0]["after"] = ["before"]
    workload = {"flows": flows, "collectives": collectives, "compute": compute, "iterations": draw(st.integers(1, 2))}
    seed = draw(st.integers(0, 1000))
    network: dict = {"cc": {"algorithm": cc}}
    # coalesced ACKs; not with HPCC or DCTCP, whose windows may hold fewer than N packets (they would wait for the RTO)
    if cc not in ("hpcc", "dctcp") and draw(st.booleans()):
        network["nic"] = {"ack_every_packets": draw(st.sampled_from([2, 4, 8]))}
    return scenario(topology=topology, network=network, workload=workload, seed=seed)


@pytest.mark.extensive
@settings(
    max_examples=int(os.environ.get("FF_EXAMPLES", 25)),
    deadline=None,
    print_blob=True,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(workloads())
# draws beyond ITERATION_BOUND and COLLECTIVE_BOUND with trains: +2.07 % on the reduce-scatter,
# +1.03 % and -5.77 % on the iteration (where a 1 ns longer link delay moves the exact engine's iteration by -9.6 %)
@example(
    scenario(
        topology=FAT_TREE,
        seed=521,
        workload={
            "flows": [
                {"src": s, "dst": d, "bytes": b, "start_ns": t}
                for s, d, b, t in (
                    (0, 1, 50580, 1000),
                    (0, 14, 9248, 25000),
                    (5, 0, 49975, 1000),
                    (0, 1, 1187, 0),
                    (0, 8, 61, 1000),
                    (3, 10, 100000, 1000),
                )
            ],
            "collectives": [
                {
                    "name": "coll",
                    "kind": "reduce_scatter",
                    "algorithm": "ring",
                    "bytes": 1989911,
                    "chunks": 3,
                    "after": ["before"],
                }
            ],
            "compute": [
                {"name": "before", "duration_ns": 4906},
                {"name": "after", "duration_ns": 289, "after": ["coll"], "hosts": [0]},
            ],
            "iterations": 2,
        },
    )
)
@example(
    scenario(
        topology=FAT_TREE,
        seed=2,
        workload={
            "flows": [{"src": 0, "dst": 1, "bytes": 1}] * 6,
            "collectives": [{"name": "coll", "kind": "all_reduce", "algorithm": "ring", "bytes": 1980102}],
        },
    )
)
# A queue pair per flow: the case this example was found for, where the exact engine's ring drift
# makes it as sensitive as trains are off (-3.8 % on the iteration, a 2 ns longer delay +7.2 %). On
# the default connections the exact engine is steady (at most 0.29 % for 1-5 ns), and trains are late
# by +2.1 % on the iteration, +1.2 % and +3.3 % on the collectives: ring steps of 29 packets in two
# channels with one ACK per packet (docs/fast_forward.md, "Small cases"), beyond 3 % on the second.
@example(
    scenario(
        topology=FAT_TREE,
        seed=0,
        network={"nic": {"queue_pair": "flow"}},
        workload={
            "flows": [{"src": 0, "dst": 1, "bytes": 1}],
            "iterations": 2,
            "collectives": [{"name": "coll", "kind": "all_reduce", "algorithm": "ring", "bytes": 937331, "chunks": 2}],
        },
    )
)
def test_random_workloads_with_fast_forward(sc):
    all_modes(sc, sensitivity=True)


def test_on_and_off_are_read_as_yaml_writes_them(tmp_path):
    path = tmp_path / "s.yaml"
    for text, want in (("on", "trains"), ("off", "off"), ("exact", "exact"), ("'on'", "trains"), ("trains", "trains")):
        path.write_text(f"sim: {{fast_forward: {text}}}\nworkload: {{flows: [{{src: 0, dst: 1, bytes: 1000}}]}}\n")
        assert load_scenario(path).sim.fast_forward == want
    for text in ("fast", "true", "yes"):  # only the modes' names: a boolean is not a mode
        path.write_text(f"sim: {{fast_forward: {text}}}\nworkload: {{flows: [{{src: 0, dst: 1, bytes: 1000}}]}}\n")
        with pytest.raises(ScenarioError) as err:
            load_scenario(path)
        assert "sim.fast_forward" in str(err.value) and "allowed: off, exact, trains" in str(err.value), text
        assert "\n" not in str(err.value)
