"""Collective scheduling over dimensions (workload/themis.py): the plan's rules, and the
packet-level runs it drives against the baseline and the bandwidth model."""

import numpy as np
import pytest

from conftest import scenario, simulate
from roce_emu.errors import ScenarioError
from roce_emu.results.iteration import collective_rows
from roce_emu.run.inputs import check_inputs
from roce_emu.fabric.topology import build_fabric
from roce_emu.workload import dim_timing, themis
from roce_emu.workload.collectives import split
from roce_emu.workload.stage_model import DimTiming
from roce_emu.workload.themis import chunk_order, keeps_baseline, plan


def loads_after(sizes, rates, chunks, scheduler):
    loads = [0.0] * len(sizes)
    orders = [chunk_order(loads, sizes, rates, nbytes, scheduler) for nbytes in chunks]
    return loads, orders


@pytest.mark.quick
def test_baseline_goes_through_the_dimensions_in_order():
    _, orders = loads_after([4, 2, 8], [1e11, 2e11, 5e10], [1e6] * 5, "baseline")
    assert orders == [[0, 1, 2]] * 5


@pytest.mark.quick
@pytest.mark.parametrize(
    "sizes, rates",
    [
        ([4, 4], [1e11, 1e11]),
        ([2, 8, 4], [4e11, 1e11, 5e10]),
        ([4, 4, 4], [2e11, 1e11, 1e11]),
        ([2, 2, 4, 4], [1e11] * 4),
    ],
)
def test_themis_never_plans_a_larger_load_than_the_baseline(sizes, rates):
    """The threshold rule, chunk by chunk: the largest dimension load after each chunk is at
    most the baseline's; and on these fabrics Themis balances better overall."""
    chunks = [1e6] * 64
    base_loads, _ = loads_after(sizes, rates, chunks, "baseline")
    loads = [0.0] * len(sizes)
    for nbytes in chunks:
        before = list(loads)
        chunk_order(loads, sizes, rates, nbytes, "themis_fifo")
        with_base = list(before)
        chunk_order(with_base, sizes, rates, nbytes, "baseline")
        assert max(loads) <= max(with_base) + 1e-15
    assert max(loads) <= max(base_loads)


@pytest.mark.quick
def test_greedy_puts_the_largest_piece_on_the_least_loaded_dimension():
    loads = [5.0, 1.0, 3.0]
    order = chunk_order(loads, [4, 4, 4], [1e11] * 3, 1e6, "themis_fifo")
    assert order == [1, 2, 0]


@pytest.mark.quick
@pytest.mark.parametrize("scheduler", ["baseline", "themis_fifo", "themis_scf"])
def test_plan_is_a_schedule(scheduler):
    """Every chunk's 2 D stages in sequence (reduce-scatter in some order, all-gather back); on
    each dimension one stage at a time; stages listed by start."""
    sizes, rates = [4, 2, 4], [1e11, 2e11, 1e11]
    stages = plan(sizes, DimTiming(tuple(rates), (0.0,) * 3), [1e6] * 8, scheduler)
    assert len(stages) == 8 * 6 and [s.start_s for s in stages] == sorted(s.start_s for s in stages)
    for c in range(8):
        mine = sorted((s for s in stages if s.chunk == c), key=lambda s: s.index)
        dims = [s.dim for s in mine]
        assert sorted(dims[:3]) == [0, 1, 2] and dims[3:] == dims[:3][::-1]
        assert [s.gather for s in mine] == [False] * 3 + [True] * 3
        assert all(a.start_s <= b.start_s for a, b in zip(mine, mine[1:]))
    for d in range(3):
        on = sorted((s for s in stages if s.dim == d), key=lambda s: s.start_s)
        for a, b in zip(on, on[1:]):
            assert b.start_s >= a.start_s + (sizes[d] - 1) / sizes[d] * a.nbytes * 8 / rates[d] - 1e-15


