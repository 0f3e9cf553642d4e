"""The Python entry points used by the CLI and the tests: prepare a scenario, run it, write results."""

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from .config.cc_params import params_from_engine
from .config import load_scenario
from .config.schema import Scenario
from .core.state import World
from .fabric.topology import Fabric
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
from .results.links import LINK_COLUMNS, hottest_links, link_rows
from .results.ns3_format import fct_text, pfc_text
from .results.output import frame, read_summary, write_run_dir
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
from .run.driver import Limits, RunOutcome, simulate
from .run.inputs import accuracy_warnings, check_inputs
from .run.invariants import engine_fault
from .run.world import build_world
from .workload import Workload, collective_flow_mask, ns_to_ps


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
        """What a run of it should say about the accuracy of an approximation it uses."""
        return accuracy_warnings(self.scenario, self.fabric, self.workload)


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
    for table in sorted([*path.glob("*.csv"), *path.glob("*.parquet")]):
        frames[table.stem] = pd.read_parquet(table) if table.suffix == ".parquet" else pd.read_csv(table)
    return RunDirectory(summary, frames)


def prepare(path: Path | str, overrides: Sequence[str] = ()) -> Prepared:
    """Load, validate and compile a scenario; raises ScenarioError for any bad input."""
    scenario = load_scenario(path, overrides)
    return prepare_scenario(scenario, str(path), tuple(overrides))


def prepare_scenario(scenario: Scenario, source: str = "<scenario>", overrides: tuple = ()) -> Prepared:
    inputs = check_inputs(scenario, source)
    world = build_world(inputs)
    return Prepared(scenario, source, inputs.fabric, inputs.workload, world, tuple(overrides))


def normalized_document(prepared: Prepared) -> dict:
    """The scenario with every default filled in as a run uses it: the congestion-control
    parameters in the units of their names (computed ones included) and the ECN thresholds
    (at the reference rate) instead of their 'default' markers."""
    doc = prepared.scenario.model_dump(mode="json")
    network = prepared.scenario.network
    algorithm = network.cc.algorithm
    doc["network"]["cc"]["params"] = params_from_engine(algorithm, prepared.world.ccp)
    kmin, kmax, pmax = network.switch.ecn.resolved(algorithm)
    doc["network"]["switch"]["ecn"].update(kmin_bytes=int(kmin), kmax_bytes=int(kmax), pmax=float(pmax))
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
    """Simulate a prepared scenario and write flows.csv and summary.json (atomically) to ``out``."""
    sc = prepared.scenario
    limits = Limits(ns_to_ps(sc.sim.max_time_ns), sc.sim.max_events, sc.sim.max_wall_s)
    outcome = simulate(
        prepared.world,
        limits,
        slice_events or sc.sim.slice_events,
        progress=progress,
        label=sc.name,
        check=check,
        fast_forward=sc.sim.fast_forward == "exact",
    )
    if outcome.status == "invariant" and not outcome.reason:
        outcome.reason = engine_fault(outcome.world, prepared.fabric)
    if outcome.status == "stalled":
        deadlock, report = stall_report(outcome.world, prepared.fabric)
        outcome.status = "deadlock" if deadlock else "stalled"
        outcome.reason = report
    table = flow_table(outcome.world)
    info = summary(outcome.world, prepared.fabric, sc, outcome, table)
    timeline = rank_timeline(outcome.world, prepared.workload)
    info.update(iteration_summary(outcome.world, prepared.workload, timeline))
    info["hottest_links"] = hottest_links(outcome.world, prepared.fabric)
    if prepared.workload.notes:
        info["workload_notes"] = list(prepared.workload.notes)
    if prepared.warnings:
        info["warnings"] = list(prepared.warnings)
    info["provenance"] = provenance(prepared.source, prepared.overrides, sc.seed)
    target = None
    if write:
        target = Path(out) if out is not None else default_out_dir(sc)
        texts = {"scenario.yaml": scenario_yaml(normalized_document(prepared))}
        if "ns3" in sc.output.formats:
            texts["fct.txt"] = fct_text(table, prepared.fabric)
            texts["pfc.txt"] = pfc_text(outcome.world, prepared.fabric, sc.topology, outcome.trace)
        write_run_dir(target, info, run_tables(prepared, outcome, table, timeline), sc.output.format, texts)
    return RunResult(outcome, table, info, target, prepared)


def run_tables(
    prepared: Prepared, outcome: RunOutcome, table: dict, timeline: list[tuple] | None = None
) -> dict[str, tuple]:
    """Every table of a run directory: flows, tasks, collectives, the rank timeline, traces and
    links (columns, rows); ``timeline`` is rank_timeline's result if the caller has it."""
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
    return {"flows.csv": (FLOW_COLUMNS, flow_rows(table, written)), **tables}


def run_scenario(
    path: Path | str,
    overrides: Sequence[str] = (),
    out: Path | None = None,
    progress: bool | None = False,
    slice_events: int | None = None,
    write: bool = True,
) -> RunResult:
    return run(prepare(path, overrides), out, progress, slice_events, write)
