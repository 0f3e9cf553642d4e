"""A Megatron-style GPT (``model: {kind: gpt}``) as the training builder's layers (docs/model.md §8.5).

Sizes follow Narayanan et al. (SC'21, "Efficient Large-Scale Language Model Training on GPU
Clusters Using Megatron-LM") and Korthikanti et al. (MLSys'23, "Reducing Activation
Recomputation in Large Transformer Models"), in fp16/bf16 (2 bytes a value):

- parameters: counted exactly per layer (``layer_params``); for the gpt architecture with
  ffn_hidden 4h this is 12 h^2 + 13 h per layer, and the embeddings add (V + s) h, Narayanan's
  P = 12 l h^2 (1 + 13/(12h) + (V+s)/(12 l h)), plus the final LayerNorm's 2h.
- tensor parallelism (t): per layer and micro-batch two All-Reduces of 2 b s h bytes forward
  (after attention and after the MLP) and two backward; with sequence parallelism each becomes
  an All-Gather before and a Reduce-Scatter after the block, of the same 2 b s h bytes.
- pipeline parallelism: each rank sends 2 b s h bytes to its peer on the next stage per
  micro-batch forward, and as many back per micro-batch backward.
- data parallelism: each layer's 2 P_layer / t bytes of gradients, in buckets; with ZeRO-1 a
  bucket is reduce-scattered, then its parameters all-gathered.
- compute: 6 P tokens FLOPs per iteration (tokens = global_batch x s), each layer its
  parameters' share, a third forward and two thirds backward, per rank divided by t x dp, at
  device_tflops x mfu.

The embeddings' parameters are counted in the first layer (position or input embedding) and
the last (output embedding, which computes the logits, and the final norm), as Megatron puts
them on the first and last pipeline stage.
"""

from dataclasses import dataclass

from ..config.schema import GptModel, Training
from ..errors import ScenarioError
from .passes import KEY, Compute, Exchange, LayerPasses, Step
from .pipeline import stage_split

MODEL = f"{KEY}.model"
BYTES = 2  #: fp16/bf16: weights, gradients and activations


