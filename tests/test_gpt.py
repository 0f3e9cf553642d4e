"""The Megatron-style GPT model (workload/gpt.py, docs/model.md §8.5): every collective's bytes
per rank against the formulas, micro-batches, compute from FLOPs, the presets' parameter
counts, placement, bad input as one line, and a small run end to end."""

from pathlib import Path

import pytest

from conftest import cli, named, scenario, simulate
from roce_emu.config.load import validate_document
from roce_emu.config.schema import GptModel, Training
from roce_emu.errors import ScenarioError
from roce_emu.workload.gpt import layer_params, padded_vocab, parameter_count, stage_params
from roce_emu.workload.training import training_items

pytestmark = pytest.mark.quick

ROOT = Path(__file__).resolve().parent.parent
B, S, H = 2, 128, 256  #: micro_batch, seq_len, hidden of the small model
ACT = 2 * B * S * H  #: 2 b s h: each tensor-parallel collective and pipeline send, in bytes
SMALL = {"kind": "gpt", "layers": 4, "hidden": H, "heads": 8, "seq_len": S, "vocab": 1000, "micro_batch": B}
SMALL_MODEL = GptModel.model_validate(SMALL)


def items(tp=2, pp=1, dp=2, node_size=None, **model):
    """The iteration's items of the small model (with ``model``'s keys; bucket_bytes and placement
    go to workload.training) on tp x pp x dp hosts, built without simulating."""
    extra = {k: model.pop(k) for k in ("bucket_bytes", "placement") if k in model}
    model = {**SMALL, "global_batch": 4 * B * dp, **model}
    spec = Training.model_validate({"model": model, "tp": tp, "pp": pp, "dp": dp, **extra})
    n = tp * pp * dp
    return spec, training_items(spec, list(range(n)), n, "t.yaml", node_size)


def test_tensor_parallel_all_reduces_are_2bsh_twice_each_way_per_layer_and_micro_batch():
    _, built = items(tp=2, dp=2)
    m = 4  # global_batch 4 b dp
    for way in ("fwd_ar.", "bwd_ar."):
        ars = named(built, way)
        assert len(ars) == 4 * 2 * m  # layers x (attention, MLP) x micro-batches
        assert {(i.collective, i.nbytes) for i in ars} == {("all_reduce", ACT)}
        assert ars[0].groups == [[0, 1], [2, 3]]  # tp fastest: Megatron's order


def test_sequence_parallelism_turns_each_all_reduce_into_a_reduce_scatter_and_an_all_gather():
    _, built = items(tp=2, dp=2, sequence_parallel=True)
    assert not named(built, "fwd_ar.") and not named(built, "bwd_ar.")
    for way in ("fwd", "bwd"):
        gathers, scatters = named(built, f"{way}_ag."), named(built, f"{way}_rs.")
        assert len(gathers) == len(scatters) == 4 * 2 * 4
        assert {i.nbytes for i in gathers + scatters} == {ACT}
        assert {i.collective for i in gathers} == {"all_gather"}
        assert {i.collective for i in scatters} == {"reduce_scatter"}


def test_pipeline_stages_send_2bsh_each_way_per_micro_batch():
    _, built = items(tp=2, pp=2, dp=1)
    sends = [i for i in built if i.kind == "send"]
    assert len(named(sends, "pipe_fwd.0")) == len(named(sends, "pipe_bwd.1")) == 4
    assert {i.nbytes for i in sends} == {ACT}
    assert named(sends, "pipe_fwd.0")[0].pairs == [(0, 2), (1, 3)]  # t on stage 0 to t on stage 1


def test_micro_batches_are_global_batch_over_micro_batch_times_dp():
    _, built = items(tp=1, dp=2, global_batch=6 * B * 2)
    assert len(named(built, "fwd.attn.layer0")) == 6


