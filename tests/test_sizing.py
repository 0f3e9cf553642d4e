"""Refusing what would not fit in memory (run/sizing.py, workload/size.py): the workload's flows,
tasks and edges counted before it is built, the estimate against measured allocations, the
memory that is left under the process's limits, and the refusal itself under RLIMIT_AS and
RLIMIT_DATA: one line, exit 2, in seconds, nothing written."""

import gc
import re
import resource
import time
import tracemalloc
from pathlib import Path

import pytest

from conftest import cli
from roce_emu.api import prepare_scenario
from roce_emu.config import load_scenario
from roce_emu.config.schema import Scenario
from roce_emu.fabric.topology import build_fabric
from roce_emu.run import sizing
from roce_emu.workload import build_workload
from roce_emu.workload.size import WorkloadSize, workload_size

ROOT = Path(__file__).resolve().parent.parent
SCEN = ROOT / "scenarios"
FAT8 = {"kind": "fat_tree", "k": 8}
RESNET = str(SCEN / "training_resnet50.yaml")

#: workloads of every collective algorithm, pattern and training schedule, as (file, --set) or a document
SHAPES = {
    **{p.stem: (str(p), []) for p in sorted(SCEN.glob("*.yaml"))},
    "ring_chunks": (RESNET, ["workload.training.chunks=4"]),
    "halving_doubling": (RESNET, ["workload.training.dp_algorithm=halving_doubling"]),
    "direct": (RESNET, ["workload.training.dp_algorithm=direct"]),
    "bidir": (str(SCEN / "allreduce_multi_dim.yaml"), ["workload.collectives.0.algorithm=hierarchical_bidir"]),
    "themis": (str(SCEN / "allreduce_multi_dim.yaml"), ["workload.collectives.0.scheduler=themis_fifo"]),
    "dim_direct": (
        str(SCEN / "allreduce_multi_dim.yaml"),
        ["topology.dims.0.kind=fully_connected", "topology.dim_algorithms=[direct, direct]"],
    ),
    "dim_ring_bidir_themis": (
        str(SCEN / "allreduce_multi_dim.yaml"),
        ["topology.dim_algorithms=[ring_bidir, direct]", "workload.collectives.0.scheduler=themis_scf"],
    ),
    "gpt_sp_zero1": (
        str(SCEN / "training_gpt_rail.yaml"),
        ["workload.training.model.sequence_parallel=true", "workload.training.model.optimizer.zero=1"],
    ),
    "gpt_tp_dp_pp": (str(SCEN / "training_gpt_rail.yaml"), ["workload.training.placement=tp_dp_pp"]),
    "moe_tp_edp_zero1": (
        str(SCEN / "training_moe_rail.yaml"),
        [
            "workload.training.tp=2",
            "workload.training.dp=8",
            "workload.training.model.sequence_parallel=true",
            "workload.training.model.ep=4",
            "workload.training.model.global_batch=16",
            "workload.training.model.capacity_factor=1.25",
            "workload.training.model.optimizer.zero=1",
        ],
    ),
    "moe_pp_micro_batches": (
        str(SCEN / "training_moe_rail.yaml"),
        ["workload.training.pp=2", "workload.training.dp=8", "workload.training.model.ep=8"],
    ),
    "tree_channels": (RESNET, ["workload.training.dp_algorithm=tree", "workload.training.channels=2"]),
    "ring_chunks_channels": (RESNET, ["workload.training.chunks=2", "workload.training.channels=3"]),
    "in_network_channels": {
        "topology": {"kind": "fat_tree", "k": 4},
        "workload": {
            "collectives": [{"kind": "all_reduce", "algorithm": "in_network", "bytes": 1e6, "chunks": 2, "channels": 2}]
        },
    },
    "nvls_tree_channels": {
        "topology": {"kind": "rail_optimized", "nodes": 4, "gpus_per_node": 4},
        "workload": {
            "collectives": [{"kind": "all_reduce", "algorithm": "nvls_tree", "bytes": 1e6, "chunks": 3, "channels": 2}]
        },
    },
    "nvls_node": {
        "topology": {"kind": "rail_optimized", "nodes": 2, "gpus_per_node": 8},
        "workload": {
            "collectives": [
                {"kind": "all_reduce", "algorithm": "nvls", "bytes": 1e6, "chunks": 2, "hosts": [0, 1, 2, 3]},
                {"kind": "reduce_scatter", "algorithm": "nvls", "bytes": 1e6, "chunks": 2, "hosts": [8, 9, 10]},
            ]
        },
    },
    "a2a_pairwise": {
        "topology": {"kind": "fat_tree", "k": 4},
        "workload": {
            "collectives": [{"kind": "all_to_all", "algorithm": "ring", "bytes": 1e6, "chunks": 2}],
            "iterations": 2,
        },
    },
    "in_network_reduce_scatter": {
        "topology": {"kind": "fat_tree", "k": 4},
        "network": {"switch": {"reduction_slots": 2}},
        "workload": {"collectives": [{"kind": "reduce_scatter", "algorithm": "in_network", "bytes": 1e6, "chunks": 3}]},
    },
    "gather_then_compute": {
        "topology": {"kind": "fat_tree", "k": 4},
        "workload": {
            "collectives": [
                {"kind": "all_gather", "algorithm": "direct", "bytes": 1e6, "chunks": 2},
                {"kind": "reduce_scatter", "bytes": 1e6, "after": ["all_gather0"]},
            ],
            "compute": [{"name": "c", "duration_ns": 5, "hosts": [0, 1, 2], "after": ["all_gather0"]}],
        },
    },
    "pipeline_1f1b": {
        "topology": {"kind": "fat_tree", "k": 4},
        "workload": {
            "training": {
                "model": {"name": "transformer", "layers": 4, "hidden": 1024, "sequence": 512, "batch_per_rank": 2},
                "tp": 2,
                "pp": 2,
                "micro_batches": 4,
                "pipeline_bytes": 1e6,
                "schedule": "1f1b",
            },
            "iterations": 2,
        },
    },
    "patterns": {
        "topology": {"kind": "fat_tree", "k": 4},
        "workload": {
            "patterns": [
                {"kind": "incast", "hosts": [1, 2, 3], "dst": 0, "bytes": 10},
                {"kind": "all_to_all", "bytes": 10},
                {"kind": "permutation", "bytes": 10},
            ]
        },
    },
}


