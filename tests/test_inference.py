"""Distributed inference (workload.inference): the activations exchanged per layer against the
partition, the requests' Poisson arrivals, a request's latency on an idle fabric against its
closed form, the latency percentiles, an inference job beside a training job, and bad input.

The closed form: two workers on one switch, the exchange matrices sending each layer's
activations one way only, alternating (worker 0 to 1, then 1 to 0, ...). Each layer then waits
for the flow before it, and nothing else shares a link with it (the compute between two flows
lets the previous flow's last ACK pass), so a request takes the sum of its flows' times (the
last byte at the receiver: back-to-back frames through a store-and-forward switch) and of its
layers' compute.
"""

import numpy as np
import pytest

from conftest import assert_one_line_error, cli, scenario, simulate
from roce_emu.core.paths import ser_ps
from roce_emu.results.requests import latency_summary
from roce_emu.run.inputs import check_inputs
from roce_emu.units import format_ps_as_ns, ns_to_ps
from roce_emu.workload.inference import arrivals_ns
from roce_emu.workload.jobs import job_scenario
from roce_emu.workload.dag import ROLE_CODE, ROLE_COMPUTE

RATE_BPS = 100e9
PROP_PS = 1_000_000  # the default link delay, 1 us


def inference(topology_hosts=4, seed=1, **spec):
    base = {"layers": [64, 128, 128, 32], "workers": 4, "requests_per_s": 1e5, "duration_ns": 50_000}
    base.update(spec)
    return scenario(
        seed=seed, topology={"kind": "single_switch", "hosts": topology_hosts}, workload={"inference": base}
    )


def received_bytes(workload) -> dict[tuple[int, int], dict[int, int]]:
    """{(request, layer): {receiving host: bytes}} of the activation flows."""
    out: dict = {}
    tasks, flows = workload.tasks, workload.flows
    for k in range(len(flows)):
        layer = int(tasks.name(k).removeprefix("inference.layer"))
        cell = out.setdefault((int(tasks.iteration[k]), layer), {})
        cell[int(flows.dst[k])] = cell.get(int(flows.dst[k]), 0) + int(flows.size_bytes[k])
    return out


@pytest.mark.parametrize("batch, bytes_per_value", [(1, 2), (8, 4)])
def test_contiguous_each_worker_receives_the_others_share_of_every_layer(batch, bytes_per_value):
    layers, W = [64, 128, 128, 32], 4
    workload = check_inputs(inference(batch=batch, bytes_per_value=bytes_per_value)).workload
    got = received_bytes(workload)
    assert len(workload.requests) > 1 and len(got) == len(workload.requests) * (len(layers) - 1)
    for (_, layer), per_host in got.items():
        expected = layers[layer] * (W - 1) // W * batch * bytes_per_value
        assert per_host == {h: expected for h in range(W)}
    # every pair of workers, once per layer and request
    assert len(workload.flows) == len(workload.requests) * (len(layers) - 1) * W * (W - 1)


@pytest.mark.parametrize("fraction", [0.25, 0.5, 1.0])
def test_repurpose_scales_the_bytes_each_worker_sends_by_the_cross_fraction(fraction):
    contiguous = received_bytes(check_inputs(inference()).workload)
    pruned = received_bytes(check_inputs(inference(partition="repurpose", cross_fraction=fraction)).workload)
    assert pruned.keys() == contiguous.keys()
    for key, per_host in contiguous.items():
        assert pruned[key] == {h: b * fraction for h, b in per_host.items()}


def test_an_exchange_matrix_sets_each_pairs_activations():
    exchange = [[[0, 3], [0, 0]], [[0, 0], [5, 0]]]
    workload = check_inputs(
        inference(topology_hosts=2, layers=[8, 8, 8], workers=2, exchange=exchange, batch=2)
    ).workload
    flows = workload.flows
    per_request = sorted(zip(flows.src.tolist(), flows.dst.tolist(), flows.size_bytes.tolist()))[
        :: len(workload.requests)
    ]
    assert per_request == [(0, 1, 3 * 2 * 2), (1, 0, 5 * 2 * 2)]