def run_all_reduce(dims, scheduler, nbytes=4_000_000, chunks=16, network=None, **topology):
    res = simulate(
        scenario(
            topology={"kind": "multi_dim", "dims": dims, **topology},
            network=network or {},
            workload={
                "collectives": [
                    {
                        "name": "ar",
                        "kind": "all_reduce",
                        "algorithm": "hierarchical",
                        "bytes": nbytes,
                        "chunks": chunks,
                        "scheduler": scheduler,
                    }
                ]
            },
        )
    )
    return res, collective_rows(res.outcome.world, res.prepared.workload)[0]


def two_dims(rate0, rate1):
    return [
        {"size": 4, "kind": "ring", "rate_gbps": rate0, "delay_ns": 500},
        {"size": 4, "kind": "switch", "rate_gbps": rate1, "delay_ns": 1000},
    ]


def test_just_enough_bandwidth_leaves_nothing_to_balance():
    """BW(dim 0) = 4 x BW(dim 1) on a 4 x 4 fabric: the baseline's loads are equal
    (2 x 3/4 x S / 4B on both), so Themis keeps the baseline's orders for every chunk, and then
    the baseline runs: the same time to the picosecond."""
    base = run_all_reduce(two_dims(400, 100), "baseline")[1]
    for scheduler in ("themis_fifo", "themis_scf"):
        row = run_all_reduce(two_dims(400, 100), scheduler)[1]
        assert row["time_ns"] == base["time_ns"]


#: the Themis paper's rings: one way round in every dimension (topology.dim_algorithms)
ONE_WAY = {"dim_algorithms": "ring"}


def test_just_enough_bandwidth_with_rings_both_ways_round():
    """The plan follows the dimensions' algorithms: with the default ring_bidir on the ring
    dimension (its two links busy), BW(dim 0) = 2 x BW(dim 1) balances the baseline's loads
    (2 x 3/4 x S / (2 x 2B) against 2 x 3/4 x S / 4B), so Themis keeps the baseline to the
    picosecond; with one-way rings the same rates leave dimension 0 twice as loaded, and the
    plan rebalances."""
    base = run_all_reduce(two_dims(200, 100), "baseline")[1]
    for scheduler in ("themis_fifo", "themis_scf"):
        assert run_all_reduce(two_dims(200, 100), scheduler)[1]["time_ns"] == base["time_ns"]
    for links, kept in (((2, 1), True), ((1, 1), False)):
        timing = DimTiming((2e11, 1e11), (0.0, 0.0), links=links)
        assert keeps_baseline([4, 4], plan([4, 4], timing, [250_000] * 16, "themis_scf")) is kept


def test_with_less_first_dimension_bandwidth_themis_wins():
    """Equal rates on a 4 x 4 fabric with one-way rings: the baseline loads dimension 0 four times as much as
    dimension 1 (its pieces are 4x larger), a model time of 2 x 3/4 x S/B against 5/4 of the
    balanced 2 x 3/4 x (S + S/4)/(2B) = 0.625, at best 1.6x: both dimensions move the same
    bytes, smallest-chunk-first is at least 1.3x faster (measured 1.44x) and FIFO at least 1.15x
    (measured 1.19x: at run time it serves the large pieces that are ready first, and the small
    ones the other dimension waits for come after them; docs/themis.md)."""
    base_res, base = run_all_reduce(two_dims(100, 100), "baseline", **ONE_WAY)
    for scheduler, least in (("themis_fifo", 1.15), ("themis_scf", 1.3)):
        _, row = run_all_reduce(two_dims(100, 100), scheduler, **ONE_WAY)
        assert float(base["time_ns"]) / float(row["time_ns"]) > least
        assert row["dim0_bytes"] == row["dim1_bytes"]
    assert base["dim0_utilization"] > 3 * base["dim1_utilization"]


