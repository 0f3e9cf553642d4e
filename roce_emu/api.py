"""The Python entry points used by the CLI and the tests: prepare a scenario, run it, write results."""

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

import numpy as np

from . import design
from . import parallelism
from .config.cc_params import params_from_engine
from .config import load_scenario
from .config.load import read_document, validate_document
from .config.schema import GptModel, MultiDim, Scenario
from .errors import ScenarioError
from .core.state import World
from .fabric.faults import slowed_links
from .fabric.topology import Fabric
from .results.scenario_file import write_scenario
from .results.iteration import (
    TASK_COLUMNS,
    TIMELINE_COLUMNS,
    collective_columns,
    collective_rows,
    iteration_summary,
    rank_timeline,
    task_rows,
    timeline_rows,
)
from .results.jobs import JobResult, add_job_columns, baseline_jobs, job_results, jobs_of, slowdown_rows
from .results.links import LINK_COLUMNS, hottest_links, link_rows
from .results.ns3_format import fct_text, pfc_text
from .results.requests import inference_summary, request_rows
from .results.console import fmt_ns
from .results.destination import check_directory, check_file
from .results.output import atomic_directory, frame, read_summary, table_files, write_csv, write_run_dir
from .results.seeds import SEED_COLUMNS, seed_rows, seeds_summary
from .results.provenance import provenance, scenario_yaml
from .results.tables import (
    FLOW_COLUMNS,
    SIZE_BUCKET_COLUMNS,
    flow_rows,
    flow_table,
    slowdown_by_size,
    summary,
    trace_tables,
)
from .run.diagnose import stall_report
from .run.driver import Limits, RunOutcome, memo_warning, simulate
from .run.inputs import Inputs, check_inputs, memo_settings, run_warnings, streams
from .run.invariants import broken_invariant_message
from .run.world import build_world
from .units import ns_to_ps, ns_to_s
from .workload import Workload, collective_flow_mask, parameter_server
from .workload.gpt import implied_keys
from .workload.jobs import cc_rows
from .workload.training import placement


@dataclass
class Prepared:
    scenario: Scenario
    source: str
    fabric: Fabric
    workload: Workload
    world: World
    overrides: tuple = ()

    @property
    def flows(self):
        return self.workload.flows

    @cached_property
    def warnings(self) -> list[str]:
        """What a run of it should warn about (run.inputs.run_warnings): the accuracy of an
        approximation it uses, hosts it leaves idle."""
        return run_warnings(self.scenario, self.fabric, self.workload)


@dataclass
class RunResult:
    outcome: RunOutcome
    flow_table: dict  # every flow's results as numeric columns (results.flow_table)
    summary: dict
    out: Path | None
    prepared: Prepared

    @property
    def ok(self) -> bool:
        return self.outcome.status in ("finished", "incomplete")

    @property
    def run_warnings(self) -> list[str]:
        """What the run itself warns of, beyond what its scenario did before it (the memo's
        sampled replays beyond 1 %: run.driver.memo_warning)."""
        return self.summary.get("warnings", [])[len(self.prepared.warnings) :]

    @cached_property
    def rows(self) -> list[dict]:
        """flows.csv rows of every flow (collective flows included), made when first asked for."""
        return flow_rows(self.flow_table)

    def tables(self) -> dict[str, tuple]:
        """The run directory's tables, {"flows.csv": (columns, rows), ...}, as a run writes them."""
        return run_tables(self.prepared, self.outcome, self.flow_table)

    def frames(self) -> dict:
        """The tables as pandas DataFrames with numeric columns (times in ns as float64, empty
        cells NaN), keyed "flows", "tasks", "collectives", "traces_rate", ... (needs pandas)."""
        return {name.rsplit(".", 1)[0]: frame(columns, rows) for name, (columns, rows) in self.tables().items()}


@dataclass
class RunDirectory:
    """A run directory read back: summary.json and every table as a DataFrame."""

    summary: dict
    frames: dict


