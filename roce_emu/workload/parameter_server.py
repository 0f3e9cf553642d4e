"""Parameter servers (``workload.training.dp_algorithm: parameter_server``): data parallelism
without All-Reduce. The model (its weights, as many bytes as its gradients) is split into
even shards, one per host of ``servers``. Each iteration, every rank (a worker):

- **pulls** each shard from its server before its forward pass;
- **pushes** its gradients, bucket by bucket as the backward pass makes them (DDP's buckets,
  ``bucket_bytes``), each bucket sharded the same way, to the servers.

Synchronous SGD: a server sends its shard of iteration k + 1 once every worker's pushes of
iteration k have reached it (the barrier per iteration, shard by shard). In the DAG this is
the iteration boundary of the package (workload/__init__.py): a pull waits for nothing in its
iteration, so it waits for its server's part of the previous one, which is every push to it.
The server's update of its shard is not modelled (its compute takes no time).

With one server of NIC rate R, W workers and a model of M bytes, the server sends W·M in the
pulls and receives W·M in the pushes, one after the other (the pushes need the pulls'
weights, the next pulls every push): an iteration takes at least 2·W·M / R.
"""

import numpy as np

from ..config.schema import GptModel, MoeModel, ParameterServerUpdates, Training
from ..errors import ScenarioError
from ..units import ns_to_ps
from .collectives import split
from .items import Item
from .passes import KEY, LayerPasses


def check(spec: Training, worker_hosts: list[int], n_hosts: int, source: str) -> list[int]:
    """The servers, checked: hosts of the fabric, each once, none of them a worker, with a
    data-parallel model (tp and pp 1, no experts, no sharded optimizer)."""
    servers = list(spec.servers or ())
    for j, host in enumerate(servers):
        if not 0 <= host < n_hosts:
            raise ScenarioError(
                source,
                f"{KEY}.servers.{j}",
                f"{host} is not allowed: host ids run from 0 to {n_hosts - 1} on this topology",
            )
        if host in worker_hosts:
            raise ScenarioError(
                source, f"{KEY}.servers.{j}", f"{host} is not allowed: a rank runs on it (servers hold the model only)"
            )
    if len(set(servers)) != len(servers):
        raise ScenarioError(source, f"{KEY}.servers", "each server once")
    for j, host in enumerate(spec.parameter_server.replicas or ()):
        at = f"{KEY}.parameter_server.replicas.{j}"
        if not 0 <= host < n_hosts:
            raise ScenarioError(
                source, at, f"{host} is not allowed: host ids run from 0 to {n_hosts - 1} on this topology"
            )
        if host in worker_hosts or host in servers or host in (spec.parameter_server.replicas or ())[:j]:
            raise ScenarioError(
                source, at, f"{host} is not allowed: a replica is a host of its own (no rank, server or other replica)"
            )
    for key in ("tp", "pp"):
        if getattr(spec, key) != 1:
            raise ScenarioError(
                source,
                f"{KEY}.{key}",
                f"{getattr(spec, key)} is not allowed with dp_algorithm parameter_server (data parallel only: 1)",
            )
    model = spec.model
    if isinstance(model, MoeModel) or (isinstance(model, GptModel) and model.optimizer.zero):
        raise ScenarioError(
            source,
            f"{KEY}.dp_algorithm",
            "'parameter_server' is not allowed with a moe model or ZeRO-1 (optimizer.zero): the servers hold the "
            "whole model and its optimizer",
        )
    return servers


def pulls(servers: list[int], workers: list[int], layers: list[LayerPasses], staleness: int | None) -> list[Item]:
    """Each server's shard of the whole model to every worker: one item per server, each flow
    after its worker's previous iteration and, ``staleness`` iterations before that, every push
    to its server."""
    model_bytes = sum(layer.grad_bytes for layer in layers)
    return [
        Item(
            KEY,
            f"pull.s{j}",
            "send",
            [],
            nbytes=share,
            pairs=[(server, worker) for worker in workers],
            keys={"bytes": f"{KEY}.layers"},
            named=False,
            pull=True,
            staleness=staleness,
        )
        for j, (server, share) in enumerate(zip(servers, split(max(model_bytes, len(servers)), len(servers))))
    ]