def padded_vocab(model: GptModel, tp: int) -> int:
    """The vocabulary padded to a multiple of 128 x tp (Megatron's make-vocab-size-divisible-by 128)."""
    unit = 128 * tp
    return -(-model.vocab // unit) * unit


def ffn_hidden(model: GptModel) -> int:
    return model.ffn_hidden if model.ffn_hidden is not None else 4 * model.hidden


def norm_params(model: GptModel) -> int:
    """A norm's parameters: LayerNorm's scale and bias (gpt), RMSNorm's scale (llama)."""
    return 2 * model.hidden if model.architecture == "gpt" else model.hidden


def mlp_params(model: GptModel) -> int:
    """One MLP's parameters, without its norm: GELU's two matrices and biases (gpt), SwiGLU's three matrices
    (llama). A mixture of experts (moe.py) has one per expert."""
    h, f = model.hidden, ffn_hidden(model)
    return 2 * h * f + f + h if model.architecture == "gpt" else 3 * h * f


def layer_params(model: GptModel) -> tuple[int, int]:
    """One transformer layer's parameters: (attention with its norm, MLP with its norm)."""
    h = model.hidden
    kv = (model.kv_heads or model.heads) * (h // model.heads)  # width of K and of V
    attention = 2 * h * h + 2 * h * kv + ((2 * h + 2 * kv) if model.architecture == "gpt" else 0)  # Q, O; K, V; biases
    return attention + norm_params(model), mlp_params(model) + norm_params(model)


def embedding_params(model: GptModel, tp: int) -> tuple[int, int]:
    """The embeddings' parameters on the first layer and on the last: gpt, the position embedding
    first, the tied word embedding and the final LayerNorm last; llama, the input embedding first,
    the output embedding and the final RMSNorm last."""
    h, v = model.hidden, padded_vocab(model, tp)
    if model.architecture == "gpt":
        return model.seq_len * h, v * h + 2 * h
    return v * h, v * h + h


def parameter_count(model: GptModel, tp: int = 1) -> int:
    """P: every parameter of the model (the vocabulary padded for tp)."""
    return model.layers * sum(layer_params(model)) + sum(embedding_params(model, tp))


def stage_params(model: GptModel, tp: int, pp: int) -> list[int]:
    """The parameters of each pipeline stage (whole, not divided by tp)."""
    first, last = embedding_params(model, tp)
    per_layer = sum(layer_params(model))
    out = []
    for s, layers in enumerate(stage_split(model.layers, pp)):
        out.append(len(layers) * per_layer + (first if s == 0 else 0) + (last if s == pp - 1 else 0))
    return out


def global_batch(model: GptModel, dp: int) -> int:
    return model.global_batch if model.global_batch is not None else model.micro_batch * dp


def micro_batches(model: GptModel, dp: int, source: str) -> int:
    """global_batch / (micro_batch x dp): the micro-batches each replica runs per iteration."""
    batch = global_batch(model, dp)
    if batch % (model.micro_batch * dp):
        raise ScenarioError(
            source,
            f"{MODEL}.global_batch",
            f"{batch} is not allowed: it must be a multiple of micro_batch x dp = {model.micro_batch} x {dp}",
        )
    return batch // (model.micro_batch * dp)


def implied_keys(model: GptModel, dp: int, source: str) -> dict[str, int]:
    """The workload.training keys the model sets: micro_batches, and pipeline_bytes (per iteration,
    each way: m micro-batches of 2 b s h)."""
    m = micro_batches(model, dp, source)
    return {"micro_batches": m, "pipeline_bytes": m * activation_bytes(model)}


def activation_bytes(model: GptModel) -> int:
    """2 b s h: a micro-batch's activations at a layer's boundary, the bytes of each tensor-parallel
    collective and of each pipeline send."""
    return BYTES * model.micro_batch * model.seq_len * model.hidden


def check(spec: Training, model: GptModel, dp: int, source: str) -> None:
    """What the split needs of the model: heads (and kv_heads) and ffn_hidden divisible by tp, h by
    the heads; keys the gpt model sets itself not given; the memory per GPU, if device_memory_gb."""
    tp = spec.tp
    if model.hidden % model.heads:
        raise ScenarioError(
            source, f"{MODEL}.heads", f"{model.heads} is not allowed: hidden ({model.hidden}) must be a multiple"
        )
    for key, value in (("heads", model.heads), ("kv_heads", model.kv_heads), ("ffn_hidden", ffn_hidden(model))):
        if value is not None and value % tp:
            raise ScenarioError(
                source, f"{MODEL}.{key}", f"{value} is not allowed: it must be divisible by workload.training.tp ({tp})"
            )
    if model.kv_heads is not None and model.heads % model.kv_heads:
        raise ScenarioError(
            source, f"{MODEL}.kv_heads", f"{model.kv_heads} is not allowed: it must divide heads ({model.heads})"
        )
    for key, value in implied_keys(model, dp, source).items():
        given = getattr(spec, key)
        if key in spec.model_fields_set and given != value:
            raise ScenarioError(
                source,
                f"{KEY}.{key}",
                f"{given} is not allowed: a gpt model sets it to {value} (global_batch / (micro_batch x dp) "
                f"micro-batches, each sending 2 b s h bytes between stages each way); leave it out",
            )
    if model.device_memory_gb is not None:
        _check_memory(spec, model, dp, source)


def memory_bytes(spec: Training, model: GptModel, dp: int, m: int) -> tuple[float, float]:
    """(weights, gradients and optimizer state; activations) in bytes on a GPU of the first stage
    (the largest, with the most micro-batches in flight). Mixed-precision Adam keeps 16 bytes a
    parameter: fp16 weights and gradients (2 + 2) and fp32 master weights, momentum and variance
    (12), the 12 sharded over dp with ZeRO-1. Activations without recomputation (Korthikanti et
    al., eq. 2 and §4.2.2): s b h (10 + 24/t + 5 a s / (h t)) per layer, s b h (34 + 5 a s / h) / t
    with sequence parallelism, for min(pp, m) micro-batches in flight under 1F1B (m under gpipe)."""
    tp, pp = spec.tp, spec.pp
    params = max(stage_params(model, tp, pp)) / tp
    optimizer = 12 / dp if model.optimizer.zero else 12
    states = params * (4 + optimizer)
    s, b, h, a = model.seq_len, model.micro_batch, model.hidden, model.heads
    attention = 5 * a * s / h
    per_layer = s * b * h * ((34 + attention) / tp if model.sequence_parallel else 10 + (24 + attention) / tp)
    in_flight = min(pp, m) if spec.schedule == "1f1b" else m
    layers = len(stage_split(model.layers, pp)[0])
    return states, per_layer * layers * in_flight


def _gb(n_bytes: float) -> str:
    """Bytes as GB for a message: one decimal from 1 GB, three significant digits below (a small
    model's 0.0305 GB must not read as 0.0)."""
    gb = n_bytes / 1e9
    return f"{gb:,.1f} GB" if gb >= 1 else f"{gb:.3g} GB"


def _check_memory(spec: Training, model: GptModel, dp: int, source: str) -> None:
    assert model.device_memory_gb is not None
    states, activations = memory_bytes(spec, model, dp, micro_batches(model, dp, source))
    if (states + activations) / 1e9 > model.device_memory_gb:
        raise ScenarioError(
            source,
            f"{MODEL}.device_memory_gb",
            f"{model.device_memory_gb:g} is too small: a GPU of the first stage needs {_gb(states + activations)} "
            f"(weights, gradients and Adam state {_gb(states)}, activations {_gb(activations)}); "
            f"raise tp or pp, lower micro_batch or set optimizer.zero: 1",
        )


@dataclass(frozen=True)
class Gpt:
    """The GPT model on a tp x pp x dp split: its layers' passes, micro-batch count and pipeline sends."""

    model: GptModel
    tp: int
    dp: int
    m: int  #: micro-batches per replica and iteration

    def pipeline_bytes(self) -> int:
        """Each rank's bytes per pipeline send (one micro-batch's activations, or their gradients)."""
        return activation_bytes(self.model)

    def compute_ns(self, params: int) -> float:
        """The forward and backward time, on one rank for its whole batch, of layers with ``params``
        parameters: 6 params tokens FLOPs over the tp x dp ranks that share them."""
        tokens = global_batch(self.model, self.dp) * self.model.seq_len
        return 6 * params * tokens / (self.tp * self.dp) / (self.model.device_tflops * 1e12 * self.model.mfu) * 1e9

    def layers(self) -> list[LayerPasses]:
        """Every layer's passes, in forward order, named layer0, layer1, ..."""
        attention, mlp = layer_params(self.model)
        first, last = embedding_params(self.model, self.tp)
        n = self.model.layers
        return [
            self.layer(f"layer{i}", attention + (first if i == 0 else 0), mlp + (last if i == n - 1 else 0))
            for i in range(n)
        ]

    def layer(self, name: str, attention: int, mlp: int) -> LayerPasses:
        """A layer of two blocks, attention and MLP, each with its tensor-parallel collectives: an
        All-Reduce after the block forward and backward, or with sequence parallelism an All-Gather
        before it and a Reduce-Scatter after it, both ways."""
        forward: list[Step] = []
        backward: list[Step] = []
        for block, params in (("attn", attention), ("mlp", mlp)):
            ns = self.compute_ns(params)
            forward += self.around(block, name, Compute(f"fwd.{block}.{name}", ns / 3, {"name": MODEL}), "fwd")
        for block, params in (("mlp", mlp), ("attn", attention)):
            ns = self.compute_ns(params)
            backward += self.around(block, name, Compute(f"bwd.{block}.{name}", 2 * ns / 3, {"name": MODEL}), "bwd")
        return LayerPasses(name, tuple(forward), tuple(backward), BYTES * (attention + mlp) // self.tp)

    def around(self, block: str, name: str, compute: Compute, way: str) -> list[Step]:
        """A block's compute with its tensor-parallel collectives, each of 2 b s h bytes a micro-batch."""
        if self.model.sequence_parallel:
            gather = self.exchange(f"{way}_ag.{block}.{name}", "all_gather")
            return [gather, compute, self.exchange(f"{way}_rs.{block}.{name}", "reduce_scatter")]
        return [compute, self.exchange(f"{way}_ar.{block}.{name}", "all_reduce")]

    def exchange(self, name: str, kind: str) -> Exchange:
        """A tensor-parallel collective: ``nbytes`` for the rank's whole batch, m micro-batches of 2 b s h."""
        keys = {"name": MODEL, "algorithm": MODEL, "bytes": MODEL, "hosts": f"{KEY}.tp"}
        return Exchange(name, kind, "tp", self.m * activation_bytes(self.model), "ring", keys)