def read_run(path: Path | str) -> RunDirectory:
    """Read a run directory (CSV or Parquet tables) into DataFrames with numeric columns."""
    import pandas as pd

    path = Path(path)
    summary = read_summary(path)
    frames = {}
    for name, table in table_files(path).items():
        frames[name] = pd.read_parquet(table) if table.suffix == ".parquet" else pd.read_csv(table)
    return RunDirectory(summary, frames)


def prepare(path: Path | str, overrides: Sequence[str] = ()) -> Prepared:
    """Load, validate and compile a scenario; raises ScenarioError for any bad input."""
    scenario = load_scenario(path, overrides)
    return prepare_scenario(scenario, str(path), tuple(overrides))


def prepare_run(
    path: Path | str, overrides: Sequence[str] = (), out: Path | None = None, overwrite: bool = False
) -> tuple[Prepared, Path]:
    """``roce-emu run``'s inputs: the prepared scenario and its run directory (``out``, else
    default_out_dir), checked before anything is built: new, or with ``overwrite`` a run
    directory roce-emu wrote, and not holding the scenario (results/destination.py)."""
    scenario = load_scenario(path, list(overrides))
    target = Path(out) if out is not None else default_out_dir(scenario)
    check_directory(target, "--out", "run", overwrite, inputs=[path])
    return prepare_scenario(scenario, str(path), tuple(overrides)), target


def prepare_scenario(scenario: Scenario, source: str = "<scenario>", overrides: tuple = ()) -> Prepared:
    inputs = check_inputs(scenario, source)
    world = build_world(inputs)
    return Prepared(scenario, source, inputs.fabric, inputs.workload, world, tuple(overrides))


def normalized_document(prepared: Prepared) -> dict:
    """The scenario with every default filled in as a run uses it: the congestion-control
    parameters in the units of their names (computed ones included) and the ECN thresholds
    (at the reference rate) instead of their 'default' markers, and each jitter source's mean (and
    standard deviation) as the run draws them."""
    doc = prepared.scenario.model_dump(mode="json")
    network = prepared.scenario.network
    algorithm = network.cc.algorithm
    doc["network"]["cc"]["params"] = params_from_engine(algorithm, prepared.world.ccp[0])
    rows, job_rows = cc_rows(prepared.scenario)
    for job, row in zip(doc["jobs"], job_rows):
        if job["cc"] is not None:  # a job's own congestion control
            job["cc"]["params"] = params_from_engine(rows[row].algorithm, prepared.world.ccp[row])
    kmin, kmax, pmax = network.switch.ecn.resolved(algorithm)
    doc["network"]["switch"]["ecn"].update(kmin_bytes=int(kmin), kmax_bytes=int(kmax), pmax=float(pmax))
    for device in ("nic", "switch"):
        distribution, mean_ns, sd_ns = getattr(network.jitter, device).resolved(device)
        if distribution != "none":
            doc["network"]["jitter"][device].update(mean_ns=mean_ns, sd_ns=sd_ns if distribution == "normal" else None)
    training = prepared.scenario.workload.training
    if training is not None and isinstance(training.model, GptModel):
        hosts = training.hosts if training.hosts is not None else list(range(prepared.fabric.n_hosts))
        ranks = placement(training, hosts, prepared.fabric.n_hosts, prepared.source)
        doc["workload"]["training"].update(implied_keys(training.model, ranks.dp, prepared.source))
    return doc


def default_out_dir(scenario: Scenario) -> Path:
    return Path(scenario.output.dir) if scenario.output.dir else Path("runs") / scenario.name


