"""Stragglers and compute jitter: how long each compute task of the built DAG takes.

The scenario's ``stragglers`` slow every compute task on a chosen rank's host by the entry's
``factor``; ``compute_jitter`` multiplies each compute task's duration by its own random draw
of mean 1. Both act on the task DAG once it is built, so every workload (compute tasks,
training with any model, Chakra traces) takes them alike and the engine sees plain durations.
Without them no duration changes.

Ranks are those of the workload's iteration: the training's (rank r on its r-th host), the
Chakra trace's (rank r on ``chakra.ranks[r]``), or else host ids.
"""

import math

import numpy as np

from ..config.schema import ComputeJitter, Scenario
from ..errors import ScenarioError
from .. import streams
from .dag import TaskTable
from .training import training_hosts

#: the longest compute task stragglers and jitter may make, in ps (about 53 days): beyond it the
#: engine's int64 clock has too little room left
MAX_DURATION_PS = 1 << 62


def rank_hosts(scenario: Scenario, n_hosts: int) -> tuple[list[int], str]:
    """The host of each rank, and what the ranks are (for an error message)."""
    workload = scenario.workload
    training = workload.training
    if training is not None:
        given = " (workload.training.hosts)" if training.hosts is not None else ""
        return training_hosts(training, n_hosts), f"the training's ranks{given}"
    if workload.chakra is not None:
        if workload.chakra.ranks is not None:
            return list(workload.chakra.ranks), "the Chakra trace's ranks (workload.chakra.ranks)"
        from ..importers.chakra import trace_files  # protobuf, only for traces

        return list(range(len(trace_files(workload.chakra.prefix)))), "the Chakra trace's ranks (one per file)"
    return list(range(n_hosts)), "hosts"


def straggling_ranks(scenario: Scenario, n_hosts: int, source: str) -> list[dict]:
    """The ranks that straggle, each as {rank, host, factor}, by rank (entries that pick the
    same rank multiply their factors)."""
    hosts, what = rank_hosts(scenario, n_hosts)
    factors: dict[int, float] = {}
    for i, entry in enumerate(scenario.stragglers):
        if entry.rank is not None:
            if entry.rank >= len(hosts):
                raise ScenarioError(
                    source,
                    f"stragglers.{i}.rank",
                    f"{entry.rank} is not allowed: ranks run from 0 to {len(hosts) - 1} ({what})",
                )
            chosen = [entry.rank]
        else:
            assert entry.fraction is not None  # the schema asks for rank or fraction
            rng = streams.rng(scenario.seed, streams.STRAGGLER_FRACTION, i)
            count = max(1, math.floor(entry.fraction * len(hosts) + 0.5))  # rounded half up
            chosen = rng.choice(len(hosts), count, replace=False).tolist()
        for rank in chosen:
            factors[rank] = factors.get(rank, 1.0) * entry.factor
    return [{"rank": r, "host": hosts[r], "factor": factors[r]} for r in sorted(factors)]


def jitter_draws(jitter: ComputeJitter, n: int, rng: np.random.Generator) -> np.ndarray:
    """n draws of mean 1 and coefficient of variation ``jitter.cv`` (normal and uniform ones below 0 taken as 0)."""
    cv = jitter.cv
    if jitter.distribution == "lognormal":
        sigma2 = np.log1p(cv * cv)
        return rng.lognormal(-sigma2 / 2, np.sqrt(sigma2), n)
    if jitter.distribution == "normal":
        return np.maximum(rng.normal(1.0, cv, n), 0.0)
    return np.maximum(rng.uniform(1 - cv * np.sqrt(3), 1 + cv * np.sqrt(3), n), 0.0)


def compute_durations(tasks: TaskTable, scenario: Scenario, stragglers: list[dict], source: str) -> np.ndarray | None:
    """Every task's duration with the ``stragglers`` (straggling_ranks) and the jitter applied,
    or None if the scenario has neither (the durations stay as built, to the picosecond)."""
    jitter = scenario.compute_jitter if scenario.compute_jitter is not None and scenario.compute_jitter.cv else None
    if not stragglers and jitter is None:
        return None
    computes = np.flatnonzero(tasks.host >= 0)  # joins have no host, flows no duration
    scale = np.ones(len(computes))
    for straggler in stragglers:
        scale[tasks.host[computes] == straggler["host"]] = straggler["factor"]
    if jitter is not None:
        rng = streams.rng(scenario.seed, streams.COMPUTE_JITTER)
        scale *= jitter_draws(jitter, len(computes), rng)
    durations = tasks.duration_ps.copy()
    scaled = scale != 1.0  # the others keep their duration exactly, whatever its size
    changed = np.rint(durations[computes[scaled]] * scale[scaled])
    if len(changed) and changed.max() > MAX_DURATION_PS:
        key = "compute_jitter.cv" if jitter is not None else "stragglers"
        raise ScenarioError(
            source, key, f"makes a compute task last {changed.max() / 1e12:.3g} s, more than the engine's clock holds"
        )
    durations[computes[scaled]] = changed.astype(np.int64)
    return durations
