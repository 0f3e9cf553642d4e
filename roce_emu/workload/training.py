"""A training iteration as items: forward and backward compute per layer and pipeline stage,
the collectives the layers trigger, pipeline sends, and data-parallel gradient all-reduces.

Rank layout (Megatron's): host = t + tp * (s + pp * d) for tensor-parallel index t,
pipeline stage s and data-parallel replica d. Layers are split into pp contiguous stages.

Forward, stage by stage: each layer's compute, then its forward collective (on the critical
path), then the activations go to the next stage. Backward, from the last stage: each
layer's compute, its backward collective (critical path), and the weight gradients'
all-reduces over the data-parallel group, which overlap the rest of the backward pass.
The iteration ends when every rank's compute and collectives are done.

Gradients are all-reduced in buckets, as PyTorch DDP sends them (``bucket_cap_mb``): in
backward order, layers join the open bucket until it holds at least ``bucket_bytes``; the
bucket's all-reduce starts when the backward pass has produced its last layer's gradients.
A stage's last bucket holds what is left. ``bucket_bytes: 0`` all-reduces every layer alone.
"""
import numpy as np

from ..config.schema import Training
from ..errors import ScenarioError
from ..fabric.topology import Fabric
from .items import Item
from .models import model_layers


def training_items(spec: Training, fabric: Fabric, source: str) -> list[Item]:
    key = "workload.training"
    layers = model_layers(spec.model, spec.tp) if spec.model is not None else list(spec.layers)
    tp, pp = spec.tp, spec.pp
    dp = spec.dp if spec.dp is not None else fabric.n_hosts // (tp * pp)
    if dp < 1 or tp * pp * dp > fabric.n_hosts:
        raise ScenarioError(source, f"{key}.dp", f"tp x pp x dp = {tp} x {pp} x {dp or 0} ranks is not allowed: the "
                                                 f"topology has {fabric.n_hosts} hosts")
    if pp > len(layers):
        raise ScenarioError(source, f"{key}.pp", f"{pp} is not allowed: more pipeline stages than the "
                                                 f"{len(layers)} layers")

    def host(t, s, d):
        return t + tp * (s + pp * d)

    def stage_hosts(s):
        return [host(t, s, d) for d in range(dp) for t in range(tp)]

    def groups(s, scope):
        if scope == "tp":
            return [[host(t, s, d) for t in range(tp)] for d in range(dp)]
        return [[host(t, s, d) for d in range(dp)] for t in range(tp)]

    stages = np.array_split(np.arange(len(layers)), pp)
    items: list[Item] = []
    prev: list[str] = []

    def add(item: Item) -> str:
        items.append(item)
        return item.name

    def comm(name, comm_spec, s, after):
        g = groups(s, comm_spec.group)
        if len(g[0]) < 2:  # a group of one rank has nothing to exchange
            return after
        return [add(Item(key, name, "collective", after, groups=g, collective=comm_spec.kind,
                         algorithm=comm_spec.algorithm, nbytes=comm_spec.bytes))]

    for s, stage in enumerate(stages):
        for i in stage:
            layer = layers[i]
            prev = [add(Item(key, f"fwd.{layer.name}", "compute", prev, hosts=stage_hosts(s),
                             duration_ps=int(round(layer.forward_ns * 1000))))]
            if layer.forward_comm is not None:
                prev = comm(f"fwd_comm.{layer.name}", layer.forward_comm, s, prev)
        if s + 1 < pp and spec.pipeline_bytes:
            prev = [add(Item(key, f"pipe_fwd.{s}", "send", prev, nbytes=spec.pipeline_bytes,
                             pairs=[(host(t, s, d), host(t, s + 1, d)) for d in range(dp) for t in range(tp)]))]
    for s in range(pp - 1, -1, -1):
        bucket: list = []  # the layers whose gradients wait in the open bucket

        def all_reduce_bucket(after):
            name = bucket[0].name if len(bucket) == 1 else f"{bucket[0].name}-{bucket[-1].name}"
            add(Item(key, f"grad_ar.{name}", "collective", after, groups=groups(s, "dp"),
                     collective="all_reduce", algorithm=spec.dp_algorithm, scheduler=spec.scheduler,
                     nbytes=sum(layer.weight_grad_bytes for layer in bucket), chunks=spec.chunks))
            bucket.clear()

        for i in stages[s][::-1]:
            layer = layers[i]
            prev = [add(Item(key, f"bwd.{layer.name}", "compute", prev, hosts=stage_hosts(s),
                             duration_ps=int(round(layer.backward_ns * 1000))))]
            computed = prev
            if layer.backward_comm is not None:
                prev = comm(f"bwd_comm.{layer.name}", layer.backward_comm, s, prev)
            if layer.weight_grad_bytes and dp > 1:
                bucket.append(layer)
                if sum(b.weight_grad_bytes for b in bucket) >= spec.bucket_bytes:
                    all_reduce_bucket(computed)
        if bucket:
            all_reduce_bucket(computed)
        if s > 0 and spec.pipeline_bytes:
            prev = [add(Item(key, f"pipe_bwd.{s}", "send", prev, nbytes=spec.pipeline_bytes,
                             pairs=[(host(t, s, d), host(t, s - 1, d)) for d in range(dp) for t in range(tp)]))]
    return items