def run(
    prepared: Prepared,
    out: Path | None = None,
    progress: bool | None = None,
    slice_events: int | None = None,
    write: bool = True,
    check: bool = False,
) -> RunResult:
    """Simulate a prepared scenario and write flows.csv and summary.json (atomically) to ``out``.
    ``out`` is checked first (ScenarioError): it must be new or a run directory roce-emu
    wrote, in a folder that can be written (results/destination.py)."""
    sc = prepared.scenario
    target = None
    if write:
        target = Path(out) if out is not None else default_out_dir(sc)
        check_directory(target, "--out", "run", overwrite=True)
    limits = Limits(ns_to_ps(sc.sim.max_time_ns), sc.sim.max_events, sc.sim.max_wall_s)
    outcome = simulate(
        prepared.world,
        limits,
        slice_events or sc.sim.slice_events,
        progress=progress,
        label=sc.name,
        check=check,
        exact_jumps=sc.sim.fast_forward == "exact" and not streams(prepared.workload),
        memo=memo_settings(sc, prepared.workload),
    )
    if outcome.status == "invariant" and not outcome.reason:
        outcome.reason = broken_invariant_message(outcome.world, prepared.fabric)
    if outcome.status == "stalled":
        deadlock, report = stall_report(outcome.world, prepared.fabric)
        outcome.status = "deadlock" if deadlock else "stalled"
        outcome.reason = report
    table = flow_table(outcome.world)
    info = summary(outcome.world, prepared.fabric, sc, outcome, table)
    timeline = rank_timeline(outcome.world, prepared.workload)
    info.update(iteration_summary(outcome.world, prepared.workload, timeline))
    info.update(inference_summary(outcome.world, prepared.workload))
    per_job = job_results(outcome.world, prepared.workload) if prepared.workload.jobs else None
    if per_job is not None:
        info["jobs"] = [r.summary for r in per_job]
    info["hottest_links"] = hottest_links(outcome.world, prepared.fabric)
    if outcome.memo is not None:
        info["memo"] = outcome.memo
    if prepared.workload.notes:
        info["workload_notes"] = list(prepared.workload.notes)
    if prepared.workload.stragglers:
        info["stragglers"] = list(prepared.workload.stragglers)
    slow = slowed_links(sc, prepared.fabric)
    if slow:
        info["slow_links"] = slow
    training = sc.workload.training
    if training is not None and training.dp_algorithm == "parameter_server":
        synchronous = training.staleness_bound == 0
        info["update_delay"] = parameter_server.update_delays(outcome.world, prepared.workload, synchronous)
        replicas = training.parameter_server.replicas or []
        info["server_load"] = parameter_server.server_load(
            outcome.world, prepared.workload, training.servers or [], replicas
        )
    warnings = [*prepared.warnings, *filter(None, [memo_warning(outcome.memo)])]
    if warnings:
        info["warnings"] = warnings
    info["provenance"] = provenance(prepared.source, prepared.overrides, sc.seed)
    if target is not None:
        texts = {"scenario.yaml": scenario_yaml(normalized_document(prepared))}
        if "ns3" in sc.output.formats:
            texts["fct.txt"] = fct_text(table, prepared.fabric)
            texts["pfc.txt"] = pfc_text(outcome.world, prepared.fabric, sc.topology, outcome.trace)
        tables = run_tables(prepared, outcome, table, timeline, per_job)
        write_run_dir(target, info, tables, sc.output.format, texts)
    return RunResult(outcome, table, info, target, prepared)


def run_tables(
    prepared: Prepared,
    outcome: RunOutcome,
    table: dict,
    timeline: list[tuple] | None = None,
    per_job: list[JobResult] | None = None,
) -> dict[str, tuple]:
    """Every table of a run directory: flows, tasks, collectives, the rank timeline, traces,
    links and inference requests (columns, rows), and with jobs, jobs.csv and a job column; ``timeline`` and
    ``per_job`` are rank_timeline's and job_results' results if the caller has them."""
    workload = prepared.workload
    tables = trace_tables(outcome.world, prepared.fabric, outcome.trace, prepared.scenario.output.traces)
    written, mine = None, None  # every flow
    if not prepared.scenario.output.collective_flows and workload.collectives:  # collectives.csv sums them up
        mine = collective_flow_mask(workload)
        written = ~mine
    tasks = task_rows(outcome.world, workload, leave_out=mine)
    tables["tasks.csv"] = (TASK_COLUMNS, tasks)
    if workload.collectives:
        tables["collectives.csv"] = (collective_columns(workload), collective_rows(outcome.world, workload))
    if workload.iteration_ends:
        timeline = rank_timeline(outcome.world, workload) if timeline is None else timeline
        tables["timeline.csv"] = (TIMELINE_COLUMNS, timeline_rows(timeline))
    by_size = slowdown_by_size(table, written)
    if by_size:
        tables["fct_by_size.csv"] = (SIZE_BUCKET_COLUMNS, by_size)
    tables["links.csv"] = (LINK_COLUMNS, link_rows(outcome.world, prepared.fabric))
    if len(workload.requests):
        tables["requests.csv"] = request_rows(outcome.world, workload)
    tables = {"flows.csv": (FLOW_COLUMNS, flow_rows(table, written)), **tables}
    if workload.jobs:
        per_job = job_results(outcome.world, workload) if per_job is None else per_job
        add_job_columns(tables, workload, per_job)
    return tables