def test_per_dimension_figures_against_closed_forms():
    """Baseline on 4 x 4 with 4 MB per NPU: dimension 0 moves 16 x 2 x 3/4 x 4 MB, dimension 1
    16 x 2 x 3/4 x 1 MB; utilisation is bytes x 8 over the time and over 16 x the rate x the links
    in use (the ring dimension's ring_bidir: 2); a dimension is busy no longer than the collective."""
    _, row = run_all_reduce(two_dims(100, 50), "baseline")
    assert row["dim0_bytes"] == 16 * 2 * 3 * 1_000_000 and row["dim1_bytes"] == 16 * 2 * 3 * 250_000
    t = float(row["time_ns"]) * 1e-9
    assert row["dim0_utilization"] == pytest.approx(row["dim0_bytes"] * 8 / t / (16 * 2 * 100e9), rel=1e-5)
    assert row["dim1_utilization"] == pytest.approx(row["dim1_bytes"] * 8 / t / (16 * 50e9), rel=1e-5)
    assert 0 < float(row["dim1_busy_ns"]) <= float(row["time_ns"]) + 1e-6


RING_FC_SWITCH = [
    {"size": 2, "kind": "ring", "rate_gbps": 200},
    {"size": 4, "kind": "fully_connected", "rate_gbps": 100},
    {"size": 2, "kind": "switch", "rate_gbps": 50},
]
RING_SWITCH_SWITCH = [
    {"size": 4, "kind": "ring", "rate_gbps": 100},
    {"size": 2, "kind": "switch", "rate_gbps": 200},
    {"size": 2, "kind": "switch", "rate_gbps": 100},
]
CONNECTION = {"nic": {"queue_pair": "connection"}}


@pytest.mark.parametrize(
    "dims, chunks, network",
    [
        (RING_FC_SWITCH, 8, None),
        (RING_FC_SWITCH, 16, None),
        (RING_SWITCH_SWITCH, 16, None),
        (RING_FC_SWITCH, 8, CONNECTION),
    ],
)
def test_themis_is_never_slower_than_the_baseline(dims, chunks, network):
    """The threshold rule at packet level, on 3-dimension fabrics: both Themis variants within
    3 % of the baseline or faster. With 8 chunks on the first fabric the plan gives way (kept,
    FIFO measured 0.89x and SCF 0.94x with a queue pair per flow)."""
    base = float(run_all_reduce(dims, "baseline", chunks=chunks, network=network)[1]["time_ns"])
    for scheduler in ("themis_fifo", "themis_scf"):
        assert float(run_all_reduce(dims, scheduler, chunks=chunks, network=network)[1]["time_ns"]) <= base * 1.03


@pytest.mark.parametrize(
    "dims, nbytes, chunks",
    [
        (two_dims(100, 100), 500_000, 16),  # measured: forced FIFO 0.79x, SCF 0.90x
        (RING_FC_SWITCH, 500_000, 16),  # 0.78x, 0.89x
        (two_dims(100, 100), 1_000_000, 8),  # 1.02x, 1.22x
        (two_dims(100, 100), 4_000_000, 64),  # 0.93x, 1.33x
    ],
)
def test_the_plan_gives_way_where_themis_would_be_slower(dims, nbytes, chunks, monkeypatch):
    """Where the plan keeps Themis (stage_model.py finds it no slower at run time), the run is
    faster than the baseline's; where it gives way, Themis forced to run anyway is slower, or
    faster by under 3 %. (Small collectives and many small chunks: the dimensions' queues and
    the ring steps' latency, not the bytes, decide.)"""
    base = float(run_all_reduce(dims, "baseline", nbytes=nbytes, chunks=chunks)[1]["time_ns"])
    for scheduler in ("themis_fifo", "themis_scf"):
        sc = scenario(topology={"kind": "multi_dim", "dims": dims})
        timing = dim_timing(sc, build_fabric(sc.topology))
        sizes = [d["size"] for d in dims]
        kept = not keeps_baseline(sizes, plan(sizes, timing, split(nbytes, chunks), scheduler))
        with monkeypatch.context() as m:  # Themis's plan however the model judges it
            m.setattr(themis, "_run_time_s", lambda *a: 0.0 if a[2] != "baseline" else 1.0)
            themis._plan_once.cache_clear()
            forced = float(run_all_reduce(dims, scheduler, nbytes=nbytes, chunks=chunks)[1]["time_ns"])
        themis._plan_once.cache_clear()
        if kept:
            assert forced < base
        else:
            assert forced > 0.97 * base


