"""Stragglers and compute jitter: slower ranks, random compute times, and how a late rank holds
back a synchronous data-parallel iteration.

The closed form: with a ring All-Reduce of two ranks after the backward pass, neither rank can
send before both have entered the collective (each waits for the other's buffers), so the
All-Reduce starts when the straggler's compute ends and runs as it would have without it. Every
rank's iteration is then longer by exactly the straggler's extra compute, (factor - 1) x
(forward + backward), to the picosecond.
"""

import math

import numpy as np
import pytest
import yaml

from conftest import assert_one_line_error, scenario, simulate
from roce_emu.api import prepare, prepare_scenario
from roce_emu.errors import ScenarioError
from roce_emu.workload.dag import ROLE_CODE, ROLE_FLOW

FORWARD_NS, BACKWARD_NS = 20_000, 40_000


def training(p=2, iterations=3, queue_pair="flow", **top):
    """One layer trained data-parallel on p ranks of one switch: forward, backward, then its
    gradients' ring All-Reduce (compute and communication do not overlap)."""
    layer = {"name": "l0", "forward_ns": FORWARD_NS, "backward_ns": BACKWARD_NS, "weight_grad_bytes": 400_000}
    return scenario(
        topology={"kind": "single_switch", "hosts": p},
        network={"nic": {"queue_pair": queue_pair}},
        workload={"iterations": iterations, "training": {"layers": [layer]}},
        **top,
    )


def rank_ends_ps(result) -> np.ndarray:
    """[iteration][rank]: when each rank's part of each iteration ended."""
    finish = result.outcome.world.task["finish_ps"]
    ends = result.prepared.workload.iteration_ends
    return np.array([[finish[e[r]] for r in sorted(e)] for e in ends], np.int64)


@pytest.mark.parametrize("queue_pair", ["flow", "connection"])
@pytest.mark.parametrize("rank", [0, 1])
def test_a_twice_slower_rank_delays_every_ranks_iteration_by_its_extra_compute(queue_pair, rank):
    factor = 2
    base = simulate(training(queue_pair=queue_pair))
    slow = simulate(training(queue_pair=queue_pair, stragglers=[{"rank": rank, "factor": factor}]))
    extra_ps = (factor - 1) * (FORWARD_NS + BACKWARD_NS) * 1000
    before, after = rank_ends_ps(base), rank_ends_ps(slow)
    iterations = np.arange(1, len(before) + 1)[:, None]
    assert np.array_equal(after - before, iterations * extra_ps * np.ones_like(before))
    assert slow.summary["iteration_ns"] == [t + extra_ps / 1000 for t in base.summary["iteration_ns"]]
    assert slow.summary["stragglers"] == [{"rank": rank, "host": rank, "factor": factor}]


def test_a_rank_sends_and_receives_nothing_of_a_collective_before_it_enters_it():
    """Four ranks, rank 1 late: the others go on with what does not pass through it, but no flow
    from or to rank 1 starts before its backward pass ends."""
    result = simulate(training(p=4, iterations=1, stragglers=[{"rank": 1, "factor": 3}]))
    world, tasks = result.outcome.world, result.prepared.workload.tasks
    entered = 3 * (FORWARD_NS + BACKWARD_NS) * 1000
    flows = np.flatnonzero(tasks.role == ROLE_CODE[ROLE_FLOW])
    src, dst = result.prepared.workload.flows.src[flows], result.prepared.workload.flows.dst[flows]
    start = world.task["start_ps"][flows]
    touching = (src == 1) | (dst == 1)
    assert (start[touching] >= entered).all()
    assert (start[~touching] < entered).any(), "the ranks that entered go on meanwhile"


def test_a_straggler_sets_every_ranks_pace():
    """Four ranks on ordered connections: from the second iteration on, each rank's iterations
    are as long as the straggler's, which are its compute and its own part of the All-Reduce."""
    result = simulate(training(p=4, iterations=4, queue_pair="connection", stragglers=[{"rank": 2, "factor": 2}]))
    periods = np.diff(rank_ends_ps(result), axis=0)[1:]
    assert (periods == periods[0, 2]).all()
    assert periods[0, 2] > 2 * (FORWARD_NS + BACKWARD_NS) * 1000


