"""Parallelisation search (roce_emu/parallelism.py, `roce-emu design --parallel`): the memory
model by hand, the fit filter, the ranking against packet level, bad input."""

from pathlib import Path

import pytest
import yaml

from conftest import cli, scenario
from roce_emu import parallelism
from roce_emu.run.inputs import check_inputs

TINY = {"name": "transformer", "layers": 2, "hidden": 64, "sequence": 32, "batch_per_rank": 4, "device_tflops": 1}
SMALL = {"name": "transformer", "layers": 2, "hidden": 256, "sequence": 128, "batch_per_rank": 8, "device_tflops": 10}


def tiny(schedule="1f1b", model=TINY, **training):
    return scenario(
        topology={"kind": "single_switch", "hosts": 8},
        workload={"training": {"model": model, "schedule": schedule, **training}},
    )


def links_of(sc):
    return parallelism._Links(sc, check_inputs(sc).fabric)


@pytest.mark.quick
def test_memory_of_a_split_by_hand():
    """tp 1, pp 2: stage 0 holds block 0 (4h^2 + 8h^2 parameters, 16 B each) and its two layers'
    activations, s b h (10 + 24) / 2 each. 1F1B keeps min(pp, m) micro-batches of m in flight on
    stage 0, GPipe all of them: with m = 4, 1F1B needs half the activations GPipe does."""
    h, s, b = 64, 32, 4
    params = 16 * 12 * h * h
    kept = 2 * int(s * b * h * 34 / 2)
    one = tiny()
    assert parallelism.evaluate(one, links_of(one), 1, 2, 4, 1, b).memory_bytes == params + kept
    assert parallelism.evaluate(one, links_of(one), 1, 2, 4, 4, b).memory_bytes == params + kept * 2 // 4
    gpipe = tiny("gpipe")
    assert parallelism.evaluate(gpipe, links_of(gpipe), 1, 2, 4, 4, b).memory_bytes == params + kept
    # tensor parallelism divides the parameters and the 24 s b h part of the activations
    split = parallelism.evaluate(one, links_of(one), 2, 1, 4, 1, b).memory_bytes
    assert split == 16 * 2 * 12 * h * h // 2 + 4 * int(s * b * h * (10 + 12) / 2)


def design(*args, cwd):
    return cli("design", *args, cwd=cwd)


def write(tmp_path, sc) -> Path:
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(sc.model_dump(mode="json", exclude_none=True)))
    return path


def listed(stdout: str) -> list[tuple[int, int, int, int]]:
    """(tp, pp, dp, micro-batches) of each row of the printed ranking."""
    rows = [line.split("|")[1:-1] for line in stdout.splitlines() if line.startswith("| ") and "rank" not in line]
    return [tuple(int(c) for c in row[1:5]) for row in rows if row[0].strip().isdigit()]