def job_slowdowns(directory: Path, baseline: Sequence[str]) -> list[tuple]:
    """plot --baseline: each job's slowdown rows (results.jobs.slowdown_rows) against its times
    alone, run now ("alone": jobs_alone) or read from the run directories given."""
    together = jobs_of(directory)
    if "alone" in baseline:
        if len(baseline) > 1:
            raise ScenarioError(
                "--baseline", "", "'alone' is not allowed beside run directories: give one or the other"
            )
        alone = jobs_alone(directory, progress=None)
    else:
        alone = baseline_jobs([Path(b) for b in baseline], [job["job"] for job in together])
    return slowdown_rows(together, alone)


def plot_directory(
    directory: Path, out_dir: Path, baseline: Sequence[str] = ()
) -> tuple[list[str], list[tuple] | None]:
    """roce-emu plot: the figures of a run or sweep directory written to ``out_dir`` (checked
    first), and with a ``baseline`` each job's slowdown against running alone (job_slowdowns),
    drawn and written as jobs_slowdown.csv: (the figures' names, the slowdown rows or None)."""
    from .results.figures import write_figures  # matplotlib, only for figures

    check_directory(out_dir, "--out", "plots")
    slowdown = job_slowdowns(directory, baseline) if baseline else None
    return write_figures(directory, out_dir, slowdown), slowdown


def jobs_alone(run_dir: Path | str, progress: bool | None = False) -> dict[str, dict]:
    """Each job of a run directory with jobs run alone, in memory, on the hosts it had in the
    run (its scenario.yaml, every other job left out): summary.json's entry of the job, by name."""
    run_dir = Path(run_dir)
    together = {job["job"]: job for job in jobs_of(run_dir)}
    source = str(run_dir / "scenario.yaml")
    doc = read_document(Path(source))
    alone = {}
    for spec in doc.get("jobs") or []:
        hosts = together[spec["name"]]["hosts"]
        one = {**doc, "jobs": [{**spec, "hosts": hosts, "placement": None, "ranks": None}]}
        result = run(prepare_scenario(validate_document(one, source), source), write=False, progress=progress)
        alone[spec["name"]] = result.summary["jobs"][0]
    return alone


def run_scenario(
    path: Path | str,
    overrides: Sequence[str] = (),
    out: Path | None = None,
    progress: bool | None = False,
    slice_events: int | None = None,
    write: bool = True,
) -> RunResult:
    return run(prepare(path, overrides), out, progress, slice_events, write)


@dataclass
class SeedsResult:
    """``run --seeds``: each seed's run (its directory OUT/seed-<seed>) and their statistics (seeds.json)."""

    runs: list[RunResult]
    info: dict
    out: Path

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.runs)


