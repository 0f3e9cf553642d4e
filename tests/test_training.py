"""Training iterations: built-in model sizes, overlap of gradient all-reduces with the backward
pass, tensor-parallel collectives and pipeline sends on the critical path."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import scenario, simulate
from roce_emu.api import prepare_scenario, run
from roce_emu.config.schema import Model, Training
from roce_emu.results.iteration import _covered, _covered_per_host, collective_rows, task_rows
from roce_emu.core.paths import ser_ps
from roce_emu.workload.models import dlrm, resnet50, transformer

pytestmark = pytest.mark.quick

US = 1000  # ns


def test_resnet50_layers_match_the_reference_workload():
    """docs/model.md §8.1: 54 layers, 102,011,648 B of fp32 weight gradients, largest 9,437,184 B,
    smallest 16,384 B, conv1 37,632 B, fc1000 8,192,000 B."""
    layers = resnet50(Model(name="resnet50"))
    sizes = [layer.weight_grad_bytes for layer in layers]
    assert len(layers) == 54
    assert sum(sizes) == 102_011_648
    assert (max(sizes), min(sizes)) == (9_437_184, 16_384)
    assert sizes[0] == 37_632 and sizes[-1] == 8_192_000
    # compute from FLOPs: ResNet-50 is ~4.1 GMAC per 224x224 image forward
    model = Model(name="resnet50", batch_per_rank=1, device_tflops=1)
    forward_flops = sum(layer.forward_ns for layer in resnet50(model)) * 1e3  # ns at 1 TFLOP/s -> FLOPs
    assert forward_flops == pytest.approx(2 * 4.1e9, rel=0.03)


def test_dlrm_and_transformer_sizes():
    d = dlrm(Model(name="dlrm"))
    assert sum(layer.weight_grad_bytes for layer in d) == 3_191_808
    embedding = next(layer for layer in d if layer.name == "embedding")
    assert embedding.forward_comm.bytes == embedding.backward_comm.bytes == 98_304
    t = transformer(Model(name="transformer", layers=2, hidden=1024, sequence=512, batch_per_rank=2), tp=4)
    assert len(t) == 4
    assert t[0].forward_comm.bytes == 2 * 512 * 1024 * 2  # b s h x 2 B
    assert sum(layer.weight_grad_bytes for layer in t) == 2 * 12 * 1024 * 1024 * 2 // 4  # 12h^2 fp16 / tp


def _two_layers(grad_bytes, hosts=4, **training):
    """Per-layer all-reduces (bucket_bytes 0), as these overlap tests need."""
    training.setdefault("bucket_bytes", 0)
    return scenario(
        topology={"kind": "single_switch", "hosts": hosts},
        workload={
            "training": {
                "layers": [
                    {"name": "l0", "forward_ns": 100 * US, "backward_ns": 200 * US},
                    {"name": "l1", "forward_ns": 100 * US, "backward_ns": 400 * US, "weight_grad_bytes": grad_bytes},
                ],
                **training,
            }
        },
    )


def test_gradient_all_reduce_hidden_behind_backward():
    """l1's 1 MB gradient all-reduce starts when its backward ends (600 us) and needs ~150 us,
    while l0's backward runs for 200 us: the iteration is its 800 us of compute, nothing exposed."""
    s = simulate(_two_layers(1_000_000)).summary
    assert s["iteration_ns"] == [800 * US]
    assert s["mean_exposed_communication_ns"] == 0.0
    assert s["mean_compute_ns"] == 800 * US


def test_gradient_all_reduce_exposed_when_longer_than_backward():
    """With 8 MB the ring all-reduce (6 steps of 2 MB) outlasts l0's backward: the iteration is
    600 us of compute before it plus the all-reduce, and all of it past 800 us is exposed."""
    s = simulate(_two_layers(8_000_000)).summary
    tau = (1082 + 86) * 8 / 100e9 / 1000 * 1e9  # ns per payload byte, data and reverse ACKs
    ring = 6 * (2_000_000 * tau + 2 * US + ser_ps(1082, 100 * 10**9) / 1000)
    assert s["iteration_ns"][0] == pytest.approx(600 * US + ring, rel=0.02)
    assert s["mean_exposed_communication_ns"] == pytest.approx(s["iteration_ns"][0] - 800 * US, rel=1e-6)


