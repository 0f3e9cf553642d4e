"""MLFabric's scheduling of parameter-server updates (workload.training.parameter_server):
network-aware ordering with time sharing, aggregation at a worker, and replication.

Closed forms, W workers, one server, a model of M bytes, n iterations:
- aggregation k (W divisible by k): the server receives W/k updates an iteration, n·(W/k)·M
  bytes instead of n·W·M; the aggregating workers receive the other (W − W/k)·M;
- mlfabric scheduling: a server takes one update at a time (no two overlap) and, of those
  waiting, the shortest first;
- replication direct: the replica receives what the server does and the server sends only the
  pulls, n·W·M; chain: the server also forwards every update, n·W·M more.
"""

import numpy as np
import pytest

from conftest import assert_one_line_error, scenario, simulate

MODEL = 400_000


def ps_run(workers=4, updates=None, layers=None, stragglers=(), iterations=2, staleness=0, extra_hosts=0, **training):
    layers = layers or [{"name": "l0", "forward_ns": 10_000, "backward_ns": 20_000, "weight_grad_bytes": MODEL}]
    sc = scenario(
        topology={"kind": "single_switch", "hosts": workers + 1 + extra_hosts},
        stragglers=list(stragglers),
        workload={
            "iterations": iterations,
            "training": {
                "layers": layers,
                "dp_algorithm": "parameter_server",
                "servers": [workers],
                "hosts": list(range(workers)),
                "staleness_bound": staleness,
                "parameter_server": updates or {},
                **training,
            },
        },
    )
    return simulate(sc)


def flows_of(result, prefix):
    workload = result.prepared.workload
    n = len(workload.flows)
    return np.array([workload.tasks.name(f).startswith(prefix) for f in range(n)], bool)


def load(result, host):
    return next(row for row in result.summary["server_load"] if row["host"] == host)


