"""A training iteration as items: forward and backward compute per layer and pipeline stage,
the collectives the layers trigger, pipeline sends, and data-parallel gradient all-reduces.

Rank layout (Megatron's): rank = t + tp * (s + pp * d) for tensor-parallel index t,
pipeline stage s and data-parallel replica d; rank r runs on host r, or on the r-th host
``hosts`` lists. tp x pp x dp must equal the number of those hosts. Layers are split into pp
contiguous stages.

Forward, stage by stage: each layer's compute, then its forward collective (on the critical
path), then the activations go to the next stage. Backward, from the last stage: each
layer's compute, its backward collective (critical path), and the weight gradients'
all-reduces over the data-parallel group, which overlap the rest of the backward pass.
The iteration ends when every rank's compute and collectives are done.

Gradients are all-reduced in buckets, as PyTorch DDP sends them (``bucket_cap_mb``): in
backward order, layers join the open bucket until it holds at least ``bucket_bytes``; the
bucket's all-reduce starts when the backward pass has produced its last layer's gradients
and, on each rank, once that rank's part of the stage's previous all-reduce is done (DDP's
process group runs them in order on one NCCL stream; ``concurrent_all_reduces`` lifts this).
A stage's last bucket holds what is left. ``bucket_bytes: 0`` all-reduces every layer alone.

Micro-batches (``micro_batches``, m): each rank's batch is cut into m micro-batches, each
with 1/m of the compute, of the activation collectives' bytes and of the pipeline sends. A
stage runs its micro-batches' forwards (F) and backwards (B) one at a time, in the order of
the ``schedule``: ``gpipe`` runs every F, then every B; ``1f1b`` (PipeDream-Flush, Megatron)
runs pp - 1 - s forwards to fill the pipeline, then alternates one F and one B, then drains.
Both take (m + pp - 1) (f + b) / m on uniform stages of f forward and b backward per batch;
1F1B holds at most pp - s micro-batches' activations on stage s, GPipe all m. Gradients
accumulate over the micro-batches and are all-reduced after the stage's last backward.
"""

import numpy as np

from ..config.schema import Training
from ..errors import ScenarioError
from .items import Item
from .models import model_layers