def load(shape) -> Scenario:
    return load_scenario(*shape) if isinstance(shape, tuple) else Scenario.model_validate(shape)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_counts_made_before_building_match_the_built_workload(name):
    """Flows exactly, tasks and DAG edges at least as many as the builder makes and not much more."""
    sc = load(SHAPES[name])
    fabric = build_fabric(sc.topology)
    counted = workload_size(sc, fabric, name)
    built = WorkloadSize.of(build_workload(sc, fabric, name))
    assert counted.flows == built.flows
    assert built.tasks <= counted.tasks <= 1.6 * built.tasks + 16
    assert built.edges <= counted.edges <= 1.6 * built.edges + 16


def test_poisson_background_is_counted_by_its_expected_arrivals():
    sc = Scenario.model_validate(
        {
            "topology": {"kind": "fat_tree", "k": 4},
            "workload": {"patterns": [{"kind": "poisson", "load": 0.5, "cdf": "websearch", "duration_ns": 2e7}]},
        }
    )
    fabric = build_fabric(sc.topology)
    counted, built = workload_size(sc, fabric, "x").flows, len(build_workload(sc, fabric, "x").flows)
    assert 0.9 * built <= counted <= 1.1 * built


def test_a_chakra_trace_is_counted_only_once_built():
    sc = Scenario.model_validate({"workload": {"chakra": {"prefix": str(ROOT / "trace")}}})
    assert workload_size(sc, build_fabric(sc.topology), "x") is None


#: (name, scenario): workloads large enough that the estimate's per-flow terms dominate
MEASURED = {
    "ring_training": (RESNET, ["topology.k=8", "workload.iterations=1"]),
    "direct_all_to_all": {
        "topology": FAT8,
        "workload": {"collectives": [{"kind": "all_to_all", "algorithm": "direct", "bytes": 1e8, "chunks": 4}]},
    },
    "hierarchical": {
        "topology": {"kind": "torus", "dims": [16, 16]},
        "workload": {"collectives": [{"kind": "all_reduce", "algorithm": "hierarchical", "bytes": 1e8, "chunks": 8}]},
    },
    "all_to_all_pattern": {"topology": FAT8, "workload": {"patterns": [{"kind": "all_to_all", "bytes": 1000}]}},
}


@pytest.mark.parametrize("name", sorted(MEASURED))
def test_estimate_is_within_a_factor_of_the_measured_peak(name):
    """What preparing a run allocates (tracemalloc's peak over every input check and the
    world's build: fabric, workload DAG, routes, records, pools) is at most the estimate,
    made from the counts before the build, and not less than two thirds of it."""
    sc = load(MEASURED[name])
    fabric = build_fabric(sc.topology)
    estimate = sizing.estimate_bytes(fabric, workload_size(sc, fabric, name))
    del fabric
    prepare_scenario(load((str(SCEN / "single_flow.yaml"), [])))  # the engine's Numba code loaded first, untraced
    gc.collect()
    tracemalloc.start()
    try:
        prepare_scenario(sc, name)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak <= estimate <= 1.5 * peak, (peak, estimate)


