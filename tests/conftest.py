"""Shared helpers: build scenarios from dicts, run them in-process, check conservation on every run,
run the command line in a subprocess."""

import copy
import fcntl
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from roce_emu.api import prepare_scenario, run
from roce_emu.config.schema import Scenario
from roce_emu.core import CACHE_DIR
from roce_emu.core import kinds as K
from roce_emu.results.tables import flows_now, in_flight_per_flow

ROOT = Path(__file__).resolve().parent.parent


#: the engine's kernels by the fast-forward mode that compiles them (trains share off's)
KERNELS = ("off", "memo", "exact")


@pytest.fixture(scope="session", autouse=True)
def compiled_engine(request):
    """With several test workers (pytest-xdist) and many tests, compile the engine's kernels
    before the first test, each once: on a fresh cache each takes one to three minutes, and
    workers that all need one at the same time would each compile it. Worker k starts at the
    k-th kernel and holds a lock per kernel while it compiles or loads it, so the workers
    compile different kernels side by side, then load the others from the cache. A single
    worker, or a few tests, compile what they use when they use it."""
    if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) < 2 or len(request.session.items) < 100:
        return
    worker = os.environ["PYTEST_XDIST_WORKER"]
    first = int(worker[2:]) if worker[2:].isdigit() else 0
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    for i in range(len(KERNELS)):
        mode = KERNELS[(first + i) % len(KERNELS)]
        with open(CACHE_DIR / f"compiling-{mode}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            warm = {"workload": {"flows": [{"src": 0, "dst": 1, "bytes": 10_000}]}, "sim": {"fast_forward": mode}}
            run(prepare_scenario(scenario(**warm)), write=False, progress=False)


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