def run_seeds(
    path: Path | str,
    overrides: Sequence[str],
    n_seeds: int,
    out: Path | None = None,
    overwrite: bool = False,
    progress: bool | None = None,
    slice_events: int | None = None,
    check: bool = False,
    each: Callable[[RunResult], None] | None = None,
) -> SeedsResult:
    """Run the scenario with its seed, seed + 1, ..., n_seeds of them: each into OUT/seed-<seed> (a run
    directory), and beside them seeds.csv (a row per seed) and seeds.json (the mean, standard deviation and
    95 % interval of the iteration time, else of the last finish: results/seeds.py). OUT is checked
    before anything runs and written atomically, as a run directory (``overwrite`` as prepare_run's).
    ``each`` is called with every run as it ends."""
    first = load_scenario(path, overrides)
    target = Path(out) if out is not None else default_out_dir(first)
    check_directory(target, "--out", "run", overwrite, inputs=[path])
    runs, rows = [], []
    with atomic_directory(target) as tmp:
        for seed in range(first.seed, first.seed + n_seeds):
            seeded = (*overrides, f"seed={seed}")
            prepared = prepare_scenario(load_scenario(path, seeded), str(path), seeded)
            result = run(prepared, tmp / f"seed-{seed}", progress, slice_events, check=check)
            runs.append(result)
            rows.append((seed, f"seed-{seed}", result.summary))
            if each is not None:
                each(result)
        info = seeds_summary(rows)
        write_csv(tmp / "seeds.csv", SEED_COLUMNS, seed_rows(rows))
        (tmp / "seeds.json").write_text(json.dumps(info, indent=2) + "\n")
    for seed, r in zip(range(first.seed, first.seed + n_seeds), runs):
        r.out = target / f"seed-{seed}"
    return SeedsResult(runs, info, target)


# ---- design: the candidates a model ranks, checked at packet level ------------------------------
@dataclass(frozen=True)
class Candidate:
    """One design to choose from: a scenario document, the model's time for it and, once run at
    packet level, the time measured (the first iteration's, else the last finish)."""

    label: str  #: how the output names it, e.g. "rank 3 (tp 1, pp 2, dp 4, 8 micro-batches)"
    doc: dict
    predicted_s: float
    measured_s: float | None = None


@dataclass(frozen=True)
class DesignChoice:
    """The candidates in the model's order (the first is its best), which one to write, and why."""

    candidates: list[Candidate]
    chosen: Candidate
    why: str

    def report(self, scale: float, unit: str) -> list[str]:
        """The candidates' packet-level times (those run, with --verify) in ``unit`` (seconds
        times ``scale``), then which one was written and why."""
        lines = [
            f"packet level, {c.label}: {c.measured_s * scale:.3f} {unit} (predicted {c.predicted_s * scale:.3f} {unit})"
            for c in self.candidates
            if c.measured_s is not None
        ]
        return lines + [f"written: {self.why}"]


def packet_level_s(doc: dict, source: str) -> float:
    """Run a scenario document in memory (written nowhere): its first iteration's time, else
    its last finish, in seconds."""
    summary = run(prepare_scenario(validate_document(doc, source), source), write=False, progress=False).summary
    times = summary.get("iteration_ns") or [summary["last_finish_ns"]]
    return ns_to_s(times[0])


def _design_inputs(
    path: Path | str, overrides: Sequence[str], dest: Path | None, overwrite: bool, suffix: str
) -> tuple[Inputs, Path]:
    """A design's scenario, checked and built, and where the chosen one goes (``dest``, default
    NAME_SUFFIX.yaml), checked before anything is built."""
    scenario = load_scenario(path, list(overrides))
    dest = Path(dest) if dest is not None else Path(f"{scenario.name}_{suffix}.yaml")
    check_file(dest, "--out", overwrite)
    return check_inputs(scenario, str(path)), dest


def choose_design(candidates: list[Candidate], source: str, verify: bool) -> DesignChoice:
    """The design to write: with ``verify``, every candidate runs at packet level and the
    fastest there wins (the model's order breaks ties), since the model leaves contention out;
    without, the model's best."""
    best = candidates[0]
    if not verify:
        return DesignChoice(candidates, best, f"{best.label}, the fastest predicted (not run at packet level)")
    measured = [replace(c, measured_s=packet_level_s(c.doc, source)) for c in candidates]
    fastest = min(measured, key=lambda c: c.measured_s or 0.0)
    n = len(measured)
    if fastest is measured[0]:
        why = f"{fastest.label}, the fastest predicted and the fastest of the {n} run at packet level"
    else:
        why = (
            f"{fastest.label}, the fastest of the {n} run at packet level ({fmt_ns((fastest.measured_s or 0.0) * 1e9)} "
            f"against {fmt_ns((measured[0].measured_s or 0.0) * 1e9)} for {measured[0].label}, the fastest predicted)"
        )
    return DesignChoice(measured, fastest, why)