def test_room_under_a_cgroup_limit_v2_and_v1(tmp_path):
    """The tightest limit of the process's cgroup and those above it, less what each uses."""
    own = tmp_path / "unified" / "a" / "b"
    own.mkdir(parents=True)
    (tmp_path / "unified" / "a" / "memory.max").write_text("1000\n")
    (tmp_path / "unified" / "a" / "memory.current").write_text("300\n")
    (own / "memory.max").write_text("max\n")
    (own / "memory.current").write_text("200\n")
    membership = tmp_path / "cgroup"
    membership.write_text("0::/a/b\n")
    assert sizing.cgroup_room(tmp_path / "unified", membership) == 700
    v1 = tmp_path / "v1" / "memory" / "job"
    v1.mkdir(parents=True)
    (v1 / "memory.limit_in_bytes").write_text("5000\n")
    (v1 / "memory.usage_in_bytes").write_text("1000\n")
    (tmp_path / "v1" / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    membership.write_text("4:memory:/job\n3:cpu:/\n0::/\n")
    assert sizing.cgroup_room(tmp_path / "v1", membership) == 4000
    membership.write_text("0::/\n")
    assert sizing.cgroup_room(tmp_path / "nowhere", membership) is None


def limited(limit, gib: float, *args, cwd=ROOT):
    """``python -m roce_emu ARGS`` with the soft and hard ``limit`` (resource.RLIMIT_*) at ``gib``."""
    size = int(gib * 2**30)
    began = time.perf_counter()
    done = cli(*args, cwd=cwd, timeout=300, preexec_fn=lambda: resource.setrlimit(limit, (size, size)))
    return done, time.perf_counter() - began


K20 = ("--set", "topology.k=20", "--set", "workload.iterations=1")  # 32 million flows: about 11 GB


@pytest.mark.parametrize(
    "limit, name", [(resource.RLIMIT_AS, "RLIMIT_AS"), (resource.RLIMIT_DATA, "RLIMIT_DATA")], ids=["as", "data"]
)
def test_validate_refuses_a_workload_too_big_for_the_limit_before_building_it(limit, name):
    """ResNet-50 over a k=20 fat-tree's 2000 hosts under a 3 GiB limit: refused from the
    workload's counts in seconds (building it would take minutes and 8 GB), one line naming
    the file, topology.k, the estimate and the limit, exit 2."""
    done, took = limited(limit, 3, "validate", "scenarios/training_resnet50.yaml", *K20)
    assert done.returncode == 2, done.stderr
    assert took < 30
    assert done.stdout == "" and "Traceback" not in done.stderr
    (line,) = done.stderr.splitlines()
    assert re.match(r"error: scenarios/training_resnet50.yaml: topology.k: needs about \d+\.\d GB to build", line)
    assert "(2000 hosts; 39,980,000 flows" in line and re.search(r"but [23]\.\d GB is left under the process's", line)
    assert line.endswith(f"({name}): make topology.k or the workload smaller")


def test_run_refuses_it_too_and_writes_nothing(tmp_path):
    done, took = limited(resource.RLIMIT_AS, 3, "run", RESNET, *K20, "--out", tmp_path / "run", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert took < 30 and len(done.stderr.splitlines()) == 1 and "topology.k: needs about" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_workload_that_fits_under_the_limit_is_not_refused():
    """1.9 million flows (about 0.8 GB) under a 2 GiB address-space limit: validated."""
    done, took = limited(
        resource.RLIMIT_AS,
        2,
        "validate",
        "scenarios/training_resnet50.yaml",
        "--set",
        "topology.k=12",
        "--set",
        "workload.iterations=1",
    )
    assert done.returncode == 0, done.stderr
    assert "ok (1861920 flows" in done.stdout
    assert took < 30


def test_the_shipped_scenarios_fit_with_room_to_spare():
    """Each shipped scenario's estimate is far below a modest machine's memory (1 GB)."""
    for path in sorted(SCEN.glob("*.yaml")):
        sc = load_scenario(path)
        fabric = build_fabric(sc.topology)
        assert sizing.estimate_bytes(fabric, workload_size(sc, fabric, str(path))) < 1e9, path


def test_resnet50_on_1024_hosts_is_estimated_near_what_it_takes():
    """ResNet-50 over a k=16 fat-tree (10.5 million flows in five buckets; `validate` peaks at 4.65 GB
    of RSS, measured with /usr/bin/time -v) is estimated within 10 % below and 50 % above that: a 24 GB
    machine runs it."""
    sc = load_scenario(RESNET, ["topology.k=16", "workload.iterations=1"])
    fabric = build_fabric(sc.topology)
    assert 0.9 * 4.65e9 <= sizing.estimate_bytes(fabric, workload_size(sc, fabric, RESNET)) <= 1.5 * 4.65e9
