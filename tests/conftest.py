"""Shared helpers: build scenarios from dicts, run them in-process, check conservation on every run,
run the command line in a subprocess."""

import copy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from roce_emu.api import prepare_scenario, run
from roce_emu.config.schema import Scenario
from roce_emu.core import kinds as K
from roce_emu.results.tables import flows_now, in_flight_per_flow

ROOT = Path(__file__).resolve().parent.parent


def cli(*args, cwd=None, timeout=600, **popen) -> subprocess.CompletedProcess:
    """``python -m roce_emu ARGS`` (each argument str()-ed) in a subprocess, from ``cwd`` (default
    the checkout), with no stdin, its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "roce_emu", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        stdin=subprocess.DEVNULL,
        timeout=timeout,
        **popen,
    )


def scenario(**sections) -> Scenario:
    base = {"name": "test", "seed": 1}
    base.update(copy.deepcopy(sections))
    return Scenario.model_validate(base)


def assert_conservation(world) -> None:
    """Per flow: data packets sent = delivered + dropped + still in the network."""
    flow = flows_now(world)
    in_flight = in_flight_per_flow(world)
    lhs = flow["pkts_sent"]
    rhs = flow["pkts_delivered"] + flow["pkts_dropped"] + in_flight
    assert np.array_equal(lhs, rhs), f"conservation broken: sent {lhs} != {rhs}"
    assert world.stats[K.C_DATA_SENT] == lhs.sum()


def simulate(sc: Scenario, slice_events=None):
    """Run a scenario in-process without writing files; conservation is checked on every run."""
    result = run(prepare_scenario(sc), write=False, progress=False, slice_events=slice_events)
    assert_conservation(result.outcome.world)
    return result


def assert_one_line_error(path, doc: dict, key: str, needle: str) -> None:
    """Preparing ``doc``, written to ``path`` as a scenario file, fails with one line naming the
    file and ``key`` (the start of the key) and saying ``needle``."""
    from roce_emu.api import prepare
    from roce_emu.errors import ScenarioError

    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ScenarioError) as err:
        prepare(path)
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"{path}: {key}"), text
    assert needle in text, text


def named(items, prefix: str) -> list:
    """The workload items whose names start with ``prefix`` (a training step's kind, e.g. "tp_ar")."""
    return [item for item in items if item.name.startswith(prefix)]


@pytest.fixture
def run_scenario():
    return simulate


def advance_to(world, t_ps):
    """Process every event up to t_ps (growing the pools as the driver would); returns the world."""
    from roce_emu.core.loop import advance
    from roce_emu.run.world import grow, grow_qps

    while True:
        status = advance(world, t_ps, 1 << 40)
        if status in (K.ST_POOL_LOW, K.ST_HEAP_LOW):
            world = grow(world)
            continue
        if status == K.ST_QP_LOW:
            world = grow_qps(world)
            continue
        return world


def qp_of(world, f: int) -> int:
    """The open queue pair of flow f: its live state in world.qp, world.ccs and world.timer."""
    q = int(world.flow[f]["qp"])
    assert q >= 0, f"flow {f} has no open queue pair"
    return q


def one_flow(algorithm, params=None, size=100_000_000, ecn=True, **extra):
    """One flow through one 100 Gb/s switch (1 us links) under the given algorithm."""
    return scenario(
        topology={"kind": "single_switch", "hosts": 2},
        network={"cc": {"algorithm": algorithm, "params": params or {}}, "switch": {"ecn": {"enabled": ecn}}},
        workload={"flows": [{"src": 1, "dst": 0, "bytes": size}]},
        **extra,
    )
