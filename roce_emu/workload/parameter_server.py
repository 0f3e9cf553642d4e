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

from ..config.schema import GptModel, MoeModel, Training
from ..errors import ScenarioError
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


def pushes(servers: list[int], workers: list[int], bucket: list[LayerPasses], after: list[str]) -> list[Item]:
    """A bucket's gradients from every worker, each server its shard: one item per server."""
    name = bucket[0].name if len(bucket) == 1 else f"{bucket[0].name}-{bucket[-1].name}"
    nbytes = sum(layer.grad_bytes for layer in bucket)
    return [
        Item(
            KEY,
            f"push.{name}.s{j}",
            "send",
            list(after),
            nbytes=share,
            pairs=[(worker, server) for worker in workers],
            named=False,
        )
        for j, (server, share) in enumerate(zip(servers, split(max(nbytes, len(servers)), len(servers))))
    ]


def update_delays(world, workload, synchronous: bool) -> dict:
    """summary.json's ``update_delay``: each update's delay as MLFabric defines it, the server
    versions between a worker's pull and its push being applied. An update is one worker's push
    of one iteration, applied once its last shard has reached its server; the pull is read when
    its first shard starts. Asynchronous, each applied update is a version: the delay counts the
    other updates applied after the pull and before this one. Synchronous, the servers apply an
    iteration's pushes together as one version, after the barrier: every delay is 0.
    Returns the updates counted, the mean and largest delay, and how many updates had each delay."""
    tasks, flows = workload.tasks, workload.flows
    n = len(flows)
    start, finish = world.task["start_ps"][:n], world.task["finish_ps"][:n]
    pulls: dict[tuple[int, int], list[int]] = {}  # (worker, iteration) -> its pull flows' starts
    pushes: dict[tuple[int, int], list[int]] = {}  # (worker, iteration) -> its push flows' finishes
    for f in range(n):
        name, it = tasks.name(f), int(tasks.iteration[f])
        if name.startswith("pull.s"):
            pulls.setdefault((int(flows.dst[f]), it), []).append(int(start[f]))
        elif name.startswith("push."):
            pushes.setdefault((int(flows.src[f]), it), []).append(int(finish[f]))
    pulled = {key: min(starts) for key, starts in pulls.items() if min(starts) >= 0}
    updates = sorted((max(ends), key) for key, ends in pushes.items() if min(ends) >= 0 and key in pulled)
    times = np.array([t for t, _ in updates], np.int64)
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
        "mean": float(np.mean(delays)) if delays else 0.0,
        "max": max(delays, default=0),
        "counts": counts,
    }