def compute_durations(sc, name=None):
    """{host: durations (ps) of its compute tasks, in task order} of the built workload."""
    tasks = prepare_scenario(sc).workload.tasks
    out: dict[int, list[int]] = {}
    for k in np.flatnonzero(tasks.host >= 0):
        if name is None or tasks.name(k) == name:
            out.setdefault(int(tasks.host[k]), []).append(int(tasks.duration_ps[k]))
    return out


def compute_items(hosts=8, iterations=2, **top):
    return scenario(
        topology={"kind": "single_switch", "hosts": hosts},
        workload={"iterations": iterations, "compute": [{"name": "c", "duration_ns": 1000.5}]},
        **top,
    )


def test_a_fraction_of_ranks_is_chosen_by_the_seed():
    hosts = 16
    picked = {}
    for seed in (1, 2, 3):
        sc = compute_items(hosts, stragglers=[{"fraction": 0.25, "factor": 1.5}], seed=seed)
        slow = {h for h, d in compute_durations(sc).items() if d == [1_500_750, 1_500_750]}
        rest = {h for h, d in compute_durations(sc).items() if d == [1_000_500, 1_000_500]}
        assert len(slow) == 4 and len(rest) == hosts - 4
        assert prepare_scenario(sc).workload.stragglers == [{"rank": h, "host": h, "factor": 1.5} for h in sorted(slow)]
        picked[seed] = slow
    again = compute_items(hosts, stragglers=[{"fraction": 0.25, "factor": 1.5}], seed=2)
    assert {h for h, d in compute_durations(again).items() if d[0] == 1_500_750} == picked[2]
    assert len({frozenset(s) for s in picked.values()}) > 1, "other seeds pick other ranks"


def test_entries_that_pick_the_same_rank_multiply_and_ranks_follow_the_training_hosts():
    sc = training(
        p=4,
        stragglers=[{"rank": 1, "factor": 2}, {"rank": 1, "factor": 1.5}, {"rank": 0, "factor": 1}],
    )
    doc = sc.model_dump()
    doc["workload"]["training"]["hosts"] = [3, 2, 1, 0]  # rank r on host 3 - r
    durations = compute_durations(type(sc).model_validate(doc), "bwd.l0")
    assert durations[2] == [3 * BACKWARD_NS * 1000] * 3
    assert all(durations[h] == [BACKWARD_NS * 1000] * 3 for h in (0, 1, 3))


def test_no_stragglers_and_no_jitter_keep_every_duration():
    plain = compute_durations(compute_items())
    assert compute_durations(compute_items(stragglers=[])) == plain
    assert compute_durations(compute_items(compute_jitter={"distribution": "normal", "cv": 0})) == plain


@pytest.mark.parametrize("distribution", ["lognormal", "normal", "uniform"])
def test_compute_jitter_has_mean_one_and_the_given_cv(distribution):
    cv, n_hosts, iterations = 0.2, 64, 50
    sc = compute_items(n_hosts, iterations, compute_jitter={"distribution": distribution, "cv": cv})
    draws = np.concatenate(list(compute_durations(sc).values())) / 1_000_500
    n = len(draws)
    assert n == n_hosts * iterations
    assert abs(draws.mean() - 1) < 4 * cv / math.sqrt(n)
    # the sample standard deviation of n draws is within a few of its own standard errors
    assert abs(draws.std() / cv - 1) < 0.15
    if distribution == "uniform":
        assert draws.min() >= 1 - cv * math.sqrt(3) - 1e-6 and draws.max() <= 1 + cv * math.sqrt(3) + 1e-6
    assert compute_durations(sc) == compute_durations(sc), "the seed decides the draws"
    other = compute_items(n_hosts, iterations, seed=2, compute_jitter={"distribution": distribution, "cv": cv})
    assert compute_durations(other) != compute_durations(sc)


def test_jitter_applies_on_top_of_a_straggler():
    sc = compute_items(4, 200, stragglers=[{"rank": 3, "factor": 4}], compute_jitter={"cv": 0.1})
    durations = compute_durations(sc)
    ratio = np.mean(durations[3]) / np.mean(np.concatenate([durations[h] for h in (0, 1, 2)]))
    assert abs(ratio - 4) < 4 * 0.1 * 4 / math.sqrt(200)