@pytest.mark.parametrize("k", [2, 4])
def test_aggregating_k_updates_at_a_worker_cuts_the_servers_bytes_k_times(k):
    workers, iterations = 4, 2
    plain, summed = ps_run(workers), ps_run(workers, {"aggregation": k})
    assert load(plain, workers)["bytes_in"] == iterations * workers * MODEL
    assert load(summed, workers)["bytes_in"] == iterations * workers // k * MODEL
    gather = flows_of(summed, "gather.")
    assert summed.prepared.workload.flows.size_bytes[gather].sum() == iterations * (workers - workers // k) * MODEL
    assert summed.summary["status"] == "finished"
    if k == 2:  # 4·M/R of pushes become M/R into each aggregator, then 2·M/R into the server
        assert all(t < p for t, p in zip(summed.summary["iteration_ns"], plain.summary["iteration_ns"]))


def test_the_updates_are_summed_at_the_groups_fastest_worker():
    result = ps_run(4, {"aggregation": 2}, stragglers=[{"rank": 0, "factor": 3}, {"rank": 3, "factor": 2}])
    flows = result.prepared.workload.flows
    gather = flows_of(result, "gather.")
    assert sorted(set(zip(flows.src[gather].tolist(), flows.dst[gather].tolist()))) == [(0, 1), (3, 2)]
    push = flows_of(result, "push.")
    assert set(flows.src[push].tolist()) == {1, 2}


def test_mlfabric_takes_one_update_at_a_time_and_the_shortest_waiting_first():
    # backward from l1: its 1 MB gradients are ready 10 us before l0's 100 KB ones, on every worker
    layers = [
        {"name": "l0", "forward_ns": 1000, "backward_ns": 10_000, "weight_grad_bytes": 100_000},
        {"name": "l1", "forward_ns": 1000, "backward_ns": 10_000, "weight_grad_bytes": 1_000_000},
    ]
    workers = 3
    result = ps_run(
        workers, {"scheduling": "mlfabric"}, layers, iterations=1, bucket_bytes=0, concurrent_all_reduces=True
    )
    world, workload = result.outcome.world, result.prepared.workload
    n = len(workload.flows)
    start, finish = world.task["start_ps"][:n], world.task["finish_ps"][:n]
    push = np.flatnonzero(flows_of(result, "push."))
    order = push[np.argsort(start[push])]
    assert all(start[b] >= finish[a] for a, b in zip(order, order[1:])), "one update at a time"
    big = workload.flows.size_bytes[order] == 1_000_000
    # the first big update has the port when the small ones arrive; then the small ones go first
    assert big.tolist() == [True, False, False, False, True, True]
    # FIFO pushes share the port: all six at once
    fifo = ps_run(workers, {}, layers, iterations=1, bucket_bytes=0, concurrent_all_reduces=True)
    fifo_start = fifo.outcome.world.task["start_ps"][push]
    fifo_finish = fifo.outcome.world.task["finish_ps"][push]
    assert fifo_start.max() < fifo_finish.min()


def test_under_mlfabric_every_update_started_was_the_shortest_waiting():
    layers = [
        {"name": f"l{i}", "forward_ns": 5000, "backward_ns": 7000, "weight_grad_bytes": b}
        for i, b in enumerate([300_000, 50_000, 200_000])
    ]
    result = ps_run(
        4,
        {"scheduling": "mlfabric"},
        layers,
        stragglers=[{"rank": 1, "factor": 2.5}],
        iterations=3,
        staleness=None,
        bucket_bytes=0,
    )
    world = result.outcome.world
    rows = world.qtask
    key, ready, task = rows["key"], rows["ready_ps"], rows["task"]
    start = world.task["start_ps"][task]
    for a in range(len(rows)):
        waiting = (ready < start[a]) & (start > start[a])  # waiting when a started, started later
        assert not (key[waiting] < key[a]).any()
    assert len(rows) == int(flows_of(result, "push.").sum())


@pytest.mark.parametrize("replication", ["direct", "chain"])
def test_a_direct_replica_costs_the_server_nothing_and_chain_replication_its_updates_again(replication):
    workers, iterations = 4, 2
    result = ps_run(workers, {"replicas": [workers + 1], "replication": replication}, extra_hosts=1)
    server, replica = load(result, workers), load(result, workers + 1)
    updates = iterations * workers * MODEL
    assert server["bytes_in"] == updates and replica["bytes_in"] == updates
    assert server["bytes_out"] == updates * (1 if replication == "direct" else 2)  # the pulls, and the forwards
    assert result.summary["status"] == "finished"


def test_asynchronous_delays_count_an_aggregate_as_one_version():
    result = ps_run(4, {"aggregation": 2}, stragglers=[{"rank": 0, "factor": 6}], iterations=3, staleness=None)
    delay = result.summary["update_delay"]
    assert delay["updates"] == 12
    # the group without the straggler applies its 3 sums while rank 1 waits for rank 0's first
    assert delay["max"] == 2


@pytest.mark.parametrize("staleness", [0, None])
def test_an_update_that_would_miss_its_deadline_is_dropped_and_never_reaches_the_server(staleness):
    # 3 workers' 1 MB updates ready together; each takes 80 us at 100 Gb/s: the first ends within
    # the 100 us deadline, the other two would end after it (80 us later and more) and are dropped
    workers, iterations, mb = 3, 2, 1_000_000
    layers = [{"name": "l0", "forward_ns": 10_000, "backward_ns": 20_000, "weight_grad_bytes": mb}]
    updates = {"scheduling": "mlfabric", "deadline_ns": 100_000}
    result = ps_run(workers, updates, layers, iterations=iterations, staleness=staleness)
    assert result.summary["status"] == "finished"
    server = load(result, workers)
    assert server["bytes_in"] == iterations * mb and server["bytes_dropped"] == iterations * 2 * mb
    world, flows = result.outcome.world, result.prepared.workload.flows
    into = (flows.dst == workers) & flows_of(result, "push.")
    sent = world.flow["pkts_sent"][: len(flows)][into]
    assert sorted(sent.tolist()) == [0] * (2 * iterations) + [mb // 1000] * iterations
    delay = result.summary["update_delay"]
    assert delay["dropped"] == 2 * iterations and delay["updates"] == iterations


def test_without_a_deadline_nothing_is_dropped():
    result = ps_run(3, {"scheduling": "mlfabric"})
    assert result.summary["update_delay"]["dropped"] == 0
    assert load(result, 3)["bytes_dropped"] == 0


@pytest.mark.parametrize(
    "updates, key, needle",
    [
        ({"replicas": [5, 6]}, "workload.training.parameter_server.replicas", "one replica per server"),
        ({"replicas": [0]}, "workload.training.parameter_server.replicas.0", "a replica is a host of its own"),
        ({"replicas": [9]}, "workload.training.parameter_server.replicas.0", "run from 0 to"),
        ({"replication": "chain"}, "workload.training.parameter_server", "give replicas"),
        ({"scheduling": "sjf"}, "workload.training.parameter_server.scheduling", "fifo"),
        ({"aggregation": 0}, "workload.training.parameter_server.aggregation", "1"),
        ({"deadline_ns": 1000}, "workload.training.parameter_server", "scheduling mlfabric only"),
    ],
)
def test_bad_update_settings_are_one_line_naming_the_key(tmp_path, updates, key, needle):
    layer = {"name": "l0", "forward_ns": 1000, "backward_ns": 1000, "weight_grad_bytes": 4000}
    training = {"layers": [layer], "dp_algorithm": "parameter_server", "servers": [4], "hosts": [0, 1, 2, 3]}
    doc = {
        "topology": {"kind": "single_switch", "hosts": 6},
        "workload": {"training": {**training, "parameter_server": updates}},
    }
    assert_one_line_error(tmp_path / "s.yaml", doc, key, needle)


def test_update_settings_need_a_parameter_server(tmp_path):
    layer = {"name": "l0", "forward_ns": 1000, "backward_ns": 1000, "weight_grad_bytes": 4000}
    doc = {
        "topology": {"kind": "single_switch", "hosts": 4},
        "workload": {"training": {"layers": [layer], "parameter_server": {"aggregation": 2}}},
    }
    assert_one_line_error(tmp_path / "s.yaml", doc, "workload.training", "dp_algorithm parameter_server only")


def test_deadlines_need_fast_forward_off(tmp_path):
    layer = {"name": "l0", "forward_ns": 1000, "backward_ns": 1000, "weight_grad_bytes": 4000}
    updates = {"scheduling": "mlfabric", "deadline_ns": 1000}
    training = {"layers": [layer], "dp_algorithm": "parameter_server", "servers": [2], "parameter_server": updates}
    doc = {
        "topology": {"kind": "single_switch", "hosts": 3},
        "sim": {"fast_forward": "exact"},
        "workload": {"training": training},
    }
    assert_one_line_error(tmp_path / "s.yaml", doc, "sim.fast_forward", "fast_forward off only")
