"""A training iteration as items: forward and backward compute per layer and pipeline stage,
the collectives the layers trigger, pipeline sends, and data-parallel gradient all-reduces.

Rank layout (Megatron's, ``placement: tp_pp_dp``): rank = t + tp * (s + pp * d) for
tensor-parallel index t, pipeline stage s and data-parallel replica d (``tp_dp_pp``: rank =
t + tp * (d + dp * s)); rank r runs on host r, or on the r-th host
``hosts`` lists. tp x pp x dp must equal the number of those hosts. Layers are split into pp
contiguous stages.

Forward, stage by stage: each layer's compute, then its forward collective (on the critical
path), then the activations go to the next stage. Backward, from the last stage: each
layer's compute, its backward collective (critical path), and the weight gradients'
all-reduces over the data-parallel group, which overlap the rest of the backward pass.
The iteration ends when every rank's compute and collectives are done.

Gradients are all-reduced in buckets, as PyTorch DDP sends them (``bucket_cap_mb``): in
backward order, layers join the open bucket until it holds at least ``bucket_bytes`` (the
first bucket ``first_bucket_bytes``, DDP's 1 MiB, so the last layers' reduction starts early); the
bucket's all-reduce starts when the backward pass has produced its last layer's gradients
and, on each rank, once that rank's part of the stage's previous all-reduce is done (DDP's
process group runs them in order on one NCCL stream; ``concurrent_all_reduces`` lifts this).
A stage's last bucket holds what is left. ``bucket_bytes: 0`` all-reduces every layer alone.

Micro-batches (``micro_batches``, m): each rank's batch is cut into m micro-batches, each
with 1/m of the compute, of the activation collectives' bytes and of the pipeline sends. A
stage runs its micro-batches' forwards and backwards one at a time, in the order of the
``schedule`` (1f1b or gpipe, pipeline.py). Gradients accumulate over the micro-batches and
are all-reduced after the stage's last backward.

How the items are built, one concept per piece:

- ``LayerPasses``: what one layer runs in its forward and in its backward pass, as steps
  (``Compute``, or an ``Exchange``: a collective over one of the rank's groups), and the
  gradient bytes its backward pass produces. ``layer_passes`` makes them from the explicit
  layers or the built-in model (models.py): one compute and at most one collective per pass.
- ``Placement``: the ranks on their hosts, and the groups (tp, dp) a stage's collectives run on.
- ``PipelineSchedule`` (pipeline.py): each stage's micro-batch ops in order.
- ``GradientBuckets``: DDP's buckets of one stage, and the order their reductions run in.
- ``TrainingBuilder``: walks the schedule and, per op, adds the stage's layers' passes, the
  gradient reductions and the pipeline send, each in its own method.

The iteration's boundaries are the package's (workload/__init__.py): an item that waits for
nothing (stage 0's first forward) waits for its rank's previous iteration, and an iteration
ends once each rank's items are done.

To add a model kind, give its layers' ``LayerPasses`` (passes.py) as ``layer_passes`` does for
the built-in models, gpt.py for ``kind: gpt`` and moe.py for ``kind: moe``: a pass may hold
any sequence of compute steps and collectives, each over its own group (a tensor-parallel
pair, an expert all-to-all around the expert's compute); a new group scope goes in
``Placement.groups``. How a bucket's gradients are reduced is ``reduce_gradients``.
"""

from dataclasses import dataclass, field
from typing import Callable

from ..config.schema import GptModel, Layer, LayerComm, MoeModel, Training
from ..errors import ScenarioError
from .items import Item
from .models import model_layers
from . import moe
from . import parameter_server as ps
from .gpt import Gpt, check, micro_batches
from .passes import KEY, Compute, Exchange, ExpertCompute, LayerPasses, Step
from .pipeline import Op, PipelineSchedule, stage_split


def layer_passes(spec: Training) -> list[LayerPasses]:
    """Every layer's passes, in forward order: the explicit ``layers``, or the built-in model's
    (models.py; a gpt model's are gpt.Gpt.layers). A built-in model's errors name
    ``workload.training.model``, an explicit layer's its own keys."""
    if spec.model is not None:
        assert not isinstance(spec.model, GptModel)
        return [_passes(layer, None) for layer in model_layers(spec.model, spec.tp)]
    return [_passes(layer, f"{KEY}.layers.{i}") for i, layer in enumerate(spec.layers)]


