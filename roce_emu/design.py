"""Bandwidth design for multi-dimensional fabrics (LIBRA, ISPASS 2024): how to split each
NPU's bandwidth budget across the dimensions of a ``multi_dim`` fabric so that the
workload's collectives finish soonest.

The model: a hierarchical all-reduce of S bytes per NPU moves, per NPU, on dimension d
(baseline order, d = 0 first)

    T_d = 2 (p_d - 1) / p_d x S / (p_0 ... p_{d-1})  bytes,

on the u_d links of the dimension that its algorithm keeps busy at once, each at the
dimension's link rate B_d (workload/dim_algorithms.py: ring 1, ring_bidir 2, direct p_d - 1 on
a fully connected dimension), so it takes a_d / (u_d B_d) with a_d = 8 T_d summed over the
workload's collectives; write c_d = a_d / u_d. The budget is a weighted sum of the rates,
sum_d w_d B_d = W: with a bandwidth budget, w_d is the links l_d an NPU has in dimension d (its
injection bandwidth is sum_d l_d B_d); with a cost model, w_d is l_d times the cost of a Gb/s
on d. Two ways the dimensions overlap:

- ``max`` (Themis-like: every dimension busy at once): time = max_d c_d / B_d, least when every
  dimension takes equally long: B_d = W c_d / sum_j w_j c_j, time = sum_j w_j c_j / W;
- ``sum`` (baseline order: one dimension after the other): time = sum_d c_d / B_d, least
  (Lagrange) at B_d = W sqrt(c_d / w_d) / sum_j sqrt(c_j w_j), time = (sum_j sqrt(c_j w_j))^2 / W.

When every dimension's algorithm uses all its links (u_d = l_d, the defaults but on a switch,
which has one link), a bandwidth budget with ``max`` gives each dimension l_d B_d = W a_d /
sum_j a_j of the NPU's bandwidth: LIBRA's split.

docs/design.md gives the model and what it leaves out.
"""

import math
from dataclasses import dataclass

import numpy as np

from .errors import ScenarioError
from .workload import dim_algorithms


def parse_costs(text: str | None) -> list[float] | None:
    """``--cost C0,C1,...``: the cost per Gb/s of each dimension's links (None when not given)."""
    if text is None:
        return None
    try:
        return [float(c) for c in text.split(",")]
    except ValueError:
        raise ScenarioError("--cost", text, "expected numbers separated by commas, e.g. 1,4") from None


def dimension_bits(sizes, collectives) -> np.ndarray:
    """a_d: the bits each NPU sends on each dimension over the collectives ([(kind, bytes)] of
    hierarchical all-reduces), in the baseline order."""
    a = np.zeros(len(sizes))
    for _, nbytes in collectives:
        held = float(nbytes)
        for d, p in enumerate(sizes):
            if p > 1:
                a[d] += 2 * (p - 1) / p * held * 8
                held /= p
    return a


@dataclass
class Design:
    rates_gbps: np.ndarray  # per dimension
    time_s: float  # the model's communication time
    overlap: str
    weights: np.ndarray  # w_d
    budget: float  # W, in the weights' units x Gb/s
    used: np.ndarray  # u_d: the links each dimension's algorithm keeps busy at once


def optimum(a: np.ndarray, w: np.ndarray, budget: float, overlap: str, used=None) -> Design:
    """The rates (Gb/s) minimising the model's time under sum_d w_d B_d = budget, with u_d =
    ``used`` links busy at once (default one); dimensions that carry nothing get none."""
    u = np.ones(len(a)) if used is None else np.asarray(used, float)
    c = np.asarray(a, float) / u
    w = np.asarray(w, float)
    if overlap == "max":
        rates = budget * c / float(np.sum(w * c))
    else:
        root = np.sqrt(c / w)
        rates = budget * root / float(np.sum(np.sqrt(c * w)))
    return Design(rates, model_time(a, rates, overlap, u), overlap, w, budget, u)


def model_time(a: np.ndarray, rates_gbps: np.ndarray, overlap: str = "max", used=None) -> float:
    """The model's time of a_d bits per NPU on each dimension at rates_gbps per link, u_d = ``used`` links at once."""
    u = np.ones(len(a)) if used is None else np.asarray(used, float)
    carried = a > 0
    per_dim = a[carried] / (u[carried] * np.asarray(rates_gbps)[carried] * 1e9)
    return float(per_dim.max() if overlap == "max" else per_dim.sum()) if carried.any() else 0.0


def equal_split(w: np.ndarray, budget: float) -> np.ndarray:
    """Every dimension the same share of the budget: w_d B_d = budget / D."""
    return budget / len(w) / np.asarray(w, float)


def design(
    scenario,
    workload,
    source: str,
    budget_gbps: float,
    overlap: str = "max",
    costs=None,
    cost_budget: float | None = None,
) -> tuple[Design, np.ndarray]:
    """The design for a validated multi_dim scenario and its built workload, and a_d."""
    topo = scenario.topology
    if topo.kind != "multi_dim":
        raise ScenarioError(
            source,
            "topology.kind",
            f"'{topo.kind}': bandwidth design splits the rates of a multi_dim fabric's dimensions (allowed: multi_dim)",
        )
    sizes = [d.size for d in topo.dims]
    collectives = []
    for c in workload.collectives:
        if c.iteration != 0:
            continue
        if c.algorithm != "hierarchical" or c.kind != "all_reduce":
            raise ScenarioError(
                source,
                "workload",
                f"collective '{c.name}' is a {c.algorithm} {c.kind}: the design "
                f"models hierarchical all-reduces (dp_algorithm or algorithm "
                f"hierarchical)",
            )
        collectives.append((c.kind, c.nbytes))
    if not collectives:
        raise ScenarioError(source, "workload", "no hierarchical all-reduce to design for")
    links = np.array([d.links() for d in topo.dims], float)
    used = [dim_algorithms.links_used(alg, d.size, d.links()) for alg, d in zip(topo.algorithms(), topo.dims)]
    if costs is not None:
        if len(costs) != len(sizes) or any(not math.isfinite(c) or c <= 0 for c in costs):
            raise ScenarioError(
                "--cost",
                "",
                f"{len(costs)} costs for {len(sizes)} dimensions: give one positive "
                f"cost per Gb/s for each dimension, comma-separated",
            )
        if cost_budget is None or cost_budget <= 0:
            raise ScenarioError("--cost-budget", "", "a cost model needs a positive --cost-budget")
        weights, budget = links * np.array(costs, float), float(cost_budget)
    else:
        if not budget_gbps or budget_gbps <= 0 or not math.isfinite(budget_gbps):
            raise ScenarioError("--budget-gbps", "", f"{budget_gbps} is not a positive per-NPU bandwidth (Gb/s)")
        weights, budget = links, float(budget_gbps)
    a = dimension_bits(sizes, collectives)
    return optimum(a, weights, budget, overlap, used), a


def with_rates(doc: dict, rates_gbps) -> dict:
    """The scenario document with its dimensions' rates replaced (and the host link, if the
    scenario fixed it, left as it is)."""
    out = dict(doc)
    topo = dict(out["topology"])
    topo["dims"] = [{**d, "rate_gbps": float(r)} for d, r in zip(topo["dims"], rates_gbps)]
    out["topology"] = topo
    return out
