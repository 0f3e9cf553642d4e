"""Several jobs on one fabric (the scenario's ``jobs``): the hosts each runs on, its workload
section in fabric host ids, and one task DAG of them all with each task's job.

A job's workload names hosts by its ranks: rank r is the job's r-th host and ``all`` (or a null
``hosts``) its hosts, so it reads as if the job ran alone. Each job is built as the scenario's
workload would be, on its hosts, and the jobs' tasks go into one DAG; the engine never sees
jobs (a task's job is a label the results read). Whatever a job draws at random (patterns,
ECMP hashes) comes from streams of its own, so a job alone and among others takes the same
paths and flows: only the traffic it meets differs.
"""

import zlib
from dataclasses import dataclass, field

import numpy as np

from ..config.schema import Cc, Job, Scenario
from ..config.schema import Workload as WorkloadSpec
from ..errors import ScenarioError
from ..fabric.reduction import Reductions
from ..fabric.topology import Fabric
from ..units import ns_to_ps
from . import NOTHING_TO_DO, Workload, WorkloadPart, add_workload, checked_hosts, finish_workload, workload_items
from .. import streams
from .dag import DagBuilder
from .items import Item


@dataclass
class JobPart:
    """One job as built: where it runs and, in final task ids, its iteration ends."""

    name: str
    hosts: list[int]
    start_ps: int
    priority: int
    cc: str  #: the algorithm of its congestion control
    iteration_ends: list = field(default_factory=list)  # per iteration: {host: join task id}
    collectives: list = field(default_factory=list)  # indices into Workload.collectives


def job_seed(scenario: Scenario, name: str) -> np.random.SeedSequence:
    """The seed of a job's own random streams: the scenario's seed and the job's name, so that a
    job draws the same alone as among other jobs, wherever it comes in the list."""
    return streams.sequence(scenario.seed, streams.JOB, zlib.crc32(name.encode()))


def job_cc(scenario: Scenario, i: int) -> Cc:
    """Job i's congestion control: its own, else the run's (network.cc)."""
    return scenario.jobs[i].cc or scenario.network.cc


def used_algorithms(scenario: Scenario) -> list[str]:
    """The congestion-control algorithms the run's flows use (each job's, or network.cc's), each once."""
    if not scenario.jobs:
        return [scenario.network.cc.algorithm]
    return list(dict.fromkeys(job_cc(scenario, i).algorithm for i in range(len(scenario.jobs))))


def cc_rows(scenario: Scenario) -> tuple[list[Cc], list[int]]:
    """The run's congestion controls, one per row of World.ccp: network.cc first, then each
    job's own unlike any before it; and each job's row (none without jobs)."""
    rows = [scenario.network.cc]
    of_job = []
    for i in range(len(scenario.jobs)):
        cc = job_cc(scenario, i)
        if cc not in rows:
            rows.append(cc)
        of_job.append(rows.index(cc))
    return rows, of_job


def place_jobs(scenario: Scenario, fabric: Fabric, source: str) -> list[list[int]]:
    """Each job's fabric hosts, rank r on the r-th. Jobs that list their hosts take them first
    (two jobs share a host only if both say share: true); then each job with a placement takes
    ``ranks`` of the hosts no job uses yet, in list order."""
    jobs = scenario.jobs
    owner: dict[int, int] = {}
    placed: list[list[int]] = [[] for _ in jobs]
    for i, job in enumerate(jobs):
        if job.hosts is None:
            continue
        hosts = checked_hosts(source, f"jobs.{i}", job.hosts, fabric.n_hosts, 1)
        for j, h in enumerate(hosts):
            other = owner.setdefault(h, i)
            if other != i and not (job.share and jobs[other].share):
                raise ScenarioError(
                    source,
                    f"jobs.{i}.hosts.{j}",
                    f"host {h} is not allowed: job '{jobs[other].name}' (jobs.{other}) runs on it; "
                    f"give both jobs share: true to let them share hosts",
                )
        placed[i] = hosts
    for i, job in enumerate(jobs):
        if job.placement is None:
            continue
        free = [h for h in range(fabric.n_hosts) if h not in owner]
        if job.size > len(free):
            raise ScenarioError(
                source,
                f"jobs.{i}.ranks",
                f"{job.size} is not allowed: {len(free)} of the {fabric.n_hosts} hosts are free of the jobs before it",
            )
        placed[i] = place(job, free, fabric, np.random.default_rng(job_seed(scenario, job.name)))
        owner.update({h: i for h in placed[i]})
    return placed


