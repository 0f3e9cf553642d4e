"""What one layer runs in its forward and backward pass, as the training builder (training.py)
consumes it: steps that are compute or a collective over one of the rank's groups, and the
weight gradients the backward pass produces. Model kinds (models.py, gpt.py, moe.py) describe
their layers in these terms."""

from dataclasses import dataclass

KEY = "workload.training"  #: the section errors about training name


@dataclass(frozen=True)
class Compute:
    """A layer's compute in one pass on every rank of its stage: ``duration_ns`` for the rank's
    whole batch (a micro-batch runs 1/m of it)."""

    name: str  #: the item's name, before its micro-batch tag
    duration_ns: float
    keys: dict  #: the keys errors about it name (Item.keys)


@dataclass(frozen=True)
class ExpertCompute:
    """A MoE layer's experts' compute (moe.py), which differs between the ranks of an expert-parallel
    group: ``durations_ns[j]`` on the group's j-th rank, for its whole batch."""

    name: str
    durations_ns: tuple[float, ...]
    keys: dict


@dataclass(frozen=True)
class Exchange:
    """A collective in a layer's pass, on the critical path (the pass goes on once it is done),
    run by each of the stage's groups of one scope (``group``: tp or dp, Placement.groups).
    ``nbytes`` is each rank's buffer for its whole batch (a micro-batch moves 1/m of it)."""

    name: str  #: the item's name, before its micro-batch tag
    kind: str  #: the collective (all_reduce, all_to_all, ...)
    group: str
    nbytes: int
    algorithm: str
    keys: dict  #: the keys errors about it name (Item.keys)
    #: all_to_all with per-pair bytes (all_to_allv): [i][j] from the group's i-th rank to its j-th, for the
    #: whole batch; None: nbytes split evenly
    pair_bytes: tuple[tuple[int, ...], ...] | None = None


Step = Compute | ExpertCompute | Exchange


@dataclass(frozen=True)
class LayerPasses:
    """One layer as the builder runs it: the steps of its forward and of its backward pass, in
    order, and the weight gradients its backward pass hands to the data-parallel reduction
    (ready once the backward's last compute step is done): ``grad_bytes`` over the dp group,
    ``expert_grad_bytes`` (a MoE layer's experts', moe.py) over the expert-data-parallel group."""

    name: str
    forward: tuple[Step, ...]
    backward: tuple[Step, ...]
    grad_bytes: int
    expert_grad_bytes: int = 0
