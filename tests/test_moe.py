"""The mixture-of-experts GPT (workload/moe.py, docs/model.md §8.6): the all-to-alls' bytes per rank
against the formula, skewed expert load, capacity drops, the expert-parallel groups, the two gradient
reductions, per-rank expert compute, the Mixtral preset's parameter counts, bad input as one line,
and the per-pair all-to-all (all_to_allv) as flows in a run."""

import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import cli, named, scenario, simulate
from roce_emu.config.schema import MoeModel, Training
from roce_emu.workload.gpt import mlp_params
from roce_emu.workload.moe import active_parameter_count, dense_layer_params, parameter_count, popularity
from roce_emu.workload.training import training_items

pytestmark = pytest.mark.quick

ROOT = Path(__file__).resolve().parent.parent
B, S, H, E, K = 2, 128, 256, 8, 2  #: micro_batch, seq_len, hidden, experts, top_k
SMALL = {
    "kind": "moe",
    "layers": 2,
    "hidden": H,
    "heads": 8,
    "seq_len": S,
    "vocab": 1000,
    "micro_batch": B,
    "experts": E,
    "top_k": K,
}


def items(tp=1, dp=4, ep=4, seed=1, m=2, **model):
    """The small MoE's iteration items on tp x dp hosts (m micro-batches), built without simulating."""
    doc = {**SMALL, "ep": ep, "global_batch": m * B * dp, **model}
    if tp > 1:
        doc.setdefault("sequence_parallel", True)
    spec = Training.model_validate({"model": doc, "tp": tp, "dp": dp, "bucket_bytes": 0})
    n = tp * dp
    return spec, training_items(spec, list(range(n)), n, "t.yaml", None, seed)


def off_diagonal_sent(matrix) -> list[int]:
    """Each rank's bytes to the other ranks of its group."""
    return [sum(v for j, v in enumerate(row) if j != i) for i, row in enumerate(matrix)]


def received(matrix) -> list[int]:
    """Each rank's bytes from the other ranks of its group."""
    return off_diagonal_sent([list(col) for col in zip(*matrix)])