def test_scheduler_needs_a_hierarchical_all_reduce():
    with pytest.raises(ScenarioError) as err:
        check_inputs(
            scenario(
                topology={"kind": "multi_dim", "dims": two_dims(100, 100)},
                workload={
                    "collectives": [
                        {"kind": "all_reduce", "algorithm": "ring", "bytes": 1000, "scheduler": "themis_scf"}
                    ]
                },
            )
        )
    assert err.value.key == "workload.collectives.0.scheduler" and "hierarchical" in err.value.message
    with pytest.raises(ScenarioError) as err:
        check_inputs(
            scenario(
                topology={"kind": "multi_dim", "dims": two_dims(100, 100)},
                workload={"training": {"model": {"name": "resnet50"}, "scheduler": "themis_fifo"}},
            )
        )
    assert err.value.key == "workload.training.scheduler"
    with pytest.raises(ScenarioError, match="hierarchical needs a multi_dim, rail_optimized, torus or mesh"):
        check_inputs(
            scenario(
                topology={"kind": "single_switch", "hosts": 4},
                workload={
                    "collectives": [
                        {"kind": "all_reduce", "algorithm": "hierarchical", "bytes": 1000, "scheduler": "themis_fifo"}
                    ]
                },
            )
        )


def test_torus_runs_themis():
    """On a 4 x 4 torus whose NPUs inject at 4x the link rate, Themis balances the dimensions
    and beats the baseline (measured 1.20x). With the default NIC at the link rate every
    dimension's flows share it: the bytes it sends do not depend on the order, the plan's
    run-time model finds Themis no faster, and it gives way (the baseline runs, to the
    picosecond; forced, FIFO measured 3 % slower and SCF 1.6 % faster)."""

    def row(scheduler, tiers):
        res = simulate(
            scenario(
                topology={"kind": "torus", "dims": [4, 4], "tiers": tiers},
                workload={
                    "collectives": [
                        {
                            "kind": "all_reduce",
                            "algorithm": "hierarchical",
                            "bytes": 1_000_000,
                            "chunks": 8,
                            "scheduler": scheduler,
                        }
                    ]
                },
            )
        )
        assert res.summary["status"] == "finished"
        return collective_rows(res.outcome.world, res.prepared.workload)[0]

    fast = {"host": {"rate_gbps": 400}}
    base, scf = row("baseline", fast), row("themis_scf", fast)
    assert scf["scheduler"] == "themis_scf" and np.isclose(scf["dim0_bytes"], scf["dim1_bytes"], rtol=0.01)
    assert float(base["time_ns"]) / float(scf["time_ns"]) > 1.1
    assert row("themis_fifo", {})["time_ns"] == row("baseline", {})["time_ns"]


def _queue_rows(world):
    """The runtime queues' rows (core/tasks.py) with each task's start and finish."""
    q = world.qtask
    task = world.task[q["task"]]
    return q, task["start_ps"], task["finish_ps"]


