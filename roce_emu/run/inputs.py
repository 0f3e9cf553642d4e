"""Every check of a scenario's input that needs no engine: what ``roce-emu validate`` runs, and
what ``prepare`` runs before it builds the world. It loads no Numba, so it answers quickly
on a fresh machine. What it refuses names the file, the key and what is allowed
(ScenarioError)."""

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import networkx as nx
import numpy as np

from ..config import load_scenario
from ..config.schema import Scenario, parquet_missing
from ..core.cc.registry import BY_NAME
from ..errors import ScenarioError
from ..fabric.faults import LinkPlan, compile_faults
from ..fabric.records import node_records, port_records
from ..fabric.reduction import place_units
from ..fabric.routing import build_routes
from ..fabric.topology import Fabric, build_fabric, fabric_size
from ..workload import Workload, build_workload, workload_items
from ..workload.collectives import HIERARCHICAL, Collective
from ..workload.jobs import used_algorithms
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
    items = None if scenario.workload.chakra is not None else workload_items(scenario, fabric, source)
    size = workload_size(scenario, fabric, source, items)
    if size is not None:  # before the DAG's arrays are built
        check_memory(scenario, fabric, size, source, most_epochs)
    workload = build_workload(scenario, fabric, source, items)
    fabric = place_units(fabric, workload)
    check_memory(scenario, fabric, WorkloadSize.of(workload), source, most_epochs, built=True)
    plan = compile_faults(scenario, fabric, build_routes(fabric), source)
    port = port_records(scenario, fabric)
    node = node_records(scenario, fabric, port, source)
    return Inputs(scenario, source, fabric, workload, plan, port, node)


#: With a queue pair per flow (network.nic.queue_pair: flow), ring collectives of more ranks than
#: this miss 1 % with packet trains (docs/fast_forward.md, "Long rings") ...
TRAINS_RING_RANKS = 16
#: ... unless receivers acknowledge every this many packets or less often (then the trains agree).
TRAINS_ACK_EVERY = 4
#: On ordered connections (queue_pair channel or connection), a ring collective in 2 to this many
#: chunks ...
TRAINS_RING_CHUNKS = 3
#: ... whose flows are shorter than this share of the fabric's one-way bandwidth-delay product
#: misses 1 %. benchmarks/trains_rings.py on a leaf-spine at 200 Gb/s (4 link delays one way):
#: with 1 us links (100 packets one way), flows of 29-50 packets in 2 chunks -5.5 to +3.8 %, 20 in
#: 3 chunks up to +1.9 % (+1.45 % with an ACK per 4), 64 and more within 0.9 %; with 4 us links
#: (400 packets) 2 chunks of 200 packets and 3 chunks of 29-100 +1.2 to +2.6 %, 300 and 400
#: within 0.2 %; with 250 ns links 2 chunks of 10 packets -0.9 %. One chunk, or 4 to 16, stayed
#: within 1 % (at most 0.9 %).
TRAINS_SHORT_STEP_BDP = 0.6
#: On ordered connections, a pairwise all-to-all (algorithm ring) whose flows carry at least this
#: many packets misses 1 % (benchmarks/trains_rings.py --kind all_to_all: 16-64 ranks, with an ACK
#: per packet or per 4, flows of 200 and 1,000 packets up to +6.4 %, 50 up to -1.3 %, 29 up to
#: +1.02 %, 8 exact). A direct all-to-all sends no trains.
TRAINS_PAIRWISE_PACKETS = 24


#: why no fast-forward applies to a workload with streaming in-switch reduction (core/stream.py)
STREAMING = "the switches reduce packet by packet (network.switch.reduction: streaming)"


def trains_engine(scenario: Scenario) -> bool:
    """Whether the run's engine sends packet trains where they apply: fast_forward: trains, or
    memo with memo_engine: trains (the flows the memo leaves to the engine)."""
    sim = scenario.sim
    return sim.fast_forward == "trains" or (sim.fast_forward == "memo" and sim.memo_engine == "trains")