@dataclass
class ParallelDesign:
    """design --parallel: the splits that fit, fastest predicted first, and the one to write."""

    scenario: Scenario
    n_npus: int
    device_memory_gb: float
    searched: int  #: splits searched, fitting or not
    fitting: list[parallelism.Strategy]
    choice: DesignChoice
    dest: Path  #: where the chosen scenario goes

    @property
    def chosen(self) -> parallelism.Strategy:
        return self.fitting[[c.label for c in self.choice.candidates].index(self.choice.chosen.label)]

    def about(self) -> list[str]:
        """The written scenario's header: the search and the choice."""
        s = self.chosen
        return [
            f"split searched for {self.n_npus} NPUs with {self.device_memory_gb:g} GiB each: tp {s.tp}, pp {s.pp}, "
            f"dp {s.dp}, {s.micro_batches} micro-batches, predicted {s.predicted_s * 1e3:.3f} ms per iteration",
            f"written: {self.choice.why}",
        ]

    def report(self, top: int) -> list[str]:
        """What ``roce-emu design --parallel`` prints: how many splits fit, the ``top`` fastest
        predicted as a Markdown table, and the choice."""
        first = self.fitting[0]
        lines = [
            f"{len(self.fitting)} of {self.searched} splits fit in {self.device_memory_gb:g} GiB per NPU "
            f"(global batch {first.batch_per_rank * first.dp}); the fastest predicted:",
            "| rank | tp | pp | dp | micro-batches | batch per replica | memory GiB | predicted ms |",
            "|---|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {i} | {s.tp} | {s.pp} | {s.dp} | {s.micro_batches} | {s.batch_per_rank} | "
            f"{s.memory_bytes / parallelism.GIB:.2f} | {s.predicted_s * 1e3:.3f} |"
            for i, s in enumerate(self.fitting[:top], 1)
        ]
        return lines + self.choice.report(1e3, "ms")


def split_label(rank: int, s: parallelism.Strategy) -> str:
    return f"rank {rank} (tp {s.tp}, pp {s.pp}, dp {s.dp}, {s.micro_batches} micro-batches)"


def design_parallel(
    path: Path | str,
    overrides: Sequence[str],
    device_memory_gb: float,
    verify_top: int = 0,
    dest: Path | None = None,
    overwrite: bool = False,
) -> ParallelDesign:
    """Rank the training model's tp x pp x dp splits that fit in ``device_memory_gb`` GiB per NPU
    (parallelism.search) and choose one (choose_design: with ``verify_top`` > 0, the fastest of
    the best ``verify_top`` at packet level). ``dest`` (default NAME_parallel.yaml) is checked
    before anything runs; the caller writes it. Raises ScenarioError for bad input, an existing
    ``dest`` without ``overwrite``, or when no split fits."""
    if not device_memory_gb > 0:
        raise ScenarioError("--device-memory-gb", "", f"{device_memory_gb} is not a positive memory size (GiB)")
    inputs, dest = _design_inputs(path, overrides, dest, overwrite, "parallel")
    ranked = parallelism.search(inputs.scenario, inputs.fabric, str(path))
    fitting = [s for s in ranked if s.fits(device_memory_gb)]
    if not fitting:
        least = min(ranked, key=lambda s: s.memory_bytes)
        raise ScenarioError(
            "--device-memory-gb",
            "",
            f"{device_memory_gb:g} GiB: no split fits; the leanest "
            f"(tp {least.tp}, pp {least.pp}, dp {least.dp}, {least.micro_batches} micro-batches) "
            f"needs {least.memory_bytes / parallelism.GIB:.2f} GiB per NPU",
        )
    doc = inputs.scenario.model_dump(mode="json")
    candidates = [
        Candidate(split_label(i, s), parallelism.with_strategy(doc, inputs.scenario, s), s.predicted_s)
        for i, s in enumerate(fitting[: max(verify_top, 1)], 1)
    ]
    choice = choose_design(candidates, str(path), verify_top > 0)
    return ParallelDesign(inputs.scenario, inputs.fabric.n_hosts, device_memory_gb, len(ranked), fitting, choice, dest)