def training_items(spec: Training, hosts: list[int], n_hosts: int, source: str) -> list[Item]:
    """The iteration's items, rank r on ``hosts[r]`` (the checked ``workload.training.hosts``, or
    every host of the fabric's ``n_hosts``)."""
    key = "workload.training"
    layers = model_layers(spec.model, spec.tp) if spec.model is not None else list(spec.layers)
    tp, pp = spec.tp, spec.pp
    dp = spec.dp if spec.dp is not None else len(hosts) // (tp * pp)
    _check_ranks(spec, dp, len(hosts), n_hosts, source)
    if pp > len(layers):
        raise ScenarioError(
            source, f"{key}.pp", f"{pp} is not allowed: more pipeline stages than the {len(layers)} layers"
        )

    def host(t, s, d):
        return hosts[rank_host(t, s, d, tp, pp)]

    def stage_hosts(s):
        return [host(t, s, d) for d in range(dp) for t in range(tp)]

    def groups(s, scope):
        if scope == "tp":
            return [[host(t, s, d) for t in range(tp)] for d in range(dp)]
        return [[host(t, s, d) for d in range(dp)] for t in range(tp)]

    stages = stage_split(len(layers), pp)
    m = spec.micro_batches
    items: list[Item] = []

    def add(item: Item) -> str:
        items.append(item)
        return item.name

    def tag(j):
        return "" if m == 1 else f".mb{j}"

    def layer_keys(i, comm=""):
        """The keys a layer's items come from: its entry in layers, or the built-in model."""
        if spec.model is not None:
            where = f"{key}.model"
            return {"name": where, "algorithm": where, "bytes": where}
        at = f"{key}.layers.{i}"
        return {"name": f"{at}.name", "algorithm": f"{at}.{comm}.algorithm", "bytes": f"{at}.{comm}.bytes"}

    def comm(name, comm_spec, s, after, keys):
        g = groups(s, comm_spec.group)
        if len(g[0]) < 2:  # a group of one rank has nothing to exchange
            return after
        return [
            add(
                Item(
                    key,
                    name,
                    "collective",
                    after,
                    groups=g,
                    collective=comm_spec.kind,
                    algorithm=comm_spec.algorithm,
                    nbytes=max(1, comm_spec.bytes // m),
                    keys={**keys, "hosts": f"{key}.{comm_spec.group}"},
                    named=False,
                )
            )
        ]

    runs = [_stage_ops(spec.schedule, s, pp, m) for s in range(pp)]

    out: dict = {}  # (stage, op) -> the names its successors wait for: its pipeline send or last item
    pipe = max(1, spec.pipeline_bytes // m) if spec.pipeline_bytes else 0

    def waits(s, k):
        """What op k of stage s waits for: the data it takes from the next stage out (activations
        or gradients) and the op before it on the same stage, unless that is implied (a backward
        takes its gradients from the stage after, which ran this micro-batch's forward after this
        stage did)."""
        kind, j = runs[s][k]
        source = _feeder(s, kind)
        came = out[(source, (kind, j))] if 0 <= source < pp else []
        before = runs[s][k - 1] if k else None
        implied = came and before == ("F", j)
        return came + (out[(s, before)] if before is not None and not implied else [])

    def forward(s, k):
        _, j = runs[s][k]
        prev = waits(s, k)
        for i in stages[s]:
            layer = layers[i]
            prev = [
                add(
                    Item(
                        key,
                        f"fwd.{layer.name}{tag(j)}",
                        "compute",
                        prev,
                        hosts=stage_hosts(s),
                        duration_ps=int(round(layer.forward_ns * 1000 / m)),
                        keys=layer_keys(i),
                        named=False,
                    )
                )
            ]
            if layer.forward_comm is not None:
                prev = comm(
                    f"fwd_comm.{layer.name}{tag(j)}", layer.forward_comm, s, prev, layer_keys(i, "forward_comm")
                )
        if s + 1 < pp and pipe:
            prev = [
                add(
                    Item(
                        key,
                        f"pipe_fwd.{s}{tag(j)}",
                        "send",
                        prev,
                        nbytes=pipe,
                        pairs=[(host(t, s, d), host(t, s + 1, d)) for d in range(dp) for t in range(tp)],
                        named=False,
                    )
                )
            ]
        out[(s, ("F", j))] = prev

    def backward(s, k):
        _, j = runs[s][k]
        prev = waits(s, k)
        last = k == len(runs[s]) - 1  # the stage's last backward: its gradients are complete
        bucket: list = []  # the layers whose gradients wait in the open bucket (the last micro-batch's)
        launched: list = []  # the stage's gradient all-reduces so far

        def all_reduce_bucket(after):
            name = bucket[0].name if len(bucket) == 1 else f"{bucket[0].name}-{bucket[-1].name}"
            if launched and not spec.concurrent_all_reduces:  # one stream: after the one before
                after = after + launched[-1:]
            launched.append(
                add(
                    Item(
                        key,
                        f"grad_ar.{name}",
                        "collective",
                        after,
                        groups=groups(s, "dp"),
                        collective="all_reduce",
                        algorithm=spec.dp_algorithm,
                        scheduler=spec.scheduler,
                        nbytes=sum(layer.weight_grad_bytes for layer in bucket),
                        chunks=spec.chunks,
                        keys={"algorithm": f"{key}.dp_algorithm", "hosts": f"{key}.dp", "bytes": f"{key}.chunks"},
                        named=False,
                    )
                )
            )
            bucket.clear()

        for i in stages[s][::-1]:
            layer = layers[i]
            prev = [
                add(
                    Item(
                        key,
                        f"bwd.{layer.name}{tag(j)}",
                        "compute",
                        prev,
                        hosts=stage_hosts(s),
                        duration_ps=int(round(layer.backward_ns * 1000 / m)),
                        keys=layer_keys(i),
                        named=False,
                    )
                )
            ]
            computed = prev
            if layer.backward_comm is not None:
                prev = comm(
                    f"bwd_comm.{layer.name}{tag(j)}", layer.backward_comm, s, prev, layer_keys(i, "backward_comm")
                )
            if last and layer.weight_grad_bytes and dp > 1:
                bucket.append(layer)
                if sum(b.weight_grad_bytes for b in bucket) >= spec.bucket_bytes:
                    all_reduce_bucket(computed)
        if bucket:
            all_reduce_bucket(computed)
        if s > 0 and pipe:
            prev = [
                add(
                    Item(
                        key,
                        f"pipe_bwd.{s}{tag(j)}",
                        "send",
                        prev,
                        nbytes=pipe,
                        pairs=[(host(t, s, d), host(t, s - 1, d)) for d in range(dp) for t in range(tp)],
                        named=False,
                    )
                )
            ]
        out[(s, ("B", j))] = prev

    for s, k in _build_order(runs):
        (forward if runs[s][k][0] == "F" else backward)(s, k)
    return items


def _check_ranks(spec: Training, dp: int, n_ranks_hosts: int, n_hosts: int, source: str) -> None:
    """tp x pp x dp ranks must fill the hosts they run on exactly: every host of the fabric, or
    the ones ``workload.training.hosts`` lists. A rank more is refused, and so is a host left
    over, which would do nothing while the others train (a split that does not divide the
    fabric, say tp 3 on 16 hosts): to leave hosts idle on purpose, list the ones that train.
    The error is at the key the user gave that decides the count (dp, else tp, else pp)."""
    given = [k for k in ("dp", "tp", "pp") if k in spec.model_fields_set]
    key = f"workload.training.{given[0] if given else 'dp'}"
    ranks = spec.tp * spec.pp * dp
    product = f"tp x pp x dp = {spec.tp} x {spec.pp} x {dp} = {ranks} ranks"
    if spec.hosts is not None:
        if ranks != n_ranks_hosts:
            raise ScenarioError(
                source,
                key,
                f"{product} is not allowed: workload.training.hosts lists {n_ranks_hosts} hosts, one per rank",
            )
        return
    if ranks > n_hosts or dp < 1:
        raise ScenarioError(source, key, f"{product} is not allowed: the topology has {n_hosts} hosts")
    if ranks < n_hosts:
        idle = f"host {ranks}" if ranks == n_hosts - 1 else f"hosts {ranks} to {n_hosts - 1}"
        raise ScenarioError(
            source,
            key,
            f"{product} is not allowed: the topology has {n_hosts} hosts, and {idle} would do nothing; "
            f"choose tp, pp and dp whose product is {n_hosts}, or list the hosts that train in "
            f"workload.training.hosts",
        )


def rank_host(t: int, s: int, d: int, tp: int, pp: int) -> int:
    """The host of tensor-parallel index t, pipeline stage s and data-parallel replica d."""
    return t + tp * (s + pp * d)


def _stage_ops(schedule: str, s: int, pp: int, m: int) -> list[tuple[str, int]]:
    """Stage s's micro-batches in the order it runs them: ("F" or "B", micro-batch)."""
    if schedule == "gpipe":
        return [("F", j) for j in range(m)] + [("B", j) for j in range(m)]
    warm = min(pp - 1 - s, m)  # forwards before the first backward: the stages still ahead
    steady = [op for j in range(m - warm) for op in (("F", warm + j), ("B", j))]
    return [("F", j) for j in range(warm)] + steady + [("B", j) for j in range(m - warm, m)]


def _feeder(s: int, kind: str) -> int:
    """The stage whose data a forward (activations) or a backward (gradients) on stage s takes."""
    return s - 1 if kind == "F" else s + 1


def stage_split(n_layers: int, pp: int) -> list[np.ndarray]:
    """The layers of each pipeline stage: pp contiguous runs, the first ones a layer longer."""
    return np.array_split(np.arange(n_layers), pp)


def _build_order(runs: list[list[tuple[str, int]]]) -> list[tuple[int, int]]:
    """(stage, op index) in an order where every op comes after the ops it waits for: repeatedly
    the first stage (forwards, lowest first; backwards, highest first) whose next op is ready.
    With one micro-batch: every forward stage by stage, then every backward from the last stage."""
    pp = len(runs)
    done: set = set()
    nxt = [0] * pp
    order: list = []
    total = sum(map(len, runs))
    while len(order) < total:
        for s in list(range(pp)) + list(range(pp - 1, -1, -1)):
            if nxt[s] == len(runs[s]):
                continue
            kind, j = runs[s][nxt[s]]
            source = _feeder(s, kind)
            if (0 <= source < pp) and (source, (kind, j)) not in done:
                continue
            order.append((s, nxt[s]))
            done.add((s, (kind, j)))
            nxt[s] += 1
            break
        else:  # pragma: no cover - both schedules always leave a stage ready
            raise AssertionError("pipeline schedule waits for itself")
    return order