def test_tensor_parallel_and_pipeline_on_the_critical_path():
    """tp = 2, pp = 2, dp = 1 on 4 hosts, compute only plus one 500 KB tensor-parallel all-reduce
    in l1's forward and 1 MB of activations between the stages each way: the iteration is the
    chain fwd l0, send, fwd l1, all-reduce, bwd l1, send, bwd l0."""
    sc = scenario(
        topology={"kind": "single_switch", "hosts": 4},
        workload={
            "training": {
                "tp": 2,
                "pp": 2,
                "pipeline_bytes": 1_000_000,
                "layers": [
                    {"name": "l0", "forward_ns": 100 * US, "backward_ns": 200 * US},
                    {
                        "name": "l1",
                        "forward_ns": 100 * US,
                        "backward_ns": 400 * US,
                        "forward_comm": {"kind": "all_reduce", "bytes": 500_000},
                    },
                ],
            }
        },
    )
    s = simulate(sc).summary
    alpha = 2 * US + ser_ps(1082, 100 * 10**9) / 1000
    send = alpha + 1_000_000 * 1082 * 8 / 100e9 * 1e9 / 1000  # one flow, its ACKs on the other link
    ar = 2 * (alpha + 250_000 * (1082 + 86) * 8 / 100e9 * 1e9 / 1000)  # 2 ranks: 2 steps of N/2
    predicted = 800 * US + 2 * send + ar
    assert s["iteration_ns"][0] == pytest.approx(predicted, rel=0.01)


def test_training_workloads_are_deterministic():
    sc = _two_layers(2_000_000, hosts=4, chunks=2)
    a, b = simulate(sc), simulate(sc, slice_events=1009)
    assert a.rows == b.rows and a.summary["iteration_ns"] == b.summary["iteration_ns"]


def test_resnet50_gradients_go_in_ddp_buckets():
    """Default 25 MiB buckets (PyTorch DDP's bucket_cap_mb): backward-ordered, contiguous, each
    closed once it holds 25 MiB (the first once it holds 1 MiB: fc1000 alone), the rest in the last;
    together every gradient byte once."""
    sc = scenario(
        topology={"kind": "single_switch", "hosts": 2}, workload={"training": {"model": {"name": "resnet50"}}}
    )
    p = prepare_scenario(sc)
    sizes = [c.nbytes for c in p.workload.collectives]
    layers = [layer for layer in resnet50(Model(name="resnet50")) if layer.weight_grad_bytes][::-1]
    assert sum(sizes) == sum(layer.weight_grad_bytes for layer in layers) == 102_011_648
    cap = 25 * 1024 * 1024
    assert sizes[0] == 8_192_000  # fc1000's gradients fill DDP's 1 MiB first bucket alone
    assert all(size >= cap for size in sizes[1:-1]) and sizes[-1] < cap
    # each bucket is a run of consecutive layers in backward order, named by its first and last
    i = 0
    for c in p.workload.collectives:
        first, last = c.name.removeprefix("grad_ar.").split("-") if "-" in c.name else (c.name[8:],) * 2
        assert layers[i].name == first
        total = 0
        while True:
            total += layers[i].weight_grad_bytes
            i += 1
            if layers[i - 1].name == last:
                break
        assert total == c.nbytes
        # closed by its last layer: without it, the bucket was still under the cap
        assert total - layers[i - 1].weight_grad_bytes < cap or c is p.workload.collectives[-1]
    assert i == len(layers)