@dataclass
class RatesDesign:
    """design (bandwidth): the model's rates, the equal split, a_d, and the rates to write."""

    scenario: Scenario
    best: design.Design
    bits: np.ndarray  #: a_d, the bits per NPU on each dimension
    equal_gbps: np.ndarray  #: the equal split's rates
    choice: DesignChoice
    dest: Path  #: where the chosen scenario goes
    budget: str  #: the budget as the output names it, "800 Gb/s" or "cost budget 3000"

    def about(self) -> list[str]:
        """The written scenario's header: the design and the choice."""
        designed, equal = self.choice.candidates
        return [
            f"rates designed for {self.budget} per NPU, overlap {self.best.overlap}: model time "
            f"{designed.predicted_s * 1e6:.3f} us (equal split {equal.predicted_s * 1e6:.3f} us)",
            f"written: {self.choice.why}",
        ]

    def report(self) -> list[str]:
        """What ``roce-emu design`` prints: the rates per dimension as a Markdown table, the
        model's times, and the choice."""
        designed, equal = self.choice.candidates
        lines = [
            "| dimension | kind | size | algorithm | links per NPU (busy) | designed Gb/s | designed GB/s per NPU "
            "| equal split Gb/s | bits per NPU |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        topo = self.scenario.topology
        assert isinstance(topo, MultiDim)  # design.design refuses any other kind
        rows = zip(topo.dims, topo.algorithms(), self.best.used, self.best.rates_gbps, self.equal_gbps, self.bits)
        lines += [
            f"| {i} | {dim.kind} | {dim.size} | {alg} | {dim.links()} ({used:g}) | {rate:.3f} | "
            f"{rate * dim.links() / 8:.3f} | {eq:.3f} | {bits:.4g} |"
            for i, (dim, alg, used, rate, eq, bits) in enumerate(rows)
        ]
        lines.append(
            f"model time ({self.best.overlap}): designed {designed.predicted_s * 1e6:.3f} us, equal split "
            f"{equal.predicted_s * 1e6:.3f} us"
        )
        return lines + self.choice.report(1e6, "us")


def write_design(d: "RatesDesign | ParallelDesign", source: str, overwrite: bool = False) -> Path:
    """Write a design's chosen scenario to its ``dest``, headed "Written by roce-emu from SOURCE"
    and the design's ``about`` lines (results/scenario_file.py)."""
    return write_scenario(d.choice.chosen.doc, d.dest, [source], [], overwrite, d.about())


def design_rates(
    path: Path | str,
    overrides: Sequence[str],
    budget_gbps: float | None,
    overlap: str = "max",
    costs: list[float] | None = None,
    cost_budget: float | None = None,
    verify: bool = False,
    dest: Path | None = None,
    overwrite: bool = False,
) -> RatesDesign:
    """Split each NPU's bandwidth budget across a multi_dim fabric's dimensions (design.design)
    and choose between the designed rates and an equal split (choose_design: with ``verify``,
    the faster at packet level; else the designed). ``dest`` (default NAME_design.yaml) is
    checked before anything runs; the caller writes it. Raises ScenarioError for bad input or
    an existing ``dest`` without ``overwrite``."""
    inputs, dest = _design_inputs(path, overrides, dest, overwrite, "design")
    best, a = design.design(
        inputs.scenario, inputs.workload, str(path), budget_gbps or 0.0, overlap, costs, cost_budget
    )
    equal = design.equal_split(best.weights, best.budget)
    doc = inputs.scenario.model_dump(mode="json")
    candidates = [
        Candidate(label, design.with_rates(doc, rates), design.model_time(a, rates, overlap, best.used))
        for label, rates in (("designed", best.rates_gbps), ("equal split", equal))
    ]
    budget = f"cost budget {cost_budget:g}" if costs is not None else f"{budget_gbps:g} Gb/s"
    choice = choose_design(candidates, str(path), verify)
    return RatesDesign(inputs.scenario, best, a, equal, choice, dest, budget)
