"""Parameter servers (dp_algorithm: parameter_server), synchronous: each iteration the workers pull
the model from its servers, compute, and push their gradients back; a server sends the next
iteration's shard once every push of this one has reached it.

Closed form, one server of NIC rate R, W workers, a model of M bytes, a layer's forward F and
backward B: the server's port sends W·M (the pulls) and then receives W·M (the pushes), one
after the other, so an iteration takes at least 2·W·M/R, and with a single bucket it is that
(in wire bytes: each packet's headers and gap on top of its payload) plus F + B and a few
link latencies.
"""

import numpy as np
import pytest

from conftest import assert_one_line_error, scenario, simulate
from roce_emu.core import kinds as K

RATE = 100e9
MODEL = 1_000_000
PROP_NS = 1000  # the default link delay
FORWARD_NS, BACKWARD_NS = 10_000, 20_000


def ps_training(workers=4, servers=(4,), iterations=3, layers=1, bucket_bytes=25 << 20, **top):
    layer = {"forward_ns": FORWARD_NS / layers, "backward_ns": BACKWARD_NS / layers}
    return scenario(
        topology={"kind": "single_switch", "hosts": workers + len(servers)},
        workload={
            "iterations": iterations,
            "training": {
                "layers": [{"name": f"l{i}", **layer, "weight_grad_bytes": MODEL // layers} for i in range(layers)],
                "dp_algorithm": "parameter_server",
                "servers": list(servers),
                "bucket_bytes": bucket_bytes,
            },
        },
        **top,
    )


def frame_bytes(world) -> int:
    """A full data packet on the wire: payload, headers and inter-frame gap."""
    return int(world.cfg[K.CFG_MTU]) + int(world.cfg[K.CFG_DATA_HDR]) + int(world.cfg[K.CFG_IFG])


@pytest.mark.parametrize("workers, servers", [(4, (4,)), (8, (8,)), (4, (4, 5))])
def test_the_servers_nic_bounds_the_iteration(workers, servers):
    result = simulate(ps_training(workers, servers))
    network_ns = 2 * workers * MODEL / len(servers) * 8 / RATE * 1e9
    world = result.outcome.world
    wire_ns = network_ns * frame_bytes(world) / int(world.cfg[K.CFG_MTU])
    # the pulls' and then the pushes' last packet: two 1 us links, a frame's time on each
    last_packet_ns = 2 * (PROP_NS + frame_bytes(world) * 8 / RATE * 1e9)
    for t in result.summary["iteration_ns"]:
        assert t >= network_ns  # the bound, 2·W·M/R per server's share
        assert wire_ns + FORWARD_NS + BACKWARD_NS <= t <= wire_ns + FORWARD_NS + BACKWARD_NS + 2 * last_packet_ns


def test_a_server_sends_the_next_iteration_only_after_every_push_reached_it():
    result = simulate(ps_training(workers=3, servers=(3, 4), layers=2, bucket_bytes=0))
    world, workload = result.outcome.world, result.prepared.workload
    tasks, flows = workload.tasks, workload.flows
    names = np.array([tasks.name(k) for k in range(len(flows))])
    start, finish = world.task["start_ps"][: len(flows)], world.task["finish_ps"][: len(flows)]
    it = tasks.iteration[: len(flows)]
    for server in (3, 4):
        for k in range(1, 3):
            pulls = (flows.src == server) & (it == k) & np.char.startswith(names, "pull")
            pushes = (flows.dst == server) & (it == k - 1) & np.char.startswith(names, "push")
            assert pulls.sum() == 3 and pushes.sum() == 3 * 2  # to each worker; from each, two buckets
            assert start[pulls].min() >= finish[pushes].max()
    shards = {int(b) for b in flows.size_bytes[np.char.startswith(names, "pull")]}
    assert shards == {MODEL // 2}


def test_the_ranks_run_on_the_hosts_that_are_not_servers():
    result = simulate(ps_training(workers=3, servers=(0,), iterations=1))
    flows = result.prepared.workload.flows
    assert set(flows.src.tolist()) | set(flows.dst.tolist()) == {0, 1, 2, 3}
    assert set(flows.dst[flows.src == 0].tolist()) == {1, 2, 3}


@pytest.mark.parametrize(
    "training, key, needle",
    [
        ({"servers": [4]}, "workload.training.servers", "dp_algorithm parameter_server needs"),
        ({"dp_algorithm": "parameter_server"}, "workload.training.servers", "give both or neither"),
        ({"dp_algorithm": "parameter_server", "servers": [9]}, "workload.training.servers.0", "run from 0 to 4"),
        (
            {"dp_algorithm": "parameter_server", "servers": [1], "hosts": [0, 1, 2, 3]},
            "workload.training.servers.0",
            "a rank runs on it",
        ),
        ({"dp_algorithm": "parameter_server", "servers": [4], "tp": 2}, "workload.training.tp", "data parallel only"),
    ],
)
def test_bad_parameter_servers_are_one_line_naming_the_key(tmp_path, training, key, needle):
    layer = {"name": "l0", "forward_ns": 1000, "backward_ns": 1000, "weight_grad_bytes": 4000}
    doc = {"topology": {"kind": "single_switch", "hosts": 5}, "workload": {"training": {"layers": [layer], **training}}}
    assert_one_line_error(tmp_path / "s.yaml", doc, key, needle)


# ---- asynchronous, with a staleness bound -------------------------------------------------------
def async_run(staleness, workers=2, factor=10, iterations=3):
    """Worker 0 computes ``factor`` times slower than the others (a 100 KB model)."""
    layer = {"name": "l0", "forward_ns": FORWARD_NS, "backward_ns": BACKWARD_NS, "weight_grad_bytes": 100_000}
    sc = scenario(
        topology={"kind": "single_switch", "hosts": workers + 1},
        stragglers=[{"rank": 0, "factor": factor}],
        workload={
            "iterations": iterations,
            "training": {
                "layers": [layer],
                "dp_algorithm": "parameter_server",
                "servers": [workers],
                "staleness_bound": staleness,
            },
        },
    )
    return simulate(sc)


def flows_named(result, prefix):
    workload = result.prepared.workload
    n = len(workload.flows)
    return np.array([workload.tasks.name(f).startswith(prefix) for f in range(n)])


@pytest.mark.parametrize("staleness", [1, 2])
def test_no_worker_pulls_iteration_k_before_every_push_of_k_minus_1_minus_the_bound(staleness):
    result = async_run(staleness, workers=3, factor=4, iterations=6)
    world, workload = result.outcome.world, result.prepared.workload
    n = len(workload.flows)
    it = workload.tasks.iteration[:n]
    start, finish = world.task["start_ps"][:n], world.task["finish_ps"][:n]
    pulls, pushes = flows_named(result, "pull."), flows_named(result, "push.")
    ahead = False
    for k in range(staleness + 1, 6):
        assert start[pulls & (it == k)].min() >= finish[pushes & (it == k - 1 - staleness)].max()
        ahead |= bool(start[pulls & (it == k)].min() < finish[pushes & (it == k - 1)].max())
    assert ahead, "the fast workers run ahead of the straggler, within the bound"


@pytest.mark.parametrize(
    "staleness, counts",
    [
        # unbounded: the fast worker runs its 3 iterations while the straggler computes its first;
        # the straggler's first update then comes 3 versions late, the others none
        (None, {"0": 5, "3": 1}),
        # bound 1: the fast worker waits for the straggler's first push before its third pull; the
        # straggler's first update is 2 versions late, its second 1 (the fast worker's third)
        (1, {"0": 4, "1": 1, "2": 1}),
        (0, {"0": 6}),  # synchronous: one version per iteration
    ],
)
def test_each_updates_delay_counts_the_versions_between_its_pull_and_its_push(staleness, counts):
    delay = async_run(staleness).summary["update_delay"]
    assert delay["counts"] == counts and delay["updates"] == 6
    assert delay["max"] == max(int(d) for d in counts)


def test_a_jobs_servers_and_ranks_are_its_own_hosts():
    layer = {"name": "l0", "forward_ns": FORWARD_NS, "backward_ns": BACKWARD_NS, "weight_grad_bytes": MODEL}
    training = {"layers": [layer], "dp_algorithm": "parameter_server", "servers": [0]}
    sc = scenario(
        topology={"kind": "single_switch", "hosts": 8},
        jobs=[{"name": "ps", "hosts": [7, 5, 3, 1], "workload": {"iterations": 1, "training": training}}],
    )
    flows = simulate(sc).prepared.workload.flows
    assert set(flows.src[flows.dst == 7].tolist()) == {5, 3, 1}  # job rank 0 is host 7, the server
    assert set(flows.dst[flows.src == 7].tolist()) == {5, 3, 1}