@pytest.mark.parametrize("tp, dp, ep", [(1, 4, 4), (2, 4, 8), (1, 8, 2)])
def test_balanced_all_to_alls_send_ep_minus_1_over_ep_of_tokens_top_k_h_2_bytes_per_rank(tp, dp, ep):
    """Four all-to-alls per layer and micro-batch (dispatch and combine, forward and backward), each rank
    sending (ep - 1) / ep of T top_k h 2 bytes, T = b s (/ tp with sequence parallelism)."""
    _, built = items(tp=tp, dp=dp, ep=ep)
    tokens = B * S // tp
    for prefix in ("fwd_dispatch.", "fwd_combine.", "bwd_combine.", "bwd_dispatch."):
        exchanges = named(built, prefix)
        assert len(exchanges) == 2 * 2  # layers x micro-batches
        for item in exchanges:
            assert item.collective == "all_to_all" and item.algorithm == "direct"
            assert len(item.groups) == tp * dp // ep and all(len(g) == ep for g in item.groups)
            assert off_diagonal_sent(item.pair_bytes) == [(ep - 1) * tokens * K * H * 2 // ep] * ep
            assert received(item.pair_bytes) == [(ep - 1) * tokens * K * H * 2 // ep] * ep


def test_skew_sends_more_to_the_hot_ranks_and_conserves_the_bytes():
    _, built = items(ep=4, imbalance=1.5)
    tokens = B * S
    for layer in range(2):
        dispatch = named(built, f"fwd_dispatch.layer{layer}")[0].pair_bytes
        share = popularity(MoeModel.model_validate({**SMALL, "ep": 4, "imbalance": 1.5}), 1, layer)
        hot_rank = int(np.argmax(share)) // (E // 4)  # the rank holding the most popular expert
        into = received(dispatch)
        assert into[hot_rank] == max(into) and max(into) > 1.5 * min(into)
        for row in dispatch:  # dropless: every copy of every token is sent (or stays on its rank)
            assert sum(row) == tokens * K * H * 2
        combine = named(built, f"fwd_combine.layer{layer}")[0].pair_bytes
        assert combine == [list(col) for col in zip(*dispatch)]  # the reverse
        assert off_diagonal_sent(combine)[hot_rank] == max(off_diagonal_sent(combine))


def test_the_seed_decides_which_experts_are_hot():
    _, one = items(ep=4, imbalance=1.5, seed=1)
    _, again = items(ep=4, imbalance=1.5, seed=1)
    _, other = items(ep=4, imbalance=1.5, seed=7)
    pairs = [[i.pair_bytes for i in named(built, "fwd_dispatch.")] for built in (one, again, other)]
    assert pairs[0] == pairs[1] and pairs[0] != pairs[2]


def test_capacity_factor_drops_the_copies_beyond_each_experts_capacity():
    tokens = B * S
    capacity = int(1.0 * tokens * K / E)
    _, dropless = items(ep=4, imbalance=1.5)
    _, capped = items(ep=4, imbalance=1.5, capacity_factor=1.0)
    for a, b in zip(named(dropless, "fwd_dispatch."), named(capped, "fwd_dispatch.")):
        assert sum(b.pair_bytes[0]) < sum(a.pair_bytes[0])  # some copies dropped
        assert max(b.pair_bytes[0]) <= (E // 4) * capacity * H * 2  # no rank's experts take more than capacity
    _, uniform = items(ep=4, capacity_factor=1.0)
    assert sum(named(uniform, "fwd_dispatch.")[0].pair_bytes[0]) == tokens * K * H * 2  # nothing over capacity


def test_ep_groups_are_consecutive_ranks_tp_fastest_and_edp_groups_hold_the_same_experts():
    _, built = items(tp=2, dp=4, ep=4)
    assert named(built, "fwd_dispatch.")[0].groups == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert named(built, "expert_grad_ar.")[0].groups == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert named(built, "grad_ar.")[0].groups == [[0, 2, 4, 6], [1, 3, 5, 7]]  # dense: over dp
    assert [i.hosts for i in named(built, "fwd.experts.layer0.")[:4]] == [[0, 4], [1, 5], [2, 6], [3, 7]]


def test_dense_gradients_go_over_dp_and_the_experts_over_the_expert_data_parallel_group():
    spec, built = items(tp=2, dp=4, ep=4)
    model = spec.model
    assert isinstance(model, MoeModel)
    dense = named(built, "grad_ar.")
    experts = named(built, "expert_grad_ar.")
    assert len(dense) == len(experts) == 2  # one per layer with bucket_bytes 0
    assert sum(i.nbytes for i in experts) == 2 * 2 * (E // 4) * mlp_params(model)
    embeddings = parameter_count(model, 2) - model.layers * (dense_layer_params(model) + E * mlp_params(model))
    assert sum(i.nbytes for i in dense) == sum(
        2 * p // 2 for p in (dense_layer_params(model), dense_layer_params(model) + embeddings)
    )
    _, whole = items(tp=1, dp=4, ep=4)
    assert not named(whole, "expert_grad_ar.")  # each expert on one rank: nothing to reduce


def test_the_ranks_of_hot_experts_compute_longer():
    spec, built = items(ep=4, imbalance=1.5, device_tflops=100, mfu=0.5)
    model = spec.model
    assert isinstance(model, MoeModel)
    dispatch = named(built, "fwd_dispatch.layer0.mb0")[0].pair_bytes
    copies = [4 * v // (H * 2) for v in dispatch[0]]  # each rank receives as much from all 4
    compute = named(built, "fwd.experts.layer0.")[:4]
    expect = [6 * mlp_params(model) * c / (100e12 * 0.5) / 3 * 1e12 for c in copies]
    assert [i.duration_ps for i in compute] == pytest.approx(expect, rel=1e-6)
    assert np.argmax([i.duration_ps for i in compute]) == np.argmax(received(dispatch))


def test_mixtral_8x7b_has_its_published_total_and_active_parameters():
    model = MoeModel.model_validate({"preset": "mixtral-8x7b"})
    assert (model.layers, model.hidden, model.experts, model.top_k, model.seq_len) == (32, 4096, 8, 2, 4096)
    assert parameter_count(model) == pytest.approx(46.7e9, rel=0.01)
    assert active_parameter_count(model) == pytest.approx(12.9e9, rel=0.01)
    assert Training.model_validate({"model": {"preset": "mixtral-8x7b", "ep": 8, "layers": 2}}).model.layers == 2


def _validate(tmp_path, model: dict, **training) -> subprocess.CompletedProcess:
    import yaml

    doc = {
        "name": "t",
        "topology": {"kind": "single_switch", "hosts": 8},
        "workload": {"training": {"model": {**SMALL, **model}, **training}},
    }
    path = tmp_path / "moe.yaml"
    path.write_text(yaml.safe_dump(doc))
    return cli("validate", path)


@pytest.mark.parametrize(
    "model, training, expected",
    [
        ({"ep": 3}, {}, "workload.training.model.ep: 3 is not allowed: it must divide tp x dp = 1 x 8 = 8"),
        ({"ep": 16}, {}, "workload.training.model.ep: 16 is not allowed: it must divide tp x dp"),
        ({"ep": 4, "experts": 6}, {}, "workload.training.model.experts: 6 is not allowed: it must be a multiple"),
        ({"top_k": 9}, {}, "workload.training.model.top_k: 9 is not allowed: at most experts (8)"),
        ({}, {"tp": 2}, "workload.training.model.sequence_parallel: false is not allowed with tp 2"),
        ({"imbalance": -1}, {}, "workload.training.model.imbalance"),
        (
            {"device_memory_gb": 80},
            {},
            "workload.training.model.device_memory_gb: 80 is not allowed for a moe model (its memory is not modelled)",
        ),
        (
            {"preset": "mixtral"},
            {},
            "model.preset: 'mixtral' is not allowed (allowed: gpt3-175b, llama3-70b, mixtral-8x7b)",
        ),
    ],
)
def test_bad_input_is_one_line_naming_the_key_and_exits_2(tmp_path, model, training, expected):
    done = _validate(tmp_path, model, **training)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and expected in done.stderr, done.stderr


def test_a_small_moe_runs_its_per_pair_all_to_alls_as_flows_of_those_bytes():
    """Each dispatch's flows carry the per-pair bytes (all_to_allv): a small run of the skewed model."""
    doc = {
        "topology": {"kind": "single_switch", "hosts": 4},
        "workload": {"training": {"model": {**SMALL, "ep": 4, "imbalance": 1.5}, "dp": 4}},
    }
    result = simulate(scenario(**doc))
    assert result.summary["flows_finished"] == result.summary["flows"] > 0
    _, built = items(ep=4, imbalance=1.5, m=1)
    dispatch = named(built, "fwd_dispatch.layer0")[0].pair_bytes
    (c,) = [c for c in result.prepared.workload.collectives if c.name == "fwd_dispatch.layer0"]
    table = result.flow_table
    sent = {(int(table["src"][k]), int(table["dst"][k])): int(table["bytes"][k]) for k in c.flows}
    assert sent == {(i, j): max(1, dispatch[i][j]) for i in range(4) for j in range(4) if i != j}