# ---- bad input -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "top, key, needle",
    [
        ({"stragglers": [{"rank": 4, "factor": 2}]}, "stragglers.0.rank", "ranks run from 0 to 3"),
        ({"stragglers": [{"rank": 0, "factor": 0.5}]}, "stragglers.0.factor", "greater than or equal to 1"),
        ({"stragglers": [{"rank": 0, "factor": float("nan")}]}, "stragglers.0.factor", "finite"),
        ({"stragglers": [{"rank": 0, "factor": float("inf")}]}, "stragglers.0.factor", "finite"),
        ({"stragglers": [{"rank": 0}]}, "stragglers.0.factor", "required"),
        ({"stragglers": [{"rank": 0, "fraction": 0.5, "factor": 2}]}, "stragglers.0", "give rank or fraction"),
        ({"stragglers": [{"fraction": 0, "factor": 2}]}, "stragglers.0.fraction", "greater than 0"),
        ({"compute_jitter": {"distribution": "pareto", "cv": 0.1}}, "compute_jitter.distribution", "lognormal"),
        ({"compute_jitter": {"cv": -1}}, "compute_jitter.cv", "greater than or equal to 0"),
    ],
)
def test_bad_stragglers_are_one_line_naming_the_key(tmp_path, top, key, needle):
    layer = {"name": "l0", "forward_ns": 1000, "backward_ns": 1000, "weight_grad_bytes": 4000}
    doc = {"topology": {"kind": "single_switch", "hosts": 4}, "workload": {"training": {"layers": [layer]}}, **top}
    assert_one_line_error(tmp_path / "s.yaml", doc, key, needle)


def test_a_straggler_rank_out_of_the_training_hosts_names_them(tmp_path):
    layer = {"name": "l0", "forward_ns": 1000, "backward_ns": 1000, "weight_grad_bytes": 4000}
    training_spec = {"layers": [layer], "hosts": [5, 6]}
    doc = {
        "topology": {"kind": "single_switch", "hosts": 8},
        "workload": {"training": training_spec},
        "stragglers": [{"rank": 2, "factor": 2}],
    }
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ScenarioError, match=r"stragglers\.0\.rank: 2 is not allowed: ranks run from 0 to 1 \(the "):
        prepare(path)


def test_a_chakra_traces_rank_straggles_on_its_host(tmp_path):
    from test_import_chakra import chakra_scenario, per_rank_program, write_traces

    prefix = write_traces(tmp_path, [per_rank_program(r) for r in range(3)])
    hosts = {"kind": "single_switch", "hosts": 8}
    sc = chakra_scenario(prefix, topology=hosts, ranks=[5, 2, 7])
    slow = type(sc).model_validate({**sc.model_dump(), "stragglers": [{"rank": 2, "factor": 3}]})
    assert compute_durations(slow) == {5: [10**7, 5 * 10**6], 2: [10**7, 5 * 10**6], 7: [3 * 10**7, 15 * 10**6]}
    by_files = chakra_scenario(prefix, topology=hosts)
    wrong = type(sc).model_validate({**by_files.model_dump(), "stragglers": [{"rank": 3, "factor": 3}]})
    with pytest.raises(ScenarioError, match=r"stragglers\.0\.rank: 3 is not allowed: ranks run from 0 to 2 \(the C"):
        prepare_scenario(wrong)


@pytest.mark.parametrize("fraction, hosts, count", [(0.1, 25, 3), (0.1, 24, 2), (0.01, 8, 1), (1, 8, 8)])
def test_a_fraction_is_rounded_half_up_and_picks_one_rank_at_least(fraction, hosts, count):
    sc = compute_items(hosts, 1, stragglers=[{"fraction": fraction, "factor": 2}])
    assert len(prepare_scenario(sc).workload.stragglers) == count


def test_with_jobs_a_straggler_rank_is_a_host_of_the_fabric():
    sc = scenario(
        topology={"kind": "single_switch", "hosts": 8},
        jobs=[
            {"name": "a", "hosts": [6, 7], "workload": {"compute": [{"name": "c", "duration_ns": 1000}]}},
            {"name": "b", "hosts": [0, 1], "workload": {"compute": [{"name": "c", "duration_ns": 1000}]}},
        ],
        stragglers=[{"rank": 7, "factor": 2}],
    )
    assert compute_durations(sc) == {6: [10**6], 7: [2 * 10**6], 0: [10**6], 1: [10**6]}