def test_splits_that_do_not_fit_are_never_listed(tmp_path):
    """With 1 MiB per NPU the unsplit model does not fit: every listed split does, and the
    search had some that did not."""
    sc = tiny()
    limit_gib = 1 / 1024
    every = parallelism.search(sc, check_inputs(sc).fabric, "t.yaml")
    assert any(not s.fits(limit_gib) for s in every) and any(s.fits(limit_gib) for s in every)
    p = design(
        write(tmp_path, sc),
        "--parallel",
        "--device-memory-gb",
        limit_gib,
        "--top",
        100,
        "-o",
        tmp_path / "best.yaml",
        cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr
    shown = listed(p.stdout)
    by_key = {(s.tp, s.pp, s.dp, s.micro_batches): s for s in every}
    assert shown and all(by_key[k].fits(limit_gib) for k in shown)
    assert len(shown) == sum(s.fits(limit_gib) for s in every)
    best = yaml.safe_load((tmp_path / "best.yaml").read_text())["workload"]["training"]
    assert (best["tp"], best["pp"], best["dp"], best["micro_batches"]) == shown[0]


def test_the_ranking_holds_at_packet_level(tmp_path):
    """--verify runs the best splits at packet level: each prediction is within 15 % of its
    packet-level time, and the predicted best is within 15 % of the fastest of them (the model
    cannot order splits closer than its own error; a model whose messages are large enough for
    bandwidth to matter more than latency)."""
    sc = tiny(model=SMALL)
    p = design(
        write(tmp_path, sc), "--parallel", "--verify", "--verify-top", 3, "-o", tmp_path / "b.yaml", cwd=tmp_path
    )
    assert p.returncode == 0, p.stderr
    runs = [line for line in p.stdout.splitlines() if line.startswith("packet level")]
    assert len(runs) == 3
    measured = [float(r.split(": ")[1].split(" ms")[0]) for r in runs]
    predicted = [float(r.split("predicted ")[1].split(" ms")[0]) for r in runs]
    print("\n".join(runs))
    assert all(abs(m / q - 1) < 0.15 for m, q in zip(measured, predicted))
    assert measured[0] <= 1.15 * min(measured)
    fastest = runs[measured.index(min(measured))].split(": ")[0].removeprefix("packet level, ")
    assert f"written: {fastest}," in p.stdout
    training = yaml.safe_load((tmp_path / "b.yaml").read_text())["workload"]["training"]
    assert f"(tp {training['tp']}, pp {training['pp']}, dp {training['dp']}, " in fastest


@pytest.mark.quick
@pytest.mark.parametrize(
    "args, needle",
    [
        (("--device-memory-gb", "1e-9"), "--device-memory-gb: 1e-09 GiB: no split fits; the leanest"),
        (("--device-memory-gb", "-1"), "--device-memory-gb"),
    ],
)
def test_bad_input_is_one_line(tmp_path, args, needle):
    p = design(write(tmp_path, tiny()), "--parallel", *args, cwd=tmp_path)
    assert p.returncode == 2 and needle in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not list(tmp_path.glob("*_parallel.yaml"))


@pytest.mark.quick
def test_a_workload_without_a_model_is_refused(tmp_path):
    sc = scenario(
        topology={"kind": "single_switch", "hosts": 4},
        workload={"training": {"layers": [{"name": "a", "forward_ns": 1000.0}]}},
    )
    p = design(write(tmp_path, sc), "--parallel", cwd=tmp_path)
    assert p.returncode == 2 and "workload.training.model" in p.stderr


def test_verify_writes_the_fastest_split_at_packet_level(tmp_path, monkeypatch):
    """--verify writes the split that ran fastest at packet level, not the predicted best, and
    says which and why on stdout and in the written file's header. The packet-level times are
    stood in for (rank 2 fastest) so that the choice, not the engine, is under test."""
    from click.testing import CliRunner

    from roce_emu import api
    from roce_emu.cli import main

    sc = tiny(model=SMALL)
    fitting = parallelism.search(sc, check_inputs(sc).fabric, "t.yaml")
    measured = iter([3.873e-3, 3.853e-3, 3.9e-3])  # ranks 1, 2, 3
    monkeypatch.setattr(api, "packet_level_s", lambda doc, source: next(measured))
    out = tmp_path / "b.yaml"
    p = CliRunner().invoke(main, ["design", str(write(tmp_path, sc)), "--parallel", "--verify", "-o", str(out)])
    assert p.exit_code == 0, p.output
    second = fitting[1]
    label = f"rank 2 (tp {second.tp}, pp {second.pp}, dp {second.dp}, {second.micro_batches} micro-batches)"
    written = [line for line in p.stdout.splitlines() if line.startswith("written: ")]
    assert written == [
        f"written: {label}, the fastest of the 3 run at packet level (3.853 ms against 3.873 ms for rank 1 "
        f"(tp {fitting[0].tp}, pp {fitting[0].pp}, dp {fitting[0].dp}, {fitting[0].micro_batches} micro-batches), "
        "the fastest predicted)"
    ]
    text = out.read_text()
    assert f"# {written[0]}" in text
    training = yaml.safe_load(text)["workload"]["training"]
    assert (training["tp"], training["pp"], training["dp"], training["micro_batches"]) == (
        second.tp,
        second.pp,
        second.dp,
        second.micro_batches,
    )


def test_without_verify_the_predicted_best_is_written_and_said_so(tmp_path):
    from click.testing import CliRunner

    from roce_emu.cli import main

    out = tmp_path / "b.yaml"
    p = CliRunner().invoke(main, ["design", str(write(tmp_path, tiny())), "--parallel", "-o", str(out)])
    assert p.exit_code == 0, p.output
    assert "written: rank 1 (" in p.stdout and "the fastest predicted (not run at packet level)" in p.stdout
    assert "# written: rank 1 (" in out.read_text()


def test_the_ranking_report_lists_the_top_splits(tmp_path):
    from roce_emu import api

    d = api.design_parallel(write(tmp_path, tiny()), [], 80.0, dest=tmp_path / "p.yaml")
    lines = d.report(2)
    assert lines[0].startswith(f"{len(d.fitting)} of {d.searched} splits fit in 80 GiB per NPU")
    assert len(listed("\n".join(lines))) == 2
    assert lines[-1] == f"written: {d.choice.why}"