def why_no_trains(scenario: Scenario, workload: Workload | None = None) -> str:
    """Why packet trains (sim.fast_forward: trains) do not apply to this scenario, or "" if they do:
    an algorithm some flow uses clocked by a window (the registry's ``windowed``: HPCC, DCTCP), whose ACKs one
    packet apart ACK trains would stall, faults (every fault is a link action), whose losses
    and detours trains do not model, IRN, whose BDP cap is a window too and whose recovery
    trains do not model, jitter, which holds each packet of a train for its own time, or a
    streaming in-switch reduction, whose packets go one by one as their gates open.
    world.train_limit turns trains off then, and accuracy_warnings says so."""
    if streams(workload):
        return STREAMING
    for algorithm in used_algorithms(scenario):
        if BY_NAME[algorithm].windowed:
            key = "network.cc.algorithm" if algorithm == scenario.network.cc.algorithm else "a job's cc.algorithm"
            return f"{algorithm} is clocked by a window ({key})"
    if scenario.faults:
        return "the scenario has faults, whose losses and detours trains do not model"
    if scenario.network.transport == "irn":
        return "network.transport irn caps the packets in flight, a window, and recovers losses trains do not model"
    if scenario.network.jitter.enabled:
        return "network.jitter holds every packet for a time of its own, which trains do not model"
    return ""


@dataclass(frozen=True)
class MemoSettings:
    """sim.fast_forward: memo (core/memo.py): the share of replays checked, its seed, and whether
    the scenario lets components be made at all (not with faults or connection queue pairs)."""

    sample_per_mille: int = 10
    seed: int = 1
    enabled: bool = True


def streams(workload: Workload | None) -> bool:
    """Whether the workload has a streaming in-switch reduction (its flows gated packet by
    packet, core/stream.py), which no fast-forward models: the run is the exact engine."""
    return workload is not None and workload.gates is not None


def why_no_memo(scenario: Scenario, workload: Workload | None = None) -> str:
    """Why the memo (sim.fast_forward: memo) makes no component in this scenario, or "" if it
    may: faults (a link action would act on flows that are not in the engine), sampled
    traces (replayed flows have no samples), IRN (its bitmaps are not in a component's outcome),
    jitter (every packet draws from the generator, which makes a trial run volatile), or a streaming
    in-switch reduction (its flows wait for each other packet by packet)."""
    if streams(workload):
        return STREAMING
    if scenario.faults:
        return "the scenario has faults, which act on flows the memo replays"
    if set(scenario.output.traces) & {"rate", "queue"}:
        return "output.traces samples rates or queues, which replayed flows do not have"
    if scenario.network.transport == "irn":
        return "network.transport is irn, whose loss recovery the memo does not replay"
    if scenario.network.jitter.enabled:
        return "network.jitter draws a random hold for every packet, so no component's run repeats"
    return ""


def memo_settings(scenario: Scenario, workload: Workload | None = None) -> MemoSettings | None:
    """The memo's settings for a scenario with sim.fast_forward: memo, else None."""
    if scenario.sim.fast_forward != "memo":
        return None
    return MemoSettings(scenario.sim.memo_sample_per_mille, scenario.seed, not why_no_memo(scenario, workload))


def accuracy_warnings(scenario: Scenario, fabric: Fabric, workload: Workload) -> list[str]:
    """What the run should say about the accuracy of the approximation it uses (one line each).
    With packet trains, it warns wherever they have been measured more than 1 % off the exact
    engine (docs/fast_forward.md, "Accuracy"; benchmarks/fast_forward_accuracy.py on the shipped
    scenarios, benchmarks/trains_rings.py on ring sweeps): see trains_misses."""
    found = []
    if scenario.sim.fast_forward == "memo":
        why = why_no_memo(scenario, workload)
        if why:
            engine = "the exact engine" if scenario.sim.memo_engine == "exact" else "the engine with packet trains"
            found.append(f"sim.fast_forward: memo replays nothing here: {why}. The run is {engine}.")
    if scenario.sim.fast_forward == "exact" and streams(workload):
        return [f"sim.fast_forward: exact jumps over nothing here: {STREAMING}. The run is the exact engine."]
    if not trains_engine(scenario):
        return found
    alone = scenario.sim.fast_forward == "trains"
    setting = "sim.fast_forward: trains" if alone else "sim.memo_engine: trains"
    why = why_no_trains(scenario, workload)
    if why:
        then = "The run is the exact engine and takes as long as off" if alone else "The memo's engine is the exact one"
        return found + [f"{setting} sends no packet trains here: {why}. {then} (docs/fast_forward.md, The model)."]
    reasons = trains_misses(scenario, fabric, workload)
    if not reasons:
        return found
    return found + [
        f"{setting} with {' and '.join(reasons)}: packet trains have been measured more than 1 % "
        f'off the exact engine in such runs (docs/fast_forward.md, "Accuracy"). Check against off, or use exact.'
    ]