@pytest.mark.parametrize("pp", [1, 2])
def test_data_parallel_gradients_are_2P_over_tp_per_replica_in_buckets(pp):
    """Per stage, 2 x the stage's parameters / tp bytes: 2 P / (tp pp) on uniform stages."""
    spec, built = items(tp=2, pp=pp, dp=2, bucket_bytes=0)
    model = spec.model
    assert isinstance(model, GptModel)
    per_stage = stage_params(model, 2, pp)
    assert sum(per_stage) == parameter_count(model, 2)
    reductions = named(built, "grad_ar.")
    assert len(reductions) == 4  # one per layer with bucket_bytes 0
    for s, params in enumerate(per_stage):
        stage = [i for i in reductions if i.groups[0][0] // 2 % pp == s]
        assert sum(i.nbytes for i in stage) == 2 * params // 2
        assert {i.collective for i in stage} == {"all_reduce"}


def test_buckets_hold_at_least_bucket_bytes():
    spec, built = items(tp=2, dp=2, bucket_bytes=3 * 2 * sum(layer_params(SMALL_MODEL)) // 2)
    reductions = named(built, "grad_ar.")
    assert [i.name for i in reductions] == ["grad_ar.layer3-layer1", "grad_ar.layer0"]
    assert sum(i.nbytes for i in reductions) == 2 * parameter_count(SMALL_MODEL, 2) // 2


def test_zero1_reduce_scatters_gradients_then_all_gathers_parameters():
    _, built = items(tp=2, dp=2, optimizer={"zero": 1}, bucket_bytes=0)
    assert not named(built, "grad_ar.")
    scatters, gathers = named(built, "grad_rs."), named(built, "param_ag.")
    assert {i.collective for i in scatters} == {"reduce_scatter"} and {i.collective for i in gathers} == {"all_gather"}
    total = 2 * parameter_count(SMALL_MODEL, 2) // 2
    assert sum(i.nbytes for i in scatters) == sum(i.nbytes for i in gathers) == total
    for gather in gathers:  # each bucket's parameters are gathered after its gradients are scattered
        assert gather.after[0] == "grad_rs." + gather.name.split(".", 1)[1]


def test_compute_is_6_P_tokens_over_the_ranks_at_device_tflops_times_mfu():
    """Summed over a replica's stages and micro-batches: 6 P tokens / (tp dp) / (tflops mfu)."""
    for pp in (1, 2):
        spec, built = items(tp=2, pp=pp, dp=2, device_tflops=100, mfu=0.4)
        model = spec.model
        assert isinstance(model, GptModel)
        tokens = 4 * B * 2 * S
        expect_ps = 6 * parameter_count(model, 2) * tokens / (2 * 2) / (100e12 * 0.4) * 1e12
        compute = [i for i in built if i.kind == "compute"]
        assert sum(i.duration_ps for i in compute) == pytest.approx(expect_ps, rel=1e-6)
        forward = sum(i.duration_ps for i in compute if i.name.startswith("fwd."))
        assert forward == pytest.approx(expect_ps / 3, rel=1e-6)


def test_parameter_count_is_narayanans_formula_plus_the_final_layernorm():
    m = SMALL_MODEL
    h, layers, v, s = m.hidden, m.layers, padded_vocab(m, 1), m.seq_len
    formula = 12 * layers * h * h * (1 + 13 / (12 * h) + (v + s) / (12 * layers * h))
    assert parameter_count(m) == round(formula) + 2 * h
    assert padded_vocab(m, 1) == 1024 and padded_vocab(m, 8) == 1024 and padded_vocab(m, 16) == 2048


@pytest.mark.parametrize("preset, published", [("gpt3-175b", 175e9), ("llama3-70b", 70e9)])
def test_presets_have_their_published_parameter_counts(preset, published):
    model = GptModel.model_validate({"preset": preset})
    assert parameter_count(model) == pytest.approx(published, rel=0.01)
    assert parameter_count(model, 8) == pytest.approx(published, rel=0.01)


def test_keys_beside_a_preset_win():
    model = GptModel.model_validate({"preset": "llama3-70b", "layers": 2, "seq_len": 1024})
    kept = (model.layers, model.seq_len, model.hidden, model.kv_heads, model.architecture)
    assert kept == (2, 1024, 8192, 8, "llama")


def test_tp_dp_pp_places_the_replicas_of_a_stage_next_to_each_other():
    _, megatron = items(tp=2, pp=2, dp=2, bucket_bytes=0)
    _, replicas = items(tp=2, pp=2, dp=2, bucket_bytes=0, placement="tp_dp_pp")
    assert named(megatron, "grad_ar.layer0")[0].groups == [[0, 4], [1, 5]]
    assert named(replicas, "grad_ar.layer0")[0].groups == [[0, 2], [1, 3]]


def _error(doc: dict) -> str:
    """The one-line error a GPT scenario's validation and build raise."""
    from roce_emu.api import prepare_scenario

    with pytest.raises(ScenarioError) as err:
        prepare_scenario(validate_document({"name": "t", "seed": 1, **doc}, "t.yaml"), "t.yaml")
    return str(err.value)


def gpt_doc(model=None, topology=None, **training):
    return {
        "topology": topology or {"kind": "single_switch", "hosts": 4},
        "workload": {"training": {"model": {**SMALL, **(model or {})}, "tp": 2, "dp": 2, **training}},
    }


RAIL = {"kind": "rail_optimized", "nodes": 2, "gpus_per_node": 4}


@pytest.mark.parametrize(
    "doc, expected",
    [
        (gpt_doc({"preset": "gpt4"}), "t.yaml: workload.training.model.preset: 'gpt4' is not allowed"),
        (gpt_doc({"global_batch": 6}), "workload.training.model.global_batch: 6 is not allowed: it must be a multiple"),
        (gpt_doc({"heads": 3, "hidden": 255}), "workload.training.model.heads: 3 is not allowed: it must be divisible"),
        (gpt_doc(tp=8, dp=1, topology=RAIL), "workload.training.tp: 8 is not allowed: larger than a server of "),
        (gpt_doc(tp=2, dp=1, pp=1, hosts=[3, 4]), "workload.training.tp: 2 is not allowed: the tensor-parallel group"),
        (gpt_doc({"device_memory_gb": 0.001}), "workload.training.model.device_memory_gb: 0.001 is too small"),
        (gpt_doc(micro_batches=2), "workload.training.micro_batches: 2 is not allowed: a gpt model sets it to 1"),
        (gpt_doc(pipeline_bytes=5), "workload.training.pipeline_bytes: 5 is not allowed: a gpt model sets it to "),
        (gpt_doc({"kind": "mamba"}), "workload.training.model.kind: 'mamba' is not allowed"),
        (gpt_doc({"hiden": 8}), "model.hiden: unknown key 'hiden' (did you mean 'hidden'?) (allowed: kind, preset,"),
    ],
)
def test_bad_input_is_one_line_naming_the_key(doc, expected):
    if "hosts" in doc["workload"]["training"]:
        doc["topology"] = RAIL
    message = _error(doc)
    assert expected in message and "\n" not in message


@pytest.mark.parametrize("command", ["validate", "run"])
@pytest.mark.parametrize(
    "doc, expected",
    [
        (gpt_doc({"preset": "x"}), "bad.yaml: workload.training.model.preset: 'x' is not allowed (allowed: gpt3-175b"),
        (
            gpt_doc(tp=8, dp=1, topology=RAIL),
            "bad.yaml: workload.training.tp: 8 is not allowed: larger than a server of topology.gpus_per_node = 4 "
            "GPUs; lower it or set workload.training.tp_across_nodes: true",
        ),
        (  # activations: s b h (10 + 24/t + 5 a s / (h t)) = 128 x 2 x 256 x 32 B a layer, 4 layers
            gpt_doc({"device_memory_gb": 0.001}),
            "bad.yaml: workload.training.model.device_memory_gb: 0.001 is too small: a GPU of the first stage needs "
            "0.036 GB (weights, gradients and Adam state 0.0276 GB, activations 0.00839 GB)",
        ),
    ],
    ids=["unknown_preset", "tp_beyond_a_server", "does_not_fit_device_memory"],
)
def test_the_commands_refuse_bad_model_input_in_one_line_with_exit_2(tmp_path, command, doc, expected):
    """From the command line: exit code 2 and one line naming the file and the key, no traceback
    (the memory figures in significant digits, so a small model's need does not read 0.0 GB)."""
    import yaml

    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"name": "t", **doc}))
    out = ["--out", str(tmp_path / "run")] if command == "run" else []
    done = cli(command, path, *out, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().count("\n") == 0 and expected in done.stderr, done.stderr
    assert not (tmp_path / "run").exists()


def test_tp_may_cross_servers_when_allowed():
    doc = gpt_doc(tp=8, dp=1, topology=RAIL, tp_across_nodes=True)
    assert validate_document({"name": "t", **doc}, "t.yaml").workload.training.tp_across_nodes


def test_the_built_in_models_keep_their_name_form():
    doc = {"topology": {"kind": "single_switch", "hosts": 2}, "workload": {"training": {"model": {"name": "dlrm"}}}}
    model = validate_document({"name": "t", **doc}, "t.yaml").workload.training.model
    assert type(model).__name__ == "Model" and model.name == "dlrm"


def test_a_small_gpt_runs_end_to_end_with_tensor_parallelism_on_the_critical_path():
    sc = scenario(**gpt_doc({"layers": 2, "global_batch": 8}))
    result = simulate(sc)
    summary = result.summary
    assert summary["flows_finished"] == summary["flows"] > 0
    assert summary["mean_exposed_communication_ns"] > 0
    assert summary["iteration_ns"][0] > summary["mean_compute_ns"]


def test_the_normalized_scenario_names_the_keys_the_model_sets_and_builds_the_same_iteration():
    from roce_emu.api import normalized_document, prepare_scenario

    doc = gpt_doc({"global_batch": 8 * B}, pp=1)
    first = prepare_scenario(validate_document({"name": "t", **doc}, "t.yaml"), "t.yaml")
    normalized = normalized_document(first)
    assert normalized["workload"]["training"]["micro_batches"] == 4
    assert normalized["workload"]["training"]["pipeline_bytes"] == 4 * ACT
    again = prepare_scenario(validate_document(normalized, "n.yaml"), "n.yaml")
    assert len(again.workload.flows) == len(first.workload.flows) > 0


def test_the_parallelisation_search_refuses_a_gpt_model():
    from roce_emu.fabric.topology import build_fabric
    from roce_emu.parallelism import search

    sc = validate_document({"name": "t", **gpt_doc()}, "t.yaml")
    with pytest.raises(ScenarioError, match="workload.training.model: the parallelisation search needs a built-in"):
        search(sc, build_fabric(sc.topology), "t.yaml")