def test_compute_from_flops_is_each_workers_share_of_the_dense_layer():
    layers, W, batch, tflops = [64, 128, 32], 4, 2, 50.0
    workload = check_inputs(inference(layers=layers, batch=batch, device_tflops=tflops)).workload
    tasks = workload.tasks
    compute = np.flatnonzero(tasks.role == ROLE_CODE[ROLE_COMPUTE])
    for k in compute.tolist():
        layer = int(tasks.name(k).removeprefix("inference.layer"))
        flops = 2 * batch * (layers[layer] // W) * layers[layer - 1]
        assert tasks.duration_ps[k] == round(flops / tflops)
    assert len(compute) == len(workload.requests) * (len(layers) - 1) * W


def arrivals_ps(sc) -> np.ndarray:
    workload = check_inputs(sc).workload
    return workload.tasks.earliest_ps[workload.requests.first]


def test_poisson_arrivals_are_the_same_for_a_seed_and_differ_between_seeds():
    a, b, c = (arrivals_ps(inference(seed=s, requests_per_s=1e6, duration_ns=200_000)) for s in (7, 7, 8))
    assert np.array_equal(a, b)
    assert not np.array_equal(a[: min(len(a), len(c))], c[: min(len(a), len(c))])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_poisson_arrival_counts_and_gaps_are_within_statistical_bounds(seed):
    rate, duration_ns, start_ns = 2e7, 100_000, 30_000  # 2000 arrivals expected
    t = arrivals_ps(
        inference(layers=[4, 4], seed=seed, requests_per_s=rate, duration_ns=duration_ns, start_ns=start_ns)
    )
    expected = rate * duration_ns * 1e-9
    assert abs(len(t) - expected) < 5 * np.sqrt(expected)
    assert t.min() >= start_ns * 1000 and t.max() < (start_ns + duration_ns) * 1000
    assert (np.diff(t) >= 0).all()
    mean_gap_ns = np.diff(t).mean() / 1000
    assert abs(mean_gap_ns - 1e9 / rate) < 5 * (1e9 / rate) / np.sqrt(len(t))


def flow_time_ps(size: int, links=2, mtu=1000, hdr=62, ifg=20) -> int:
    """A flow's time to its receiver's last byte on an idle path of equal links: back-to-back
    frames, the last one store-and-forward through every switch (tests/test_fct.py)."""
    n = -(-size // mtu)
    s = ser_ps(mtu + hdr + ifg, RATE_BPS)
    s_last = ser_ps(size - (n - 1) * mtu + hdr + ifg, RATE_BPS)
    if n == 1:  # one frame, stored and forwarded whole at every switch
        return links * (s_last + PROP_PS)
    return (n + links - 2) * s + s_last + links * PROP_PS


def test_a_request_on_an_idle_fabric_takes_its_flows_and_its_compute():
    values = [700, 2500, 40]  # activations per layer, sent one way, alternating
    exchange = [[[0, v], [0, 0]] if i % 2 == 0 else [[0, 0], [v, 0]] for i, v in enumerate(values)]
    compute_ns = [5_000, 7_000, 3_000]
    sc = inference(
        topology_hosts=2,
        layers=[1400, 5000, 80, 64],
        workers=2,
        exchange=exchange,
        compute_ns=compute_ns,
        requests_per_s=5e3,
        duration_ns=2_000_000,
    )
    result = simulate(sc)
    expected_ps = sum(flow_time_ps(v * 2) for v in values) + sum(compute_ns) * 1000
    arrival, finish = (np.array(result.tables()["requests.csv"][1])[:, j].astype(float) for j in (1, 2))
    # the requests alone on the fabric: the one before finished before they came, the next came after they finished
    alone = (np.append(-1, finish[:-1]) < arrival) & (finish < np.append(arrival[1:], np.inf))
    assert alone.sum() >= 5
    latency_ps = np.round((finish - arrival) * 1000).astype(np.int64)
    assert (latency_ps[alone] == expected_ps).all()
    summary = result.summary["inference"]
    assert summary["finished"] == summary["requests"] == len(arrival)
    if alone.all():
        for key in ("latency_mean_ns", "latency_p50_ns", "latency_p90_ns", "latency_p99_ns"):
            assert summary[key] == pytest.approx(expected_ps / 1000, abs=1e-6)


def test_latency_percentiles_interpolate_between_the_nearest_ranks():
    got = latency_summary(np.arange(1, 101) * 1000, 102)  # 1 to 100 ns, two requests unfinished
    assert got == {
        "requests": 102,
        "finished": 100,
        "latency_mean_ns": 50.5,
        "latency_p50_ns": 50.5,
        "latency_p90_ns": pytest.approx(90.1),
        "latency_p99_ns": pytest.approx(99.01),
    }
    assert latency_summary(np.array([4000]), 1)["latency_p99_ns"] == 4.0
    none = latency_summary(np.zeros(0), 3)
    assert none["finished"] == 0 and none["latency_p50_ns"] is None and none["latency_mean_ns"] is None


def test_load_queues_requests_behind_each_other():
    """The same model at a rate its devices cannot keep up with: requests wait, so the tail grows."""
    base = {"layers": [256, 1024, 256], "device_tflops": 0.2, "duration_ns": 200_000}
    light = simulate(inference(requests_per_s=2e4, **base)).summary["inference"]
    heavy = simulate(inference(requests_per_s=1e6, **base)).summary["inference"]
    assert heavy["finished"] == heavy["requests"] > light["requests"]
    assert heavy["latency_p99_ns"] > 2 * light["latency_p99_ns"]


def test_a_workers_device_computes_one_layer_at_a_time_oldest_request_first():
    """Requests closer together than their compute, no exchange: each worker's compute tasks
    never overlap, and they run in the order of the requests' arrivals per layer."""
    sc = inference(
        topology_hosts=2,
        layers=[8, 8, 8],
        workers=2,
        exchange=[[[0, 0], [0, 0]]] * 2,
        compute_ns=[3_000, 5_000],
        requests_per_s=1e6,
        duration_ns=20_000,
    )
    result = simulate(sc)
    world, tasks = result.outcome.world, result.prepared.workload.tasks
    compute = np.flatnonzero(tasks.role == ROLE_CODE[ROLE_COMPUTE])
    for host in (0, 1):
        mine = compute[tasks.host[compute] == host]
        start, finish = world.task["start_ps"][mine], world.task["finish_ps"][mine]
        order = np.argsort(start)
        assert (start[order][1:] >= finish[order][:-1]).all(), "one layer at a time"
        for layer in (1, 2):
            of_layer = order[[tasks.name(k) == f"inference.layer{layer}" for k in mine[order]]]
            assert (np.diff(tasks.iteration[mine[of_layer]]) > 0).all(), "oldest request first"
    summary = result.summary["inference"]
    assert summary["finished"] == summary["requests"] > 5
    assert summary["latency_p99_ns"] > 3 * 8_000, "requests waited for the device"


def test_an_inference_job_runs_beside_a_training_job_on_its_own_hosts():
    start_ns = 20_000
    layer = {"name": "l0", "forward_ns": 10_000, "backward_ns": 20_000, "weight_grad_bytes": 200_000}
    sc = scenario(
        topology={"kind": "single_switch", "hosts": 6},
        jobs=[
            {"name": "train", "hosts": [0, 1], "workload": {"training": {"layers": [layer]}, "iterations": 2}},
            {
                "name": "serve",
                "hosts": [2, 3, 4, 5],
                "start_ns": start_ns,
                "workload": {
                    "inference": {"layers": [64, 64, 64], "workers": 4, "requests_per_s": 1e5, "duration_ns": 50_000}
                },
            },
        ],
    )
    result = simulate(sc)
    workload = result.prepared.workload
    serve = workload.job[: len(workload.flows)] == 1
    assert set(workload.flows.src[serve]) | set(workload.flows.dst[serve]) == {2, 3, 4, 5}
    columns, rows = result.tables()["requests.csv"]
    assert columns[-1] == "job" and {row[-1] for row in rows} == {"serve"}
    # the job's arrivals count from its start: those it draws from its own seed, shifted
    job = job_scenario(sc, 1, [2, 3, 4, 5], "<test>")
    drawn_ps = np.array([ns_to_ps(t) for t in arrivals_ns(job.workload.inference, job.seed)])
    assert [row[1] for row in rows] == [format_ps_as_ns(t) for t in (drawn_ps + start_ns * 1000).tolist()]
    jobs = {job["job"]: job for job in result.summary["jobs"]}
    assert jobs["serve"]["inference"]["finished"] == len(rows)
    assert "inference" not in jobs["train"] and len(jobs["train"]["iteration_ns"]) == 2


@pytest.mark.parametrize(
    "spec, key, needle",
    [
        ({"workers": 9}, "workload.inference.workers", "9 is not allowed: the topology has 4 hosts"),
        ({"partition": "repurpose", "cross_fraction": 0}, "workload.inference.cross_fraction", "greater than 0"),
        ({"partition": "repurpose", "cross_fraction": 1.5}, "workload.inference.cross_fraction", "less than or equal"),
        ({"partition": "repurpose"}, "workload.inference.cross_fraction", "required by partition repurpose"),
        ({"cross_fraction": 0.5}, "workload.inference.cross_fraction", "partition repurpose only"),
        ({"layers": []}, "workload.inference.layers", "at least 2"),
        ({"layers": [16]}, "workload.inference.layers", "at least 2"),
        ({"hosts": [0, 1]}, "workload.inference.hosts", "one per worker"),
        ({"hosts": [0, 1, 2, 7]}, "workload.inference.hosts.3", "7 is not allowed"),
        ({"exchange": [[[0]]]}, "workload.inference.exchange", "one per layer but the last"),
        ({"compute_ns": [1], "device_tflops": 1}, "workload.inference.compute_ns", "not allowed beside device_tflops"),
    ],
)
def test_bad_inference_is_one_line_naming_the_key(tmp_path, spec, key, needle):
    base = {"layers": [8, 8, 8], "workers": 4, "requests_per_s": 1e5, "duration_ns": 10_000}
    doc = {"topology": {"kind": "single_switch", "hosts": 4}, "workload": {"inference": {**base, **spec}}}
    assert_one_line_error(tmp_path / "bad.yaml", doc, key, needle)


def test_an_inference_job_with_more_workers_than_hosts_is_refused_at_its_key(tmp_path):
    spec = {"layers": [8, 8], "workers": 3, "requests_per_s": 1e5, "duration_ns": 10_000}
    doc = {
        "topology": {"kind": "single_switch", "hosts": 4},
        "jobs": [{"name": "serve", "hosts": [1, 2], "workload": {"inference": spec}}],
    }
    assert_one_line_error(tmp_path / "bad.yaml", doc, "jobs.0.workload.inference.workers", "the job runs on 2 hosts")


def test_bad_inference_exits_with_code_2(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(
        "topology: {kind: single_switch, hosts: 2}\n"
        "workload: {inference: {layers: [8, 8], workers: 3, requests_per_s: 1, duration_ns: 1}}\n"
    )
    done = cli("validate", path)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "workload.inference.workers" in done.stderr