def place(job: Job, free: list[int], fabric: Fabric, rng: np.random.Generator) -> list[int]:
    """``job.size`` of the ``free`` hosts (sorted, free not empty) by the job's placement, in
    host order: packed, the lowest-numbered; spread, one per leaf (the switch a host hangs off)
    in turn, the lowest-numbered of each first; random, drawn from ``rng``."""
    n = job.size
    if job.placement == "packed":
        return free[:n]
    if job.placement == "random":
        return sorted(int(h) for h in rng.choice(free, n, replace=False))
    leaf = {h: int(fabric.port_node[fabric.port_peer[fabric.node_ports[h][0]]]) for h in free}
    turn: dict[int, int] = {}
    order = []  # (the host's place within its leaf, leaf, host)
    for h in free:
        order.append((turn.get(leaf[h], 0), leaf[h], h))
        turn[leaf[h]] = turn.get(leaf[h], 0) + 1
    return sorted(h for _, _, h in sorted(order)[:n])


def job_workload(spec: WorkloadSpec, hosts: list[int], source: str, key: str) -> WorkloadSpec:
    """A job's workload section with its ranks replaced by the fabric hosts they run on, and
    ``all`` (a null ``hosts``) by the job's hosts; a rank beyond the job's is refused."""
    n = len(hosts)

    def host(rank: int, at: str) -> int:
        if not 0 <= rank < n:
            raise ScenarioError(
                source, f"{key}.{at}", f"rank {rank} is not allowed: the job runs on {n} hosts (ranks 0 to {n - 1})"
            )
        return hosts[rank]

    def many(ranks, at: str) -> list[int]:
        if ranks is None or ranks == "all":
            return list(hosts)
        return [host(r, f"{at}.{j}") for j, r in enumerate(ranks)]

    update: dict = {
        "flows": [
            f.model_copy(update={"src": host(f.src, f"flows.{i}.src"), "dst": host(f.dst, f"flows.{i}.dst")})
            for i, f in enumerate(spec.flows)
        ],
        "patterns": [
            p.model_copy(
                update={
                    "hosts": many(p.hosts, f"patterns.{i}.hosts"),
                    "dst": None if p.dst is None else host(p.dst, f"patterns.{i}.dst"),
                }
            )
            for i, p in enumerate(spec.patterns)
        ],
        "collectives": [
            c.model_copy(update={"hosts": many(c.hosts, f"collectives.{i}.hosts")})
            for i, c in enumerate(spec.collectives)
        ],
        "compute": [
            c.model_copy(update={"hosts": many(c.hosts, f"compute.{i}.hosts")}) for i, c in enumerate(spec.compute)
        ],
    }
    if spec.training is not None:
        training = spec.training
        servers = None if training.servers is None else many(training.servers, "training.servers")
        # the training's ranks: those it lists, or the job's hosts but its parameter servers
        ranks = many(training.hosts, "training.hosts") if training.hosts is not None else list(hosts)
        if training.hosts is None and servers is not None:
            ranks = [h for h in ranks if h not in servers]
        changed: dict[str, object] = {"hosts": ranks, "servers": servers}
        updates = training.parameter_server
        if updates.replicas is not None:
            replicas = many(updates.replicas, "training.parameter_server.replicas")
            changed["parameter_server"] = updates.model_copy(update={"replicas": replicas})
        update["training"] = training.model_copy(update=changed)
    if spec.inference is not None:
        inference = spec.inference
        if inference.hosts is None and inference.workers > n:
            raise ScenarioError(
                source, f"{key}.inference.workers", f"{inference.workers} is not allowed: the job runs on {n} hosts"
            )
        workers = (
            many(inference.hosts, "inference.hosts") if inference.hosts is not None else hosts[: inference.workers]
        )
        update["inference"] = inference.model_copy(update={"hosts": workers})
    if spec.chakra is not None:
        update["chakra"] = spec.chakra.model_copy(update={"ranks": many(spec.chakra.ranks, "chakra.ranks")})
    return spec.model_copy(update=update)