def aggregation_groups(workers: list[int], k: int, slow: dict[int, float]) -> list[tuple[int, list[int]]]:
    """The workers in W // k groups of consecutive ranks (sizes as even as possible, each at least k;
    one group of all if k > W), each with the worker that sums the group's updates: the one that
    computes fastest by the stragglers' factors ``slow`` (host -> factor), the first of them on a tie.
    k = 1: every worker alone."""
    n = max(1, len(workers) // k)
    groups = [[int(h) for h in g] for g in np.array_split(workers, n)]
    return [(min(g, key=lambda h: (slow.get(h, 1.0), g.index(h))), g) for g in groups]


def pushes(
    servers: list[int],
    groups: list[tuple[int, list[int]]],
    bucket: list[LayerPasses],
    after: list[str],
    updates: ParameterServerUpdates,
) -> tuple[list[Item], list[str]]:
    """A bucket's gradients from every worker, each server its shard, and the names the workers'
    next bucket waits for. Per server one item ``push``: from each group's aggregating worker (every
    worker, without aggregation), after a ``gather`` of the group's other workers' whole bucket to
    it. With replicas, per replica one item ``replica``: the same pushes to the replica (direct),
    or the server forwarding what it received (chain). Scheduled (``mlfabric``), each push and
    replica flow waits for its receiver's port, shortest first."""
    name = bucket[0].name if len(bucket) == 1 else f"{bucket[0].name}-{bucket[-1].name}"
    nbytes = sum(layer.grad_bytes for layer in bucket)
    scheduled = updates.scheduling == "mlfabric"
    items, ends = [], []
    senders = [aggregator for aggregator, _ in groups]
    counts_for = {aggregator: [w for w in group if w != aggregator] for aggregator, group in groups}
    ready = list(after)
    if any(counts_for.values()):
        pairs = [(w, aggregator) for aggregator, others in counts_for.items() for w in others]
        gather = Item(KEY, f"gather.{name}", "send", list(after), nbytes=max(nbytes, 1), pairs=pairs, named=False)
        items.append(gather)
        ready.append(gather.name)
    replicas = updates.replicas or []
    shares = split(max(nbytes, len(servers)), len(servers))
    for j, (server, share) in enumerate(zip(servers, shares)):
        push = Item(
            KEY,
            f"push.{name}.s{j}",
            "send",
            list(ready),
            nbytes=share,
            pairs=[(sender, server) for sender in senders],
            named=False,
            scheduled=scheduled,
            counts_for=counts_for,
            deadline_ps=-1 if updates.deadline_ns is None else ns_to_ps(updates.deadline_ns),
        )
        items.append(push)
        ends.append(push.name)
        if not replicas:
            continue
        if updates.replication == "direct":
            pairs, nb, waits = [(sender, replicas[j]) for sender in senders], share, ready
        else:  # chain: what reached the server, forwarded once all of it has
            pairs, nb, waits = [(server, replicas[j])], share * len(senders), [push.name]
        replica = Item(
            KEY,
            f"replica.{name}.s{j}",
            "send",
            list(waits),
            nbytes=nb,
            pairs=pairs,
            named=False,
            scheduled=scheduled,
            counts_for=counts_for if updates.replication == "direct" else {},
        )
        items.append(replica)
        if updates.replication == "direct":
            ends.append(replica.name)
    return items, ends


def update_delays(world, workload, synchronous: bool) -> dict:
    """summary.json's ``update_delay``: each update's delay as MLFabric defines it, the server
    versions between a worker's pull and its push being applied. An update is one worker's push
    of one iteration, applied once its last shard has reached its server (summed with its group's
    at an aggregating worker, once the sum's has: the sum is one version); the pull is read when
    its first shard starts. Asynchronous, each applied update is a version: the delay counts the
    other updates applied after the pull and before this one. Synchronous, the servers apply an
    iteration's pushes together as one version, after the barrier: every delay is 0.
    An update with a part dropped for missing its deadline is never applied: it counts as
    dropped, not as a version. Returns the updates applied, those dropped, the mean and largest
    delay, and how many updates had each delay."""
    tasks, flows = workload.tasks, workload.flows
    n = len(flows)
    start, finish = world.task["start_ps"][:n], world.task["finish_ps"][:n]
    dropped = dropped_flows(world, n)
    lost: set[tuple[int, int]] = set()  # (sender, iteration) of the updates a dropped flow was part of
    pulls: dict[tuple[int, int], list[int]] = {}  # (worker, iteration) -> its pull flows' starts
    pushes: dict[tuple[int, int], list[int]] = {}  # (sender, iteration) -> its push flows' finishes
    via: dict[tuple[int, int], int] = {}  # (worker, iteration) -> the worker its update is summed at
    for f in range(n):
        name, it = tasks.name(f), int(tasks.iteration[f])
        if name.startswith("pull.s"):
            pulls.setdefault((int(flows.dst[f]), it), []).append(int(start[f]))
        elif name.startswith("push."):
            pushes.setdefault((int(flows.src[f]), it), []).append(int(finish[f]))
            if dropped[f]:
                lost.add((int(flows.src[f]), it))
        elif name.startswith("gather."):
            via[(int(flows.src[f]), it)] = int(flows.dst[f])
    pulled = {key: min(starts) for key, starts in pulls.items() if min(starts) >= 0}
    # one version each; an update with a dropped part is never applied
    applied = {key: max(ends) for key, ends in pushes.items() if min(ends) >= 0 and key not in lost}
    times = np.array(sorted(applied.values()), np.int64)
    updates = []  # (applied, (worker, iteration)) of each update
    n_dropped = 0
    for (worker, it), t in pulled.items():
        sender = (via.get((worker, it), worker), it)
        n_dropped += sender in lost
        if sender in applied:
            updates.append((applied[sender], (worker, it)))
    updates.sort()
    delays = []
    for t, key in updates:
        if synchronous:
            delays.append(0)
            continue
        # the other updates applied after the pull was read and before this one
        delays.append(int(np.searchsorted(times, t, "left") - np.searchsorted(times, pulled[key], "right")))
    counts: dict[str, int] = {}
    for d in sorted(delays):
        counts[str(d)] = counts.get(str(d), 0) + 1
    return {
        "updates": len(delays),
        "dropped": n_dropped,
        "mean": float(np.mean(delays)) if delays else 0.0,
        "max": max(delays, default=0),
        "counts": counts,
    }


def dropped_flows(world, n_flows: int) -> np.ndarray:
    """True for each flow dropped for missing its deadline (core/tasks.py): a flow that waited
    for a dispatch queue with a deadline and was let go without freeing it."""
    mask = np.zeros(n_flows, bool)
    rows = world.qtask
    gone = rows["task"][(rows["deadline_ps"] >= 0) & (rows["frees"] < 0)]
    mask[gone[gone < n_flows]] = True
    return mask


def server_load(world, workload, servers: list[int], replicas: list[int]) -> list[dict]:
    """summary.json's ``server_load``: the bytes each server and replica received and sent (every
    flow to or from it but the dropped updates, payload bytes), and the bytes of the updates to it
    that were dropped."""
    flows = workload.flows
    dropped = dropped_flows(world, len(flows))
    hosts = [(h, "server") for h in servers] + [(h, "replica") for h in replicas]
    return [
        {
            "host": h,
            "role": role,
            "bytes_in": int(flows.size_bytes[(flows.dst == h) & ~dropped].sum()),
            "bytes_out": int(flows.size_bytes[(flows.src == h) & ~dropped].sum()),
            "bytes_dropped": int(flows.size_bytes[(flows.dst == h) & dropped].sum()),
        }
        for h, role in hosts
    ]
