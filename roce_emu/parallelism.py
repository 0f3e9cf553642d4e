"""Parallelisation search (COMET-style): which tp x pp x dp split, with how many pipeline
micro-batches, trains a built-in model fastest on a fixed set of NPUs, among the splits that
fit in each NPU's memory. ``roce-emu design SCENARIO --parallel``; docs/parallel.md.

The global batch stays the scenario's (``batch_per_rank`` times its data-parallel degree), so
a split with dp replicas gives each one global / dp samples.

Memory of the fullest NPU (stage s of pp, 1F1B):

    16 B x params(s) + activation_bytes(s) x held / m,   held = min(pp - s, m) (GPipe: m)

16 B per parameter: weights and gradients (2 + 2 in fp16, or 4 + 4 in fp32) and Adam's state
(12 or 8), as ZeRO counts them.

Time (first order, every collective a ring):

    stage(s) = sum over its layers of (f + b) / m + 2 x tp_ar(activations / m)
    pipeline = (m + pp - 1) x (max_s stage(s) + 2 x send / m)
    iteration = pipeline + max_s exposed(s)

- A ring all-reduce over k ranks takes 2 (k - 1) steps of a step's latency a, plus
  2 (k - 1) / k x bytes on the wire (with their headers: frame / MTU) at rate R.
- ``send`` is the tensor a stage hands on (the last layer's activations), in one step. Each
  micro-batch sends it forward and its gradient back, and a stage starts its next micro-batch
  once its send is done.
- exposed(s) is how long stage s's gradient all-reduces outlast its last backward. Its layers'
  gradients form buckets in backward order, as workload/training.py forms them
  (``Training.bucket_caps``). Each all-reduce starts when its bucket's last layer is done (or when the
  one before it ends) and runs alone on the links.
- R and a are those of the group's slowest link. On a multi_dim, torus or mesh fabric, that is
  the dimensions its ranks differ in (the link delays between two routers and a frame's
  serialisation at each hop, as the Themis model takes them); elsewhere each NPU's own link,
  through one switch.

Contention and oversubscription are left out: ``--verify`` runs the best splits at packet level.
"""

from dataclasses import dataclass

from .config.schema import Model, Scenario, Training
from .errors import ScenarioError
from .units import ns_to_s, ps_to_s
from .workload import dim_timing, ring_step_s
from .workload.models import model_layers
from .workload.training import rank_host, stage_split

BYTES_PER_PARAM = 16
GIB = 1 << 30


@dataclass(frozen=True)
class Strategy:
    tp: int
    pp: int
    dp: int
    micro_batches: int
    batch_per_rank: int
    memory_bytes: int  # the fullest NPU's
    predicted_s: float

    def fits(self, device_memory_gib: float) -> bool:
        return self.memory_bytes <= device_memory_gib * GIB


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


class _Links:
    """(rate b/s, ring step latency s) of the slowest links a group of ranks uses, and the ring
    and send times on them (see the module's docstring)."""

    def __init__(self, scenario: Scenario, fabric):
        net = scenario.network
        self.wire = net.frame_bytes / net.mtu_bytes  # wire bytes per payload byte
        self.fabric = fabric
        timing = dim_timing(scenario, fabric)
        self.dim_rates, self.dim_steps = timing.rates_bps, timing.step_s
        host_ports = fabric.port_node < fabric.n_hosts
        rate = float(fabric.port_rate_bps[host_ports].min())  # NPU to NPU through one switch: 2 hops
        self.npu = (
            rate,
            ring_step_s(2, ps_to_s(float(fabric.port_prop_ps[host_ports].max())), rate, net.frame_bytes * 8),
        )

    def of(self, ranks) -> tuple[float, float]:
        fabric = self.fabric
        if fabric.dims and self.dim_rates and fabric.host_coords is not None:
            coords = [fabric.host_coords[r] for r in ranks]
            spanned = [d for d in range(len(fabric.dims)) if len({c[d] for c in coords}) > 1]
            if spanned:
                return min(self.dim_rates[d] for d in spanned), max(self.dim_steps[d] for d in spanned)
        return self.npu

    def ring_s(self, nbytes: float, ranks) -> float:
        k = len(ranks)
        if k < 2:
            return 0.0
        rate, step = self.of(ranks)
        return 2 * (k - 1) * step + 2 * (k - 1) / k * nbytes * self.wire * 8 / rate

    def send_s(self, nbytes: float, ranks) -> float:
        rate, step = self.of(ranks)
        return step + nbytes * self.wire * 8 / rate


def _training(scenario: Scenario) -> tuple[Training, Model]:
    """The scenario's training and its built-in model (search() refuses a scenario without)."""
    training = scenario.workload.training
    assert training is not None and isinstance(training.model, Model)
    return training, training.model