def job_scenario(scenario: Scenario, i: int, hosts: list[int], source: str) -> Scenario:
    """The scenario job i would be alone on its hosts: its workload in fabric host ids, its data
    priority and congestion control on the same switches (their ECN marking as the run's),
    the seed of its own streams."""
    job = scenario.jobs[i]
    workload = job_workload(job.workload, hosts, source, f"jobs.{i}.workload")
    net = scenario.network
    nic = net.nic
    if job.priority is not None:
        nic = nic.model_copy(update={"data_priority": job.priority})
    kmin, kmax, pmax = net.switch.ecn.resolved(net.cc.algorithm)
    ecn = net.switch.ecn.model_copy(update={"kmin_bytes": kmin, "kmax_bytes": kmax, "pmax": pmax})
    switch = net.switch.model_copy(update={"ecn": ecn})
    network = net.model_copy(update={"nic": nic, "cc": job_cc(scenario, i), "switch": switch})
    seed = int(job_seed(scenario, job.name).generate_state(1, np.uint64)[0] >> 1)
    return scenario.model_copy(update={"workload": workload, "network": network, "jobs": [], "seed": seed})


def _in_job(i: int, err: ScenarioError) -> ScenarioError:
    """A job's workload error at the job's key (jobs.i.workload...)."""
    key = f"jobs.{i}.{err.key}" if err.key.startswith("workload") else err.key
    return ScenarioError(err.source, key, err.message)


@dataclass
class JobInput:
    """One job ready to build: the scenario it would be alone (job_scenario), its hosts, and its
    iteration's items (None for a Chakra trace, which is read when built)."""

    scenario: Scenario
    hosts: list[int]
    items: list[Item] | None


def job_inputs(scenario: Scenario, fabric: Fabric, source: str) -> list[JobInput]:
    """Each job on the hosts place_jobs gives it, its items checked."""
    out = []
    for i, hosts in enumerate(place_jobs(scenario, fabric, source)):
        sc = job_scenario(scenario, i, hosts, source)
        try:
            items = None if sc.workload.chakra is not None else workload_items(sc, fabric, source)
        except ScenarioError as err:
            raise _in_job(i, err) from None
        out.append(JobInput(sc, hosts, items))
    return out


def build_jobs(scenario: Scenario, fabric: Fabric, source: str) -> Workload:
    """Every job's workload in one task DAG, each task labelled with its job; nothing of a job
    starts before its start_ns."""
    jobs = job_inputs(scenario, fabric, source)
    b = DagBuilder()
    reductions = Reductions(fabric, scenario.network.switch)
    parts: list[WorkloadPart] = []
    bounds = [0]
    for i, one in enumerate(jobs):
        try:
            parts.append(add_workload(b, one.scenario, fabric, source, reductions, one.items))
        except ScenarioError as err:
            raise _in_job(i, err) from None
        if len(b) == bounds[-1]:
            raise ScenarioError(source, f"jobs.{i}.workload", NOTHING_TO_DO)
        bounds.append(len(b))
    workload, new_id = finish_workload(b, source, reductions, parts)
    job = np.empty(len(workload.tasks), np.int32)
    for i in range(len(jobs)):
        job[new_id[bounds[i] : bounds[i + 1]]] = i
    start = np.array([ns_to_ps(j.start_ns) for j in scenario.jobs], np.int64)
    # every time within a job counts from its start: its roots wait for it, its flows' start_ns are after it
    workload.tasks.earliest_ps[:] += start[job]
    workload.flows.start_ps[:] += start[job[: len(workload.flows)]]
    first = 0
    for i, built in enumerate(jobs):
        n = len(parts[i].collectives)
        workload.jobs.append(
            JobPart(
                scenario.jobs[i].name,
                built.hosts,
                int(start[i]),
                built.scenario.network.nic.data_priority,
                built.scenario.network.cc.algorithm,
                parts[i].iteration_ends,
                list(range(first, first + n)),
            )
        )
        first += n
    workload.job = job
    return workload
