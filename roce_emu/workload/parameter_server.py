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


def pulls(servers: list[int], workers: list[int], layers: list[LayerPasses]) -> list[Item]:
    """Each server's shard of the whole model to every worker: one item per server."""
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