def evaluate(scenario: Scenario, links: _Links, tp: int, pp: int, dp: int, m: int, batch: int) -> Strategy:
    """Memory and predicted time of one split (``batch`` samples per data-parallel replica),
    with the rank layout of workload/training.py."""
    training, model = _training(scenario)
    model = model.model_copy(update={"batch_per_rank": batch})
    layers = model_layers(model, tp)
    stages = [[layers[i] for i in run] for run in stage_split(len(layers), pp)]
    gpipe = training.schedule == "gpipe"

    hosts = training.hosts if training.hosts is not None else range(links.fabric.n_hosts)

    def host(t, s, d):
        return hosts[rank_host(t, s, d, tp, pp)]

    memory, stage_s, exposed = 0, [], []
    for s, stage in enumerate(stages):
        tp_group = [host(t, s, 0) for t in range(tp)]
        dp_group = [host(0, s, d) for d in range(dp)]
        held = m if gpipe else min(pp - s, m)
        params = sum(layer.params for layer in stage)
        kept = sum(layer.activation_bytes for layer in stage)
        memory = max(memory, BYTES_PER_PARAM * params + kept * held // m)
        compute = ns_to_s(sum(layer.forward_ns + layer.backward_ns for layer in stage)) / m
        tp_comm = sum(
            links.ring_s(c.bytes / m, tp_group)
            for layer in stage
            for c in (layer.forward_comm, layer.backward_comm)
            if c is not None and c.group == "tp"
        )
        stage_s.append(compute + tp_comm)
        exposed.append(_exposed_s(stage, m, dp_group, training.bucket_caps(), links))
    send = max(
        (
            links.send_s(_handed_bytes(stage[-1]) / m, [host(0, s, 0), host(0, s + 1, 0)])
            for s, stage in enumerate(stages[:-1])
        ),
        default=0.0,
    )
    predicted = (m + pp - 1) * (max(stage_s) + 2 * send) + max(exposed)
    return Strategy(tp, pp, dp, m, batch, int(memory), predicted)


def _exposed_s(stage, m: int, dp_group, caps: tuple[int, int], links) -> float:
    """How long the stage's gradient all-reduces outlast its last micro-batch's backward; ``caps``: the
    first bucket's size and the later ones' (``Training.bucket_caps``)."""
    if len(dp_group) < 2:
        return 0.0
    clock = free = 0.0  # the backward's progress; when the links are free again
    bucket = launched = 0
    for layer in stage[::-1]:
        clock += ns_to_s(layer.backward_ns) / m
        bucket += layer.weight_grad_bytes
        if bucket and bucket >= caps[min(launched, 1)]:
            free = max(free, clock) + links.ring_s(bucket, dp_group)
            bucket = 0
            launched += 1
    if bucket:
        free = max(free, clock) + links.ring_s(bucket, dp_group)
    return max(0.0, free - clock)


def _handed_bytes(layer) -> int:
    """The tensor a stage ending with this layer sends on: what its tensor-parallel all-reduce
    carries (a Transformer's hidden states), else the output it keeps (a ResNet layer's map)."""
    if layer.forward_comm is not None and layer.forward_comm.group == "tp":
        return layer.forward_comm.bytes
    return layer.activation_bytes


def handed_bytes(scenario: Scenario, strategy: Strategy) -> int:
    """pipeline_bytes for a split: the largest tensor one of its stages hands on."""
    if strategy.pp == 1:
        return 0
    model = _training(scenario)[1].model_copy(update={"batch_per_rank": strategy.batch_per_rank})
    layers = model_layers(model, strategy.tp)
    return max(_handed_bytes(layers[run[-1]]) for run in stage_split(len(layers), strategy.pp)[:-1])


def search(scenario: Scenario, fabric, source: str) -> list[Strategy]:
    """Every split of the NPUs that train (workload.training.hosts, else all) into tp x pp x dp
    (tp only for the Transformer, dividing its hidden size; pp at most the layers) with
    power-of-two micro-batch counts that divide the replica's batch (one without pipelining),
    fastest predicted first."""
    training = scenario.workload.training
    if training is None or not isinstance(training.model, Model):
        raise ScenarioError(
            source,
            "workload.training.model",
            "the parallelisation search needs a built-in model (name: resnet50, transformer or dlrm)",
        )
    model = training.model
    n_npus = fabric.n_hosts if training.hosts is None else len(training.hosts)
    tp0, pp0 = training.tp, training.pp
    dp0 = training.dp if training.dp is not None else n_npus // (tp0 * pp0)
    global_batch = model.batch_per_rank * dp0
    n_layers = len(model_layers(model, 1))
    links = _Links(scenario, fabric)
    out: list[Strategy] = []
    for tp in _divisors(n_npus):
        if tp > 1 and (model.name != "transformer" or model.hidden % tp):
            continue
        for pp in _divisors(n_npus // tp):
            dp = n_npus // (tp * pp)
            if pp > n_layers or global_batch % dp:
                continue
            batch = global_batch // dp
            counts = [1] if pp == 1 else [m for m in (1 << i for i in range(13)) if m <= batch and batch % m == 0]
            out.extend(evaluate(scenario, links, tp, pp, dp, m, batch) for m in counts)
    return sorted(out, key=lambda s: (s.predicted_s, s.tp, s.pp, s.micro_batches))


def with_strategy(doc: dict, scenario: Scenario, strategy: Strategy) -> dict:
    """The scenario document training with this split."""
    out = dict(doc)
    workload = dict(out["workload"])
    training = dict(workload["training"])
    training.update(
        tp=strategy.tp,
        pp=strategy.pp,
        dp=strategy.dp,
        micro_batches=strategy.micro_batches,
        pipeline_bytes=handed_bytes(scenario, strategy),
        model={**training["model"], "batch_per_rank": strategy.batch_per_rank},
    )
    workload["training"] = training
    out["workload"] = workload
    return out
