"""A mixture-of-experts GPT (``model: {kind: moe}``) as the training builder's layers (docs/model.md §8.6).

Each layer is the GPT's attention block (gpt.py, with its tensor-parallel collectives) followed by
a mixture-of-experts block in place of the MLP: a router (an h x experts matrix) sends each token
to its ``top_k`` experts, each an MLP of the GPT's shape (Lepikhin et al. 2021, GShard; Fedus et
al. 2022, Switch Transformer; Jiang et al. 2024, Mixtral). What is modelled:

- expert parallelism: the experts are sharded over ``ep`` ranks of a stage, experts/ep each in
  order (expert e on the group's rank e // (experts/ep)). The ep ranks are consecutive in the
  stage's tp x dp ranks, tensor-parallel index fastest (Megatron-Core's order with expert tensor
  parallelism 1: experts are not split by tp); ``Placement.groups(s, "ep")``. The ranks holding
  the same experts in the other EP groups are the expert-data-parallel group (``"edp"``, of
  tp x dp / ep ranks), which reduces the experts' gradients; the dense part's go over dp.
- tokens: each rank routes T = b s tokens a micro-batch, b s / tp with sequence parallelism
  (required with tp > 1, as Megatron-Core requires it for MoE), T top_k token copies.
- load: expert popularity is Zipf's, 1 / r^imbalance for the expert of popularity rank r, the
  ranks a permutation drawn from the scenario's seed for each layer; every rank of a group sends
  each expert its share of its T top_k copies (largest remainders; at most T, one copy of a token
  per expert). ``imbalance`` 0 is uniform. With ``capacity_factor`` an expert takes at most
  floor(capacity_factor T top_k / experts) copies from each rank (GShard's capacity of a group,
  one rank's tokens), the rest are dropped (they skip the MoE block on the residual path).
- all-to-alls: forward, a dispatch (rank i sends rank j 2 h bytes per copy it routes to j's
  experts) and a combine (the reverse); backward, the combine's gradients (as the dispatch) and the
  dispatch's (as the combine). Balanced and dropless, each rank sends (ep - 1) / ep of its
  T top_k 2 h bytes to the others in each. Each is an all-to-all with per-pair bytes (all_to_allv,
  collectives.py), run directly.
- compute: the dense part (attention, norms, router, embeddings) as the GPT's, 6 P tokens / (tp
  dp); each rank's experts 6 P_expert FLOPs per copy they receive, so the ranks of hot experts
  compute longer and their group waits for them.
- parameters: per layer attention + 2 norms + router h E + E expert MLPs (``parameter_count``);
  the active ones count top_k experts (``active_parameter_count``).
"""

from dataclasses import dataclass

import numpy as np

from ..config.schema import MoeModel, Training
from ..errors import ScenarioError
from .. import streams
from .gpt import BYTES, MODEL, Gpt, embedding_params, layer_params, mlp_params, norm_params
from .passes import Compute, Exchange, ExpertCompute, LayerPasses, Step


def dense_layer_params(model: MoeModel) -> int:
    """A layer's parameters outside its experts: attention with its norm, the MoE block's norm and the router."""
    attention, _ = layer_params(model)
    return attention + norm_params(model) + model.hidden * model.experts


def parameter_count(model: MoeModel, tp: int = 1) -> int:
    """P: every parameter of the model, every expert's included (the vocabulary padded for tp)."""
    per_layer = dense_layer_params(model) + model.experts * mlp_params(model)
    return model.layers * per_layer + sum(embedding_params(model, tp))


def active_parameter_count(model: MoeModel, tp: int = 1) -> int:
    """The parameters a token goes through: the dense part and top_k experts per layer."""
    per_layer = dense_layer_params(model) + model.top_k * mlp_params(model)
    return model.layers * per_layer + sum(embedding_params(model, tp))


def tokens_per_rank(model: MoeModel, tp: int) -> int:
    """T: the tokens one rank routes per micro-batch, b s (b s / tp with sequence parallelism)."""
    tokens = model.micro_batch * model.seq_len
    return tokens // tp if model.sequence_parallel else tokens


def popularity(model: MoeModel, seed: int, layer: int) -> np.ndarray:
    """Each expert's share of the tokens: Zipf's 1 / r^imbalance for popularity rank r = 1..experts, the
    experts' ranks a permutation drawn from ``seed`` for ``layer``."""
    rng = streams.rng(seed, streams.ENGINE, layer)
    rank = rng.permutation(model.experts) + 1
    weight = 1.0 / rank.astype(float) ** model.imbalance
    return weight / weight.sum()


def expert_copies(model: MoeModel, tokens: int, share: np.ndarray) -> list[int]:
    """How many of one rank's ``tokens`` x top_k token copies go to each expert: its ``share``, at most
    ``tokens`` (a token goes to an expert once; the excess goes to the others in proportion), in whole
    copies by largest remainders; then at most the capacity, floor(capacity_factor x tokens x top_k /
    experts), if capacity_factor is set."""
    total = tokens * model.top_k
    want = share * total
    full = np.zeros(len(share), bool)
    while (want > tokens + 1e-9).any():
        full |= want >= tokens - 1e-9
        spare = total - tokens * full.sum()
        want = np.where(full, tokens, share * spare / share[~full].sum())
    copies = np.floor(want).astype(int)
    order = sorted(range(len(share)), key=lambda e: (-(want[e] - copies[e]), e))
    for e in order[: total - int(copies.sum())]:
        copies[e] += 1
    if model.capacity_factor is not None:
        capacity = int(model.capacity_factor * total / model.experts)
        copies = np.minimum(copies, capacity)
    return [int(c) for c in copies]