def test_a_bucket_starts_when_its_last_layer_backward_ends():
    """Three layers of 1 MB gradients, 1.5 MB buckets: l2 and l1 share a bucket sent when bwd.l1
    ends (l2's gradients wait for it); l0 goes alone when bwd.l0 ends. bucket_bytes 0 sends
    each layer's alone."""

    def three(bucket_bytes):
        return scenario(
            topology={"kind": "single_switch", "hosts": 4},
            workload={
                "training": {
                    "bucket_bytes": bucket_bytes,
                    "concurrent_all_reduces": True,  # each bucket starts when it is ready (see below)
                    "layers": [
                        {
                            "name": f"l{i}",
                            "forward_ns": 100 * US,
                            "backward_ns": 200 * US,
                            "weight_grad_bytes": 1_000_000,
                        }
                        for i in range(3)
                    ],
                }
            },
        )

    def run_three(bucket_bytes):
        prepared = prepare_scenario(three(bucket_bytes))
        world = run(prepared, write=False, progress=False).outcome.world
        return task_rows(world, prepared.workload), collective_rows(world, prepared.workload)

    tasks, colls = run_three(1_500_000)
    tasks = {(r["name"], r["kind"]): r for r in tasks}
    colls = {c["name"]: c for c in colls}
    assert set(colls) == {"grad_ar.l2-l1", "grad_ar.l0"}
    assert colls["grad_ar.l2-l1"]["bytes"] == 2_000_000 and colls["grad_ar.l0"]["bytes"] == 1_000_000
    bwd_end = {n: float(tasks[(f"bwd.{n}", "compute")]["finish_ns"]) for n in ("l0", "l1", "l2")}
    assert float(colls["grad_ar.l2-l1"]["start_ns"]) == bwd_end["l1"] == 300 * US + 400 * US
    assert float(colls["grad_ar.l0"]["start_ns"]) == bwd_end["l0"] == 300 * US + 600 * US
    assert [c["name"] for c in run_three(0)[1]] == ["grad_ar.l2", "grad_ar.l1", "grad_ar.l0"]


def test_the_first_bucket_closes_at_ddps_1_mib():
    """PyTorch DDP's first bucket holds 1 MiB (first_bucket_bytes), the later ones bucket_bytes: four
    layers of 600 kB go as l3-l2 (1.2 MB, past 1 MiB) and then l1-l0 at the end of the backward pass.
    first_bucket_bytes as large as bucket_bytes sends all four in one; gpt and moe models (Megatron-LM)
    have no small first bucket."""

    def names(**training):
        prepared = prepare_scenario(
            scenario(
                topology={"kind": "single_switch", "hosts": 2},
                workload={
                    "training": {
                        "layers": [
                            {"name": f"l{i}", "forward_ns": US, "backward_ns": US, "weight_grad_bytes": 600_000}
                            for i in range(4)
                        ],
                        **training,
                    }
                },
            )
        )
        world = run(prepared, write=False, progress=False).outcome.world
        return [c["name"] for c in collective_rows(world, prepared.workload)]

    assert names() == ["grad_ar.l3-l2", "grad_ar.l1-l0"]
    assert names(first_bucket_bytes=25 * 2**20) == ["grad_ar.l3-l0"]
    assert names(bucket_bytes=700_000) == ["grad_ar.l3-l2", "grad_ar.l1-l0"]  # the first at most bucket_bytes
    assert names(bucket_bytes=500_000) == ["grad_ar.l3", "grad_ar.l2", "grad_ar.l1", "grad_ar.l0"]
    gpt = Training.model_validate({"model": {"preset": "gpt3-175b"}, "bucket_bytes": 4 * 2**20})
    assert gpt.bucket_caps() == (4 * 2**20, 4 * 2**20)
    assert gpt.model_copy(update={"first_bucket_bytes": 2**20}).bucket_caps() == (2**20, 4 * 2**20)


def _quick_buckets(concurrent: bool):
    """Three layers of 1 MB gradients whose backward takes 10 us each: all three per-layer
    all-reduces are ready within 30 us, and each takes about 135 us."""
    sc = scenario(
        topology={"kind": "single_switch", "hosts": 4},
        workload={
            "training": {
                "bucket_bytes": 0,
                "concurrent_all_reduces": concurrent,
                "layers": [
                    {"name": f"l{i}", "forward_ns": 100 * US, "backward_ns": 10 * US, "weight_grad_bytes": 1_000_000}
                    for i in range(3)
                ],
            }
        },
    )
    prepared = prepare_scenario(sc)
    result = run(prepared, write=False, progress=False)
    world = result.outcome.world
    sends = []  # per all-reduce, in launch order: {host: (first flow start, last flow finish)} in ps
    for c in prepared.workload.collectives:
        ids = np.asarray(c.flows)
        src = world.flow["src"][ids]
        start, finish = world.task["start_ps"][ids], world.task["finish_ps"][ids]
        sends.append({h: (int(start[src == h].min()), int(finish[src == h].max())) for h in set(src.tolist())})
    return result.summary, sends