def trains_misses(scenario: Scenario, fabric: Fabric, workload: Workload) -> list[str]:
    """What in a scenario run with packet trains has been measured to take them more than 1 % off
    the exact engine, one phrase each (none: they stayed within 1 % on everything like it).

    On ordered connections (network.nic.queue_pair channel, the default, or connection):

    - training that puts traffic of independent groups on shared ports: tensor, pipeline or expert
      parallelism (training_spine_congestion, TP 4 x DP 4: -4.9 and -1.9 %; a 13B-class GPT on 128
      GPUs of a rail fabric under DCQCN: -1.2 %, -8.8 % with 2:1 uplinks), several jobs (two_jobs:
      -2.6 and +3.9 %, each job alone within 0.2 %), or a parameter server (mlfabric: up to 25 %).
      Data parallelism alone stays within 1 % (the shipped ResNet-50 +0.15 %, DLRM up to +0.89 %,
      ResNet-50 on 128 NPUs +0.45 %; spine_congestion as DP 16 +0.07 %), also beside background
      traffic;
    - a ring collective (or a hierarchical one's rings) in 2 to TRAINS_RING_CHUNKS chunks whose
      flows are shorter than TRAINS_SHORT_STEP_BDP of the fabric's one-way bandwidth-delay product.
      Rings of any length in one chunk stay within 1 %;
    - a pairwise all-to-all of flows of TRAINS_PAIRWISE_PACKETS packets or more.

    With a queue pair per flow (queue_pair: flow): every training workload, ring collectives of
    more than TRAINS_RING_RANKS ranks with an ACK more often than every TRAINS_ACK_EVERY packets
    (docs/fast_forward.md, "Long rings"), and ring collectives in more than one chunk (16 and 32
    ranks in 2 chunks of 29-200 packets: -5.8 to +9.9 %, with an ACK per packet or per 4)."""
    nic = scenario.network.nic
    parts = [scenario.workload, *(job.workload for job in scenario.jobs)]
    trainings = [w.training for w in parts if w.training is not None]
    if nic.queue_pair == "flow":
        reasons = ["a training workload"] if trainings else []
        longest = max((_ring_ranks(fabric, c) for c in workload.collectives), default=0)
        if longest > TRAINS_RING_RANKS and nic.ack_every_packets < TRAINS_ACK_EVERY:
            reasons.append(
                f"a ring of {longest} ranks and an ACK more often than every {TRAINS_ACK_EVERY} packets on a "
                f"queue pair per flow (network.nic.queue_pair: flow)"
            )
        if any(c.chunks > 1 and _ring_ranks(fabric, c) for c in workload.collectives):
            reasons.append("a ring collective in chunks on a queue pair per flow (network.nic.queue_pair: flow)")
        return reasons
    reasons = []
    shared = _shared_training(scenario, trainings)
    if shared:
        reasons.append(shared)
    chunked = [c for c in workload.collectives if 1 < c.chunks <= TRAINS_RING_CHUNKS and _ring_ranks(fabric, c)]
    if chunked:
        bdp = _one_way_packets(scenario, fabric)
        shortest = min(chunked, key=lambda c: _flow_packets(scenario, workload, c))
        packets = _flow_packets(scenario, workload, shortest)
        if packets < TRAINS_SHORT_STEP_BDP * bdp:
            reasons.append(
                f"a ring collective in {shortest.chunks} chunks of {packets}-packet flows (shorter than "
                f"{TRAINS_SHORT_STEP_BDP:g} of the {bdp}-packet one-way bandwidth-delay product)"
            )
    pairwise = [_flow_packets(scenario, workload, c) for c in workload.collectives if _pairwise(c)]
    if pairwise and max(pairwise) >= TRAINS_PAIRWISE_PACKETS:
        reasons.append(f"a pairwise all-to-all of {max(pairwise)}-packet flows (at least {TRAINS_PAIRWISE_PACKETS})")
    return reasons


def _shared_training(scenario: Scenario, trainings: list) -> str:
    """What makes traffic of independent groups meet at ports in a scenario with training, or "":
    model parallelism, a parameter server, or several jobs. (Background traffic beside data
    parallelism alone was measured within 1 %: the shipped ResNet-50 and straggler scenarios with a
    10 MB permutation, +0.20 % and -0.85 % at most.)"""
    if not trainings:
        return ""
    for t in trainings:
        ep = getattr(t.model, "ep", 1)
        split = [f"{name} {size}" for name, size in (("tp", t.tp), ("pp", t.pp), ("ep", ep)) if size > 1]
        if split:
            return f"training with tensor, pipeline or expert parallelism ({', '.join(split)})"
        if t.dp_algorithm == "parameter_server":
            return "training with a parameter server"
    if len(scenario.jobs) > 1:
        return f"training in {len(scenario.jobs)} jobs on one fabric"
    return ""


