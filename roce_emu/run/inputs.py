"""Every check of a scenario's input that needs no engine: what ``roce-emu validate`` runs, and
what ``prepare`` runs before it builds the world. It loads no Numba, so it answers quickly
on a fresh machine. What it refuses names the file, the key and what is allowed
(ScenarioError)."""

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..config import load_scenario
from ..config.schema import Scenario
from ..core.cc.registry import BY_NAME
from ..errors import ScenarioError
from ..fabric.faults import LinkPlan, compile_faults
from ..fabric.records import node_records, port_records
from ..fabric.reduction import place_units
from ..fabric.routing import build_routes
from ..fabric.topology import Fabric, build_fabric, fabric_size
from ..results.output import parquet_missing
from ..workload import Workload, build_workload
from ..workload.collectives import HIERARCHICAL, Collective
from ..workload.size import WorkloadSize, workload_size
from .sizing import check_fabric_memory, check_memory


@dataclass
class Inputs:
    """A scenario whose every input check passed, with what the checks built on the way."""

    scenario: Scenario
    source: str
    fabric: Fabric
    workload: Workload
    plan: LinkPlan  #: the faults as link actions, and the routes of every epoch
    port: np.ndarray  #: fabric.records.port_records
    node: np.ndarray  #: fabric.records.node_records


def check_inputs(scenario: Scenario, source: str = "<scenario>") -> Inputs:
    """Run every check in the order the inputs are built; raises ScenarioError at the first failure."""
    if scenario.output.format == "parquet" and parquet_missing():
        raise ScenarioError(source, "output.format", parquet_missing())
    check_fabric_memory(scenario, *fabric_size(scenario.topology), source)
    fabric = build_fabric(scenario.topology)
    most_epochs = 1 + 2 * sum(f.kind == "link_down" for f in scenario.faults)
    size = workload_size(scenario, fabric, source)
    if size is not None:  # before the DAG's arrays are built
        check_memory(scenario, fabric, size, source, most_epochs)
    workload = build_workload(scenario, fabric, source)
    fabric = place_units(fabric, workload)
    check_memory(scenario, fabric, WorkloadSize.of(workload), source, most_epochs, built=True)
    plan = compile_faults(scenario, fabric, build_routes(fabric), source)
    port = port_records(scenario, fabric)
    node = node_records(scenario, fabric, port, source)
    return Inputs(scenario, source, fabric, workload, plan, port, node)


#: ring collectives of more ranks than this miss 1 % with packet trains (docs/fast_forward.md, "Long rings")
TRAINS_RING_RANKS = 16
#: ... unless receivers acknowledge every this many packets or fewer often (then the trains agree)
TRAINS_ACK_EVERY = 4


def why_no_trains(scenario: Scenario) -> str:
    """Why packet trains (sim.fast_forward: on) do not apply to this scenario, or "" if they do:
    an algorithm clocked by a window (the registry's ``windowed``: HPCC, DCTCP), whose ACKs one
    packet apart ACK trains would stall, or faults (every fault is a link action), whose losses
    and detours trains do not model. world.train_limit turns trains off then, and
    accuracy_warnings says so."""
    algorithm = scenario.network.cc.algorithm
    if BY_NAME[algorithm].windowed:
        return f"{algorithm} is clocked by a window (network.cc.algorithm)"
    if scenario.faults:
        return "the scenario has faults, whose losses and detours trains do not model"
    return ""


def accuracy_warnings(scenario: Scenario, fabric: Fabric, workload: Workload) -> list[str]:
    """What the run should say about the accuracy of the approximation it uses (one line each)."""
    if scenario.sim.fast_forward != "on":
        return []
    why = why_no_trains(scenario)
    if why:
        return [
            f"sim.fast_forward: on sends no packet trains here: {why}. The run is the exact engine and "
            f"takes as long as off (docs/fast_forward.md, The model)."
        ]
    if scenario.network.nic.ack_every_packets >= TRAINS_ACK_EVERY:
        return []
    longest = max((_ring_ranks(fabric, c) for c in workload.collectives), default=0)
    if longest <= TRAINS_RING_RANKS:
        return []
    return [
        f"sim.fast_forward: on with a ring of {longest} ranks: packet trains miss rings of more than "
        f"{TRAINS_RING_RANKS} ranks by more than 1 % when receivers acknowledge more often than every "
        f"{TRAINS_ACK_EVERY} packets (up to 4 % either way at 32 ranks; at 128 with an ACK per packet a ring "
        f"3.5-4.3 % early and ResNet-50's iteration 5.6 % early on average over seeds; docs/fast_forward.md, "
        f"Long rings). Check against off on a smaller case, or acknowledge every {TRAINS_ACK_EVERY} packets "
        f"(network.nic.ack_every_packets)."
    ]


def _ring_ranks(fabric: Fabric, c: Collective) -> int:
    """The ranks of the longest ring a collective runs its steps around: all of them for a ring
    (not all-to-all's pairwise exchange), the largest dimension for a hierarchical one."""
    if c.algorithm == "ring" and c.kind != "all_to_all":
        return len(c.ranks)
    if c.algorithm in HIERARCHICAL:
        return max(fabric.dims, default=0)
    return 0


def load_inputs(path: Path | str, overrides: Sequence[str] = ()) -> Inputs:
    """Load a scenario file (with --set overrides) and check it."""
    return check_inputs(load_scenario(path, list(overrides)), str(path))