def test_gradient_all_reduces_run_one_at_a_time_as_on_one_nccl_stream():
    """By default a rank starts its next gradient all-reduce only when its part of the one
    before is done (DDP's process group runs its collectives in order on one NCCL stream), so
    the iteration is the forward pass, the first backward and three all-reduces back to back.
    concurrent_all_reduces lets them run at once: each host then sends for two at a time."""
    summary, sends = _quick_buckets(concurrent=False)
    for before, after in zip(sends, sends[1:]):
        for h in after:
            assert after[h][0] >= before[h][1]
    tau = (1082 + 86) * 8 / 100e9 / 1000 * 1e9  # ns per payload byte, data and reverse ACKs
    ring = 6 * (250_000 * tau + 2 * US + ser_ps(1082, 100 * 10**9) / 1000)
    assert summary["iteration_ns"][0] == pytest.approx(300 * US + 10 * US + 3 * ring, rel=0.02)

    _, sends = _quick_buckets(concurrent=True)
    assert any(after[h][0] < before[h][1] for before, after in zip(sends, sends[1:]) for h in after)


@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 100), st.integers(-5, 40)), max_size=40))
def test_busy_time_per_host_in_bulk_is_the_union_of_its_intervals(rows):
    """The rank timeline unites every host's compute and flow intervals in one vectorised pass;
    it must give, per host, the union that merging the host's intervals one by one gives."""
    host = np.array([h for h, _, _ in rows], np.int64)
    start = np.array([s for _, s, _ in rows], np.int64)
    end = start + np.array([d for _, _, d in rows], np.int64)
    want = {}
    for h in set(host.tolist()):
        merged = _covered([(int(s), int(e)) for s, e, x in zip(start, end, host) if x == h])
        if merged:
            want[h] = merged
    assert _covered_per_host(host, start, end) == want


def test_a_host_whose_tasks_take_no_time_is_idle_for_the_whole_iteration():
    """Host 3 only runs a zero-length compute task: the timeline still tiles its iteration,
    all of it idle."""
    from roce_emu.results.iteration import rank_timeline

    sc = scenario(
        topology={"kind": "single_switch", "hosts": 4},
        workload={
            "compute": [{"name": "nothing", "hosts": [3], "duration_ns": 0}],
            "collectives": [{"name": "ar", "kind": "all_reduce", "hosts": [0, 1, 2], "bytes": 300_000}],
        },
    )
    result = simulate(sc)
    timeline = rank_timeline(result.outcome.world, result.prepared.workload)
    host3 = [(state, s, e) for _, h, state, s, e, _ in timeline if h == 3]
    end = max(e for _, _, _, _, e, _ in timeline)
    assert host3 == [("idle", 0, end)]


def _pipeline(m, schedule, pp=4, f_ns=100_000.0, b_ns=200_000.0, **extra):
    """pp stages of one layer each on pp hosts, compute only: f and b per rank's whole batch."""
    layers = [{"name": f"l{i}", "forward_ns": f_ns, "backward_ns": b_ns} for i in range(pp)]
    return scenario(
        topology={"kind": "single_switch", "hosts": pp},
        workload={"training": {"layers": layers, "pp": pp, "micro_batches": m, "schedule": schedule, **extra}},
    )


@pytest.mark.parametrize("schedule", ["1f1b", "gpipe"])
@pytest.mark.parametrize("m", [1, 8])
def test_micro_batches_fill_the_pipeline_as_the_closed_form_says(m, schedule):
    """Uniform stages take (m + pp - 1) (f + b) / m with either schedule: the bubble shrinks from
    pp (f + b) with one micro-batch to 11/8 (f + b) with eight on four stages."""
    res = simulate(_pipeline(m, schedule))
    assert res.summary["iteration_ns"][0] == pytest.approx((m + 4 - 1) * 300_000.0 / m, abs=1e-3)


def _stage0_spans(res):
    """Stage 0's (kind, micro-batch) -> (start, finish) in ns, from the tasks table."""
    spans = {}
    for r in task_rows(res.outcome.world, res.prepared.workload):
        name = r["name"]
        if r["kind"] == "compute" and r["host"] == 0 and name.startswith(("fwd.", "bwd.")):
            spans[(name[0], int(name.rsplit(".mb", 1)[1]))] = (float(r["start_ns"]), float(r["finish_ns"]))
    return spans