@pytest.mark.parametrize("scheduler", ["themis_fifo", "themis_scf"])
def test_dimension_queues_serve_by_the_rule(scheduler):
    """At run time, each dimension's dispatch queue in each group serves one stage at a time: a
    stage is granted it only once the stage before it has its first ring step through, and
    among the stages waiting, by size (SCF) and then by when they became ready. Every later
    ring step on every rank runs in the order of the tickets, each after the one before it."""
    res, _ = run_all_reduce(two_dims(100, 100), scheduler)
    world = res.outcome.world
    q, start, finish = _queue_rows(world)
    assert (finish >= 0).all()
    gates = np.flatnonzero((q["queue"] >= 0) & (q["gate"] < 0))
    freed_at: dict = {}
    for i in np.flatnonzero(q["frees"] >= 0):  # the first step's join frees the gate's queue
        freed_at.setdefault(int(q["frees"][i]), []).append(int(finish[i]))
    assert len(gates) and world.queue["busy"].max() == 0
    for queue in np.unique(q["queue"][gates]):
        mine = gates[q["queue"][gates] == queue]
        mine = mine[np.argsort(q["ticket"][mine])]
        assert list(q["ticket"][mine]) == list(range(len(mine)))
        assert (np.diff(start[mine]) >= 0).all()
        free_times = sorted(freed_at[int(queue)])
        for n in range(1, len(mine)):
            b = mine[n]
            # granted no sooner than the stage before it freed the queue
            assert start[b] >= free_times[n - 1]
            # ...and ahead of no stage that was waiting and ranks before it
            for later in mine[n + 1 :]:
                if q["ready_ps"][later] < start[b]:  # it was waiting when b was granted
                    assert (q["key"][b], q["ready_ps"][b]) <= (q["key"][later], q["ready_ps"][later])
    ordered = np.flatnonzero(q["gate"] >= 0)
    assert len(ordered)
    ticket = q["ticket"][world.task[q["gate"][ordered]]["qrow"]]
    for queue in np.unique(q["queue"][ordered]):
        mine = ordered[q["queue"][ordered] == queue]
        mine = mine[np.argsort(ticket[q["queue"][ordered] == queue])]
        assert (start[mine[1:]] >= finish[mine[:-1]]).all()


def test_dimension_queues_are_the_same_however_the_run_is_sliced():
    sc = scenario(
        topology={"kind": "multi_dim", "dims": two_dims(100, 100)},
        workload={
            "collectives": [
                {"kind": "all_reduce", "algorithm": "hierarchical", "bytes": 400_000, "chunks": 8, "scheduler": s}
                for s in ("themis_fifo", "themis_scf")
            ]
        },
    )
    one, many = (simulate(sc, slice_events=n).outcome.world for n in (1 << 30, 997))
    assert np.array_equal(one.task, many.task) and np.array_equal(one.qtask, many.qtask)


def test_training_gradients_run_with_themis():
    """workload.training.scheduler drives every gradient all-reduce (four 2 MiB buckets, one at a
    time) through the runtime queues. On the equal-rate 4 x 4 fabric with one-way rings, where the baseline loads
    dimension 0 four times as much, the iteration is faster: SCF by at least 1.25x (measured
    1.38x), FIFO by at least 1.1x (measured 1.19x)."""

    def iteration(scheduler):
        res = simulate(
            scenario(
                topology={"kind": "multi_dim", "dims": two_dims(100, 100), **ONE_WAY},
                workload={
                    "training": {
                        "model": {
                            "name": "transformer",
                            "layers": 2,
                            "hidden": 512,
                            "sequence": 128,
                            "batch_per_rank": 1,
                        },
                        "dp_algorithm": "hierarchical",
                        "scheduler": scheduler,
                        "chunks": 8,
                        "bucket_bytes": 2 * 2**20,
                    }
                },
            )
        )
        rows = collective_rows(res.outcome.world, res.prepared.workload)
        assert res.summary["status"] == "finished" and len(rows) == 4
        assert {row["scheduler"] for row in rows} == {scheduler}
        return float(res.summary["iteration_ns"][0])

    base = iteration("baseline")
    assert base / iteration("themis_scf") >= 1.25
    assert base / iteration("themis_fifo") >= 1.1