def _passes(layer: Layer, at: str | None) -> LayerPasses:
    """A Layer's passes: its compute, then its collective if it has one. ``at``: the layer's key
    in ``workload.training.layers``, None for a built-in model's layer."""
    where = f"{KEY}.model"
    name_key = where if at is None else f"{at}.name"

    def exchange(name: str, comm: LayerComm | None, attribute: str) -> tuple[Step, ...]:
        if comm is None:
            return ()
        keys = (
            {"name": where, "algorithm": where, "bytes": where}
            if at is None
            else {"name": name_key, "algorithm": f"{at}.{attribute}.algorithm", "bytes": f"{at}.{attribute}.bytes"}
        )
        keys["hosts"] = f"{KEY}.{comm.group}"
        return (Exchange(f"{name}.{layer.name}", comm.kind, comm.group, comm.bytes, comm.algorithm, keys),)

    return LayerPasses(
        layer.name,
        (Compute(f"fwd.{layer.name}", layer.forward_ns, {"name": name_key}),)
        + exchange("fwd_comm", layer.forward_comm, "forward_comm"),
        (Compute(f"bwd.{layer.name}", layer.backward_ns, {"name": name_key}),)
        + exchange("bwd_comm", layer.backward_comm, "backward_comm"),
        layer.weight_grad_bytes,
    )


@dataclass(frozen=True)
class Placement:
    """The ranks on their hosts: rank ``rank_host(t, s, d)`` on ``hosts[rank]``, and which ranks
    run a collective together."""

    hosts: list[int]
    tp: int
    pp: int
    dp: int
    order: str = "tp_pp_dp"  #: workload.training.placement
    ep: int = 1  #: a moe model's expert-parallel size

    def host(self, t: int, s: int, d: int) -> int:
        return self.hosts[rank_host(t, s, d, self.tp, self.pp, self.dp, self.order)]

    def stage_hosts(self, s: int) -> list[int]:
        """Every rank of stage s: they all run the stage's compute."""
        return [self.host(t, s, d) for d in range(self.dp) for t in range(self.tp)]

    def groups(self, s: int, scope: str) -> list[list[int]]:
        """Stage s's disjoint groups of one scope: ``tp``, the ranks that differ only in their
        tensor-parallel index; ``dp``, only in their data-parallel replica; ``ep``, ep consecutive
        ranks of the stage (tensor-parallel index fastest, then replica: Megatron-Core's expert
        order with expert tensor parallelism 1); ``edp``, the ranks at the same place in each ep
        group (they hold the same experts)."""
        if scope == "tp":
            return [[self.host(t, s, d) for t in range(self.tp)] for d in range(self.dp)]
        if scope == "ep":
            ranks = self.stage_hosts(s)
            return [ranks[k : k + self.ep] for k in range(0, len(ranks), self.ep)]
        if scope == "edp":
            ranks = self.stage_hosts(s)
            return [ranks[j :: self.ep] for j in range(self.ep)]
        return [[self.host(t, s, d) for d in range(self.dp)] for t in range(self.tp)]

    def pipe_pairs(self, s: int, to: int) -> list[tuple[int, int]]:
        """Each rank of stage s and the rank of stage ``to`` with its t and d: who sends to whom."""
        return [(self.host(t, s, d), self.host(t, to, d)) for d in range(self.dp) for t in range(self.tp)]


def training_hosts(spec: Training, n_hosts: int) -> list[int]:
    """The hosts the ranks run on, rank r on the r-th: ``hosts``, or every host but the
    parameter servers."""
    if spec.hosts is not None:
        return list(spec.hosts)
    servers = set(spec.servers or ())
    return [h for h in range(n_hosts) if h not in servers]


def placement(spec: Training, hosts: list[int], n_hosts: int, source: str) -> Placement:
    """The spec's ranks on ``hosts`` (dp, if not given, from their number); refused unless they
    fill those hosts exactly (_check_ranks)."""
    dp = spec.dp if spec.dp is not None else len(hosts) // (spec.tp * spec.pp)
    _check_ranks(spec, dp, len(hosts), n_hosts - len(spec.servers or ()), source)
    ep = spec.model.ep if isinstance(spec.model, MoeModel) else 1
    return Placement(hosts, spec.tp, spec.pp, dp, spec.placement, ep)