def test_1f1b_holds_at_most_pp_micro_batches_where_gpipe_holds_all():
    """On stage 0, 1F1B runs pp forwards, then alternates: at most pp micro-batches have run their
    forward and not yet their backward (their activations are held). GPipe runs all m forwards
    first and holds all m."""
    m, pp = 8, 4
    held = {}
    for schedule in ("1f1b", "gpipe"):
        spans = _stage0_spans(simulate(_pipeline(m, schedule)))
        events = sorted([(spans[("f", j)][1], 1) for j in range(m)] + [(spans[("b", j)][0], -1) for j in range(m)])
        held[schedule] = max(np.cumsum([e for _, e in events]))
        if schedule == "1f1b":
            assert spans[("f", pp)][0] >= spans[("b", 0)][1]  # the pp-th forward waits for the first backward
    assert held == {"1f1b": pp, "gpipe": m}


def test_micro_batches_cut_the_collectives_and_sends():
    """With m micro-batches each tensor-parallel all-reduce and pipeline send carries 1/m of the
    bytes, m times; the gradient all-reduce stays whole, once, after the last backward."""
    layers = [
        {
            "name": f"l{i}",
            "forward_ns": 10_000.0,
            "backward_ns": 20_000.0,
            "weight_grad_bytes": 400_000,
            "forward_comm": {"kind": "all_reduce", "bytes": 800_000},
        }
        for i in range(2)
    ]
    res = simulate(
        scenario(
            topology={"kind": "single_switch", "hosts": 8},
            workload={
                "training": {
                    "layers": layers,
                    "tp": 2,
                    "pp": 2,
                    "dp": 2,
                    "micro_batches": 4,
                    "pipeline_bytes": 400_000,
                    "bucket_bytes": 0,
                }
            },
        )
    )
    coll = collective_rows(res.outcome.world, res.prepared.workload)
    tp = [c for c in coll if c["name"].startswith("fwd_comm.")]
    dp = [c for c in coll if c["name"].startswith("grad_ar.")]
    assert {c["bytes"] for c in tp} == {200_000} and len(tp) == 2 * 4 * 2  # layers x micro-batches x groups
    assert {c["bytes"] for c in dp} == {400_000} and len(dp) == 2 * 2  # layers x tp groups, once each
    sends = [r for r in task_rows(res.outcome.world, res.prepared.workload) if r["name"].startswith("pipe_")]
    assert {int(r["bytes"]) for r in sends} == {100_000} and len(sends) == 2 * 4 * 4  # ways x mbs x pairs


def test_a_layer_pass_runs_its_steps_in_order_each_over_its_own_group():
    """The builder's extension point: a layer's pass is any sequence of compute and collectives,
    each over its own scope's groups (tp: ranks differing in t; dp: in d), one after the other;
    the layer's gradients go to their bucket after the backward's last compute, not after the
    collectives that follow it."""
    from roce_emu.config.schema import Training
    from roce_emu.workload.training import Compute, Exchange, LayerPasses, TrainingBuilder

    spec = Training(layers=[{"name": "only"}], tp=2, dp=2, hosts=[10, 11, 12, 13])
    builder = TrainingBuilder(spec, hosts=[10, 11, 12, 13], n_hosts=16, source="t.yaml")

    def exchange(name, kind, group):
        return Exchange(name, kind, group, 4096, "ring", {"name": name})

    builder.layers = [
        LayerPasses(
            "moe",
            forward=(
                exchange("dispatch", "all_to_all", "dp"),
                Compute("experts", 1.0, {}),
                exchange("combine", "all_to_all", "dp"),
                exchange("tp_ar", "all_reduce", "tp"),
            ),
            backward=(Compute("experts_bwd", 2.0, {}), exchange("tp_ar_bwd", "all_reduce", "tp")),
            grad_bytes=1 << 20,
        )
    ]
    items = {item.name: item for item in builder.build()}
    order = ["dispatch", "experts", "combine", "tp_ar", "experts_bwd", "tp_ar_bwd"]
    assert list(items)[: len(order)] == order
    assert all(items[b].after == [a] for a, b in zip(order, order[1:]))
    tp_groups, dp_groups = [[10, 11], [12, 13]], [[10, 12], [11, 13]]  # rank t + 2 d on hosts[rank]
    assert items["tp_ar"].groups == items["tp_ar_bwd"].groups == tp_groups
    assert items["dispatch"].groups == items["combine"].groups == dp_groups
    assert items["experts"].hosts == [10, 11, 12, 13]
    reduce = items["grad_ar.moe"]
    assert (reduce.after, reduce.groups, reduce.nbytes) == (["experts_bwd"], dp_groups, 1 << 20)