def _flow_packets(scenario: Scenario, workload: Workload, c: Collective) -> int:
    """The packets of a collective's typical (median) flow."""
    sizes = workload.flows.size_bytes[c.flows]
    return -(-int(np.median(sizes)) // scenario.network.mtu_bytes) if len(sizes) else 0


def _one_way_packets(scenario: Scenario, fabric: Fabric) -> int:
    """The fabric's one-way bandwidth-delay product in packets: how many MTU-sized packets host 0's
    link sends in the largest propagation delay from host 0 to another host (on the symmetric
    fabrics roce-emu builds, the largest between any two hosts)."""
    delays = nx.single_source_dijkstra_path_length(fabric.graph, 0, weight="prop_ps")
    farthest = max(delays.get(h, 0) for h in range(fabric.n_hosts))
    rate_bps = min((d["rate_bps"] for _, _, d in fabric.graph.edges(0, data=True)), default=0)
    return int(farthest * rate_bps // (8 * scenario.network.mtu_bytes * 10**12))


def run_warnings(scenario: Scenario, fabric: Fabric, workload: Workload) -> list[str]:
    """Every ``warning:`` line a run of this scenario prints and records in summary.json's
    ``warnings``: deprecated names its file used, the approximation's accuracy, then hosts left idle."""
    return (
        list(scenario.deprecated_names)
        + accuracy_warnings(scenario, fabric, workload)
        + idle_host_warnings(scenario, fabric, workload)
    )


def idle_host_warnings(scenario: Scenario, fabric: Fabric, workload: Workload) -> list[str]:
    """One line naming the hosts that do nothing in the run (no flow from or to them, no task on
    them), when some part of the workload took its hosts by default, so that idle hosts were
    likely not meant: a Chakra trace of fewer ranks than hosts (ranks on hosts 0, 1, ...), or a
    poisson pattern too short to reach every host. Where every part names its hosts (flows,
    ``hosts`` lists, ``workload.training.hosts``, ``workload.chakra.ranks``), the user chose
    them, as incast and single-flow scenarios do, and nothing is said."""
    w = scenario.workload
    by_default = (
        [p.hosts is None for p in w.patterns]
        + [c.hosts == "all" for c in w.collectives]
        + [c.hosts == "all" for c in w.compute]
        + [w.training is not None and w.training.hosts is None, w.chakra is not None and w.chakra.ranks is None]
    )
    if not any(by_default):
        return []
    used = np.zeros(fabric.n_hosts + 1, bool)  # the last slot takes joins (-1) and other endpoints
    for ends in (workload.flows.src, workload.flows.dst, workload.tasks.host):
        used[np.where((ends >= 0) & (ends < fabric.n_hosts), ends, fabric.n_hosts)] = True
    idle = np.flatnonzero(~used[: fabric.n_hosts]).tolist()
    if not idle:
        return []
    return [
        f"{_host_list(idle)} ({len(idle)} of {fabric.n_hosts}) do nothing in this run: no flow or task uses "
        f"{'it' if len(idle) == 1 else 'them'}. To leave hosts out on purpose, name the hosts each part of the "
        f"workload uses (hosts, workload.training.hosts, workload.chakra.ranks)."
    ]


def _host_list(hosts: list[int]) -> str:
    """``host 3`` or ``hosts 0, 4 to 7, 9``: runs of consecutive ids as ranges."""
    runs: list[list[int]] = []
    for h in hosts:
        if runs and h == runs[-1][-1] + 1:
            runs[-1].append(h)
        else:
            runs.append([h])
    parts = [str(r[0]) if len(r) == 1 else f"{r[0]}, {r[1]}" if len(r) == 2 else f"{r[0]} to {r[-1]}" for r in runs]
    return f"host{'s' if len(hosts) > 1 else ''} {', '.join(parts)}"


def _pairwise(c: Collective) -> bool:
    """Whether a collective is all-to-all's pairwise exchange (algorithm ring)."""
    return c.kind == "all_to_all" and c.algorithm == "ring"


def _ring_ranks(fabric: Fabric, c: Collective) -> int:
    """The ranks of the longest ring a collective runs its steps around: all of them for a ring
    (not all-to-all's pairwise exchange), the largest dimension for a hierarchical one."""
    if c.algorithm == "ring" and not _pairwise(c):
        return len(c.ranks)
    if c.algorithm in HIERARCHICAL:
        return max(fabric.dims, default=0)
    return 0


def load_inputs(path: Path | str, overrides: Sequence[str] = ()) -> Inputs:
    """Load a scenario file (with --set overrides) and check it."""
    return check_inputs(load_scenario(path, list(overrides)), str(path))