@dataclass
class GradientBuckets:
    """DDP's gradient buckets on one stage: layers join the open bucket in backward order until
    it holds ``caps[0]`` bytes (the first bucket) or ``caps[1]`` (the later ones); then
    ``reduce(bucket, after)`` adds its reduction and returns the
    names it ends with. Unless ``concurrent``, each reduction also waits for the one before, as
    the collectives of one process group run in order on one stream. ``grads``: the gradient bytes
    of a layer these buckets hold (the dense ones, or a MoE layer's experts')."""

    caps: tuple[int, int]
    concurrent: bool
    reduce: Callable[[list[LayerPasses], list[str]], list[str]]
    grads: Callable[[LayerPasses], int]
    bucket: list[LayerPasses] = field(default_factory=list)  #: the open bucket
    stream: list[str] = field(default_factory=list)  #: the previous reduction's end
    launched: int = 0  #: buckets reduced so far

    def add(self, layer: LayerPasses, ready: list[str]) -> None:
        """The layer's gradients, ready after ``ready``, join the open bucket; a full bucket is
        reduced at once. A layer without weight gradients adds nothing."""
        if not self.grads(layer):
            return
        self.bucket.append(layer)
        if sum(self.grads(b) for b in self.bucket) >= self.caps[min(self.launched, 1)]:
            self._launch(ready)

    def close(self, ready: list[str]) -> None:
        """The stage's backward is done (after ``ready``): reduce what is left in the open bucket."""
        if self.bucket:
            self._launch(ready)

    def _launch(self, ready: list[str]) -> None:
        self.stream = self.reduce(self.bucket, ready if self.concurrent else ready + self.stream)
        self.bucket = []
        self.launched += 1