def dispatch_bytes(model: MoeModel, copies: list[int]) -> list[list[int]]:
    """The dispatch's bytes per micro-batch from EP rank i (row) to EP rank j (column): 2 h bytes for each copy
    i routes to j's experts (the diagonal stays on the rank). Every rank routes alike."""
    per_rank = model.experts // model.ep
    to = [BYTES * model.hidden * sum(copies[j * per_rank : (j + 1) * per_rank]) for j in range(model.ep)]
    return [list(to) for _ in range(model.ep)]


def check(spec: Training, model: MoeModel, dp: int, source: str) -> None:
    """What the expert split needs: ep dividing tp x dp, experts a multiple of ep, top_k at most experts,
    sequence parallelism with tp > 1; no memory check (not modelled for moe)."""
    at = f"{MODEL}."
    if (spec.tp * dp) % model.ep:
        raise ScenarioError(
            source,
            f"{at}ep",
            f"{model.ep} is not allowed: it must divide tp x dp = {spec.tp} x {dp} = {spec.tp * dp} "
            f"(the expert-parallel ranks are drawn from a stage's tp x dp ranks)",
        )
    if model.experts % model.ep:
        raise ScenarioError(
            source, f"{at}experts", f"{model.experts} is not allowed: it must be a multiple of ep ({model.ep})"
        )
    if model.top_k > model.experts:
        raise ScenarioError(source, f"{at}top_k", f"{model.top_k} is not allowed: at most experts ({model.experts})")
    if spec.tp > 1 and not model.sequence_parallel:
        raise ScenarioError(
            source,
            f"{at}sequence_parallel",
            f"false is not allowed with tp {spec.tp}: a moe model with tp > 1 needs sequence_parallel: true "
            f"(as Megatron-Core requires), each rank routing its b s / tp tokens",
        )
    if model.device_memory_gb is not None:
        raise ScenarioError(
            source,
            f"{at}device_memory_gb",
            f"{model.device_memory_gb:g} is not allowed for a moe model (its memory is not modelled); leave it out",
        )


@dataclass(frozen=True)
class Moe(Gpt):
    """The MoE model on a tp x pp x dp split with ep expert-parallel ranks: its layers' passes."""

    model: MoeModel
    seed: int = 1  #: the scenario's seed: which experts are hot

    def expert_ns(self, copies: int) -> float:
        """Forward and backward time on one rank for its whole batch of its experts' MLPs, which receive
        ``copies`` token copies a micro-batch: 6 P_expert FLOPs per copy."""
        flops = 6 * mlp_params(self.model) * copies * self.m
        return flops / (self.model.device_tflops * 1e12 * self.model.mfu) * 1e9

    def layers(self) -> list[LayerPasses]:
        """Every layer's passes, in forward order, named layer0, layer1, ..."""
        first, last = embedding_params(self.model, self.tp)
        n = self.model.layers
        dense = dense_layer_params(self.model)
        return [self.moe_layer(i, dense + (first if i == 0 else 0) + (last if i == n - 1 else 0)) for i in range(n)]

    def moe_layer(self, i: int, dense: int) -> LayerPasses:
        """Layer i: the dense part's compute (with the attention block's tensor-parallel collectives), then
        the dispatch, the experts' compute and the combine; backward the other way round. Its gradients:
        the dense part's 2 dense / tp bytes over dp, the rank's experts' 2 (experts / ep) P_expert over edp."""
        model, name = self.model, f"layer{i}"
        copies = expert_copies(model, tokens_per_rank(model, self.tp), popularity(model, self.seed, i))
        sent = dispatch_bytes(model, copies)
        back = [list(col) for col in zip(*sent)]
        per_rank = model.experts // model.ep
        received = [model.ep * sum(copies[j * per_rank : (j + 1) * per_rank]) for j in range(model.ep)]
        ns = self.expert_ns
        keys = {"name": MODEL}
        dense_ns = self.compute_ns(dense)
        forward: list[Step] = self.around("attn", name, Compute(f"fwd.attn.{name}", dense_ns / 3, keys), "fwd")
        forward += [
            self.all_to_allv(f"fwd_dispatch.{name}", sent),
            ExpertCompute(f"fwd.experts.{name}", tuple(ns(c) / 3 for c in received), keys),
            self.all_to_allv(f"fwd_combine.{name}", back),
        ]
        backward: list[Step] = [
            self.all_to_allv(f"bwd_combine.{name}", sent),
            ExpertCompute(f"bwd.experts.{name}", tuple(2 * ns(c) / 3 for c in received), keys),
            self.all_to_allv(f"bwd_dispatch.{name}", back),
        ]
        backward += self.around("attn", name, Compute(f"bwd.attn.{name}", 2 * dense_ns / 3, keys), "bwd")
        expert_grads = BYTES * per_rank * mlp_params(model)
        return LayerPasses(name, tuple(forward), tuple(backward), BYTES * dense // self.tp, expert_grads)

    def all_to_allv(self, name: str, per_pair: list[list[int]]) -> Exchange:
        """An all-to-all over the EP group with per-pair bytes (``per_pair`` a micro-batch's, row the sender),
        for the rank's whole batch; its ``nbytes`` (collectives.csv's bytes) is the largest rank's send buffer."""
        keys = {"name": MODEL, "algorithm": MODEL, "bytes": MODEL, "hosts": f"{MODEL}.ep"}
        whole = tuple(tuple(v * self.m for v in row) for row in per_pair)
        nbytes = max(sum(row) for row in whole)
        return Exchange(name, "all_to_all", "ep", nbytes, "direct", keys, whole)