class TrainingBuilder:
    """One iteration's items. It walks the pipeline schedule in build order; each op adds its
    items through ``add``, which keeps them in the order they are made (the order the DAG
    numbers their tasks in). ``ends`` holds, per (stage, op), the names the ops after it wait
    for: its pipeline send, or its last item."""

    def __init__(
        self,
        spec: Training,
        hosts: list[int],
        n_hosts: int,
        source: str,
        node_size: int | None = None,
        seed: int = 1,
        slow: dict[int, float] | None = None,
    ):
        self.spec = spec
        #: dp_algorithm parameter_server: the hosts of the model's shards (parameter_server.py)
        self.servers = ps.check(spec, hosts, n_hosts, source) if spec.dp_algorithm == "parameter_server" else []
        self.ranks = placement(spec, hosts, n_hosts, source)
        #: parameter servers: the workers' aggregation groups, each with its aggregating worker
        self.groups = (
            ps.aggregation_groups(hosts, spec.parameter_server.aggregation, slow or {}) if self.servers else []
        )
        if node_size is not None and not spec.tp_across_nodes:
            _check_tp_in_nodes(self.ranks, node_size, source)
        model = spec.model
        self.zero = isinstance(model, GptModel) and model.optimizer.zero == 1
        if isinstance(model, GptModel):
            check(spec, model, self.ranks.dp, source)
            m = micro_batches(model, self.ranks.dp, source)
            gpt: Gpt
            if isinstance(model, MoeModel):
                moe.check(spec, model, self.ranks.dp, source)
                gpt = moe.Moe(model, spec.tp, self.ranks.dp, m, seed)
            else:
                gpt = Gpt(model, spec.tp, self.ranks.dp, m)
            self.layers, self.m, self.pipeline_bytes = gpt.layers(), gpt.m, gpt.pipeline_bytes()
        else:
            self.layers, self.m = layer_passes(spec), spec.micro_batches
            self.pipeline_bytes = max(1, spec.pipeline_bytes // self.m) if spec.pipeline_bytes else 0
        if spec.pp > len(self.layers):
            too_many = f"{spec.pp} is not allowed: more pipeline stages than the {len(self.layers)} layers"
            raise ScenarioError(source, f"{KEY}.pp", too_many)
        self.stages = stage_split(len(self.layers), spec.pp)
        self.schedule = PipelineSchedule.of(spec.schedule, spec.pp, self.m)
        self.items: list[Item] = []
        self.ends: dict[tuple[int, Op], list[str]] = {}
        self.entry: list[str] = []  #: what the first op of the iteration waits for: the pulls, if any

    def build(self) -> list[Item]:
        """The iteration: the pulls of the model from its servers, if any, then every stage's
        forwards and backwards, each after the ops it waits for."""
        for item in (
            ps.pulls(self.servers, self.ranks.hosts, self.layers, self.spec.staleness_bound) if self.servers else []
        ):
            self.entry += self.add(item)
        for s, k in self.schedule.build_order():
            op = self.schedule.ops[s][k]
            self.ends[(s, op)] = self.forward(s, k) if op[0] == "F" else self.backward(s, k)
        return self.items

    def add(self, item: Item) -> list[str]:
        """Keep the item; the names the steps after it wait for."""
        self.items.append(item)
        return [item.name]

    def tag(self, j: int) -> str:
        """The suffix of micro-batch j's item names (none with one micro-batch)."""
        return "" if self.m == 1 else f".mb{j}"

    def waits(self, s: int, k: int) -> list[str]:
        """What op k of stage s waits for: the data it takes from its feeder stage (activations or
        gradients) and the op before it on the same stage, unless that is implied (a backward
        takes its gradients from the stage after, which ran this micro-batch's forward after this
        stage did)."""
        op = self.schedule.ops[s][k]
        source = self.schedule.feeder(s, op)
        came = self.ends[(source, op)] if source is not None else []
        before = self.schedule.ops[s][k - 1] if k else None
        implied = came and before == ("F", op[1])
        return came + (self.ends[(s, before)] if before is not None and not implied else []) or self.entry

    def forward(self, s: int, k: int) -> list[str]:
        """Op k of stage s, a micro-batch's forward: each layer's forward pass in order, then the
        activations to the next stage."""
        j = self.schedule.ops[s][k][1]
        prev = self.waits(s, k)
        for i in self.stages[s]:
            prev, _ = self.run_pass(s, self.layers[i].forward, j, prev)
        return self.pipeline_send(s, s + 1, j, prev) if s + 1 < self.spec.pp else prev

    def backward(self, s: int, k: int) -> list[str]:
        """Op k of stage s, a micro-batch's backward: each layer's backward pass from the stage's
        last layer, then the gradients to the stage before. In the stage's last backward the
        accumulated weight gradients are complete: each layer's go to the buckets as soon as its
        pass has computed them."""
        j = self.schedule.ops[s][k][1]
        prev = self.waits(s, k)
        reductions = []
        if self.schedule.is_last(s, k):
            for scope, grads in GRADIENTS.items():
                if len(self.ranks.groups(s, scope)[0]) > 1 or (self.servers and scope == "dp"):
                    reduce = self.gradient_reduction(s, scope)
                    caps = self.spec.bucket_caps()
                    reductions.append(GradientBuckets(caps, self.spec.concurrent_all_reduces, reduce, grads))
        for i in self.stages[s][::-1]:
            layer = self.layers[i]
            prev, computed = self.run_pass(s, layer.backward, j, prev)
            for buckets in reductions:
                buckets.add(layer, computed)
        for buckets in reductions:
            buckets.close(computed)
        return self.pipeline_send(s, s - 1, j, prev) if s > 0 else prev

    def run_pass(self, s: int, steps: tuple[Step, ...], j: int, after: list[str]) -> tuple[list[str], list[str]]:
        """Micro-batch j's run of one layer's pass on stage s, each step after the one before.
        Returns the names the next step waits for, and those of the pass's last compute step
        (after which the layer's weight gradients are ready)."""
        computed = after
        for step in steps:
            if isinstance(step, Compute):
                after = computed = self.compute(s, step, j, after)
            elif isinstance(step, ExpertCompute):
                after = computed = self.expert_compute(s, step, j, after)
            else:
                after = self.collective(s, step, j, after)
        return after, computed

    def compute(self, s: int, step: Compute, j: int, after: list[str], hosts: list[int] | None = None) -> list[str]:
        """The step's compute on every rank of stage s (or on ``hosts``), for micro-batch j's share of the batch."""
        return self.add(
            Item(
                KEY,
                f"{step.name}{self.tag(j)}",
                "compute",
                after,
                hosts=self.ranks.stage_hosts(s) if hosts is None else hosts,
                duration_ps=int(round(step.duration_ns * 1000 / self.m)),
                keys=step.keys,
                named=False,
            )
        )

    def expert_compute(self, s: int, step: ExpertCompute, j: int, after: list[str]) -> list[str]:
        """The experts' compute of stage s for micro-batch j: one item per place in the ep groups,
        on the ranks at that place (``step.durations_ns`` of it); the next step waits for all."""
        ends = []
        for place, ns in enumerate(step.durations_ns):
            hosts = [group[place] for group in self.ranks.groups(s, "ep")]
            ends += self.compute(s, Compute(f"{step.name}.ep{place}", ns, step.keys), j, after, hosts)
        return ends

    def collective(self, s: int, step: Exchange, j: int, after: list[str]) -> list[str]:
        """The step's collective, micro-batch j's share of its bytes, run by each of stage s's
        groups of its scope. Groups of one rank have nothing to exchange: no item then."""
        groups = self.ranks.groups(s, step.group)
        if len(groups[0]) < 2:
            return after
        return self.add(
            Item(
                KEY,
                f"{step.name}{self.tag(j)}",
                "collective",
                after,
                groups=groups,
                collective=step.kind,
                algorithm=step.algorithm,
                nbytes=max(1, step.nbytes // self.m),
                pair_bytes=None if step.pair_bytes is None else [[v // self.m for v in row] for row in step.pair_bytes],
                keys=step.keys,
                named=False,
            )
        )

    def pipeline_send(self, s: int, to: int, j: int, after: list[str]) -> list[str]:
        """Micro-batch j's activations (to the next stage) or gradients (to the one before) from
        each rank of stage s to its peer on stage ``to``: ``pipeline_bytes``' share, or nothing."""
        if not self.pipeline_bytes:
            return after
        way = "fwd" if to > s else "bwd"
        return self.add(
            Item(
                KEY,
                f"pipe_{way}.{s}{self.tag(j)}",
                "send",
                after,
                nbytes=self.pipeline_bytes,
                pairs=self.ranks.pipe_pairs(s, to),
                named=False,
            )
        )

    def gradient_reduction(self, s: int, scope: str) -> Callable[[list[LayerPasses], list[str]], list[str]]:
        """How stage s reduces a bucket of gradients over its groups of ``scope``: dp, the dense
        gradients (pushed to the parameter servers, if any); edp, a MoE model's experts'."""
        if self.servers and scope == "dp":
            return self.push_updates
        return lambda bucket, after: self.reduce_gradients(s, bucket, after, scope)

    def push_updates(self, bucket: list[LayerPasses], after: list[str]) -> list[str]:
        """One bucket's gradients to the parameter servers (parameter_server.pushes); the names the
        next bucket's push waits for."""
        items, ends = ps.pushes(self.servers, self.groups, bucket, after, self.spec.parameter_server)
        for item in items:
            self.add(item)
        return ends

    def reduce_gradients(self, s: int, bucket: list[LayerPasses], after: list[str], scope: str) -> list[str]:
        """One bucket's gradients, reduced over stage s's data-parallel groups (``scope`` dp), or
        over its expert-data-parallel groups (edp, a MoE model's experts' gradients, named
        ``expert_``...): an all-reduce of the bucket's bytes, or with ZeRO-1 (a gpt model's
        optimizer.zero) a reduce-scatter of them and then an all-gather of the updated parameters
        (as many bytes in fp16), named after the bucket's first and last layer, with the spec's
        dp_algorithm, scheduler, chunks and channels. Returns the names the next bucket's
        reduction waits for."""
        name = bucket[0].name if len(bucket) == 1 else f"{bucket[0].name}-{bucket[-1].name}"
        zero = [("grad_rs", "reduce_scatter"), ("param_ag", "all_gather")]
        steps = zero if self.zero else [("grad_ar", "all_reduce")]
        grads = GRADIENTS[scope]
        tag = "" if scope == "dp" else "expert_"
        for prefix, kind in steps:
            after = self.add(
                Item(
                    KEY,
                    f"{tag}{prefix}.{name}",
                    "collective",
                    after,
                    groups=self.ranks.groups(s, scope),
                    collective=kind,
                    algorithm=self.spec.dp_algorithm,
                    scheduler=self.spec.scheduler,
                    nbytes=sum(grads(layer) for layer in bucket),
                    chunks=self.spec.chunks,
                    channels=self.spec.channels,
                    keys={"algorithm": f"{KEY}.dp_algorithm", "hosts": f"{KEY}.dp", "bytes": f"{KEY}.chunks"},
                    named=False,
                )
            )
        return after


def training_items(
    spec: Training,
    hosts: list[int],
    n_hosts: int,
    source: str,
    node_size: int | None = None,
    seed: int = 1,
    slow: dict[int, float] | None = None,
) -> list[Item]:
    """The iteration's items, rank r on ``hosts[r]`` (the checked ``workload.training.hosts``, or
    every host of the fabric's ``n_hosts``). ``node_size``: the GPUs per server of a
    rail_optimized fabric, whose tensor-parallel groups must stay within a server. ``seed``: the
    scenario's (which experts of a moe model are hot). ``slow``: the stragglers' factors by host
    (a parameter server's updates are summed at the fastest worker of a group)."""
    return TrainingBuilder(spec, hosts, n_hosts, source, node_size, seed, slow).build()


#: the gradient bytes of a layer each scope reduces: dp the dense ones, edp a MoE layer's experts'
GRADIENTS: dict[str, Callable[[LayerPasses], int]] = {
    "dp": lambda layer: layer.grad_bytes,
    "edp": lambda layer: layer.expert_grad_bytes,
}


def _check_tp_in_nodes(ranks: Placement, node_size: int, source: str) -> None:
    """Each tensor-parallel group on one server (hosts ``node * node_size`` onwards), as Megatron
    places them, unless ``tp_across_nodes``."""
    allow = "or set workload.training.tp_across_nodes: true"
    if ranks.tp > node_size:
        raise ScenarioError(
            source,
            f"{KEY}.tp",
            f"{ranks.tp} is not allowed: larger than a server of topology.gpus_per_node = {node_size} GPUs; "
            f"lower it {allow}",
        )
    for s in range(ranks.pp):
        for group in ranks.groups(s, "tp"):
            if len({h // node_size for h in group}) > 1:
                raise ScenarioError(
                    source,
                    f"{KEY}.tp",
                    f"{ranks.tp} is not allowed: the tensor-parallel group on hosts {group} spans servers of "
                    f"topology.gpus_per_node = {node_size} GPUs; choose tp dividing it {allow}",
                )


def _check_ranks(spec: Training, dp: int, n_ranks_hosts: int, n_hosts: int, source: str) -> None:
    """tp x pp x dp ranks must fill the hosts they run on exactly: every host of the fabric, or
    the ones ``workload.training.hosts`` lists. A rank more is refused, and so is a host left
    over, which would do nothing while the others train (a split that does not divide the
    fabric, say tp 3 on 16 hosts): to leave hosts idle on purpose, list the ones that train.
    The error is at the key the user gave that decides the count (dp, else tp, else pp)."""
    given = [k for k in ("dp", "tp", "pp") if k in spec.model_fields_set]
    key = f"{KEY}.{given[0] if given else 'dp'}"
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
    has = f"the topology has {n_hosts} hosts" + (" beside the servers" if spec.servers else "")
    if ranks > n_hosts or dp < 1:
        raise ScenarioError(source, key, f"{product} is not allowed: {has}")
    if ranks < n_hosts:
        if spec.servers:
            raise ScenarioError(source, key, f"{product} is not allowed: {has}, one per rank")
        idle = f"host {ranks}" if ranks == n_hosts - 1 else f"hosts {ranks} to {n_hosts - 1}"
        raise ScenarioError(
            source,
            key,
            f"{product} is not allowed: the topology has {n_hosts} hosts, and {idle} would do nothing; "
            f"choose tp, pp and dp whose product is {n_hosts}, or list the hosts that train in "
            f"workload.training.hosts",
        )


def rank_host(t: int, s: int, d: int, tp: int, pp: int, dp: int = 1, order: str = "tp_pp_dp") -> int:
    """The rank of tensor-parallel index t, pipeline stage s and data-parallel replica d: t
    fastest, then s, then d (Megatron's order, ``tp_pp_dp``), or then d, then s (``tp_dp_pp``).
    Rank r runs on host r unless training lists its hosts."""
    if order == "tp_dp_pp":
        return t + tp * (d + dp * s)
    return t + tp * (s + pp * d)
