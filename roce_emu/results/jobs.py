"""Per-job results of a scenario with ``jobs``: jobs.csv, summary.json's ``jobs``, the rank
timeline per job, and the ``job`` column of flows.csv, tasks.csv and collectives.csv.

A job's results are those of its view of the workload (job_view): its own collectives, compute
tasks and iteration ends, its windows starting at its start_ns, so that its iteration times
read as they would if it ran alone.
"""

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ..core.state import World
from ..errors import ScenarioError
from ..units import format_ps_as_ns, ps_to_ns
from ..workload import Workload
from .output import read_summary
from .iteration import TIMELINE_COLUMNS, iteration_summary, rank_timeline, timeline_rows
from .requests import inference_summary

JOB_COLUMNS = (
    "job",
    "hosts",
    "priority",
    "cc",
    "start_ns",
    "last_finish_ns",
    "time_ns",
    "iteration",
    "iteration_ns",
)


@dataclass
class JobResult:
    summary: dict  #: summary.json's entry of the job
    timeline: list  #: rank_timeline of the job's view
    start_ps: int
    last_finish_ps: int  #: -1 if some task of the job did not finish


def job_view(workload: Workload, i: int) -> Workload:
    """Job i's part of a workload: its collectives, iteration ends, requests and start, its tasks marked own."""
    part = workload.jobs[i]
    assert workload.job is not None
    return replace(
        workload,
        collectives=[workload.collectives[k] for k in part.collectives],
        iteration_ends=part.iteration_ends,
        start_ps=part.start_ps,
        own=workload.job == i,
        requests=workload.requests.picked(workload.job[workload.requests.first] == i),
    )


def job_results(world: World, workload: Workload) -> list[JobResult]:
    """Each job's summary (where it ran, its priority and congestion control, its last finish,
    its time from start to last finish, its iteration times with their breakdown, and its
    inference requests' latency) and rank timeline."""
    out = []
    # a flow's task finishes when its receiver has the last byte, the flow when its last ACK is
    # back (summary.json's last_finish_ns): a job's last finish is the later
    finish = world.task["finish_ps"].copy()
    n_flows = len(workload.flows)
    finish[:n_flows] = np.where(finish[:n_flows] >= 0, np.maximum(finish[:n_flows], world.flow["finish_ps"]), -1)
    for i, part in enumerate(workload.jobs):
        view = job_view(workload, i)
        mine = finish[view.own_tasks()]
        last = int(mine.max()) if len(mine) and (mine >= 0).all() else -1
        timeline = rank_timeline(world, view)
        summary = {
            "job": part.name,
            "hosts": part.hosts,
            "priority": part.priority,
            "cc": part.cc,
            "start_ns": ps_to_ns(part.start_ps),
            "last_finish_ns": ps_to_ns(last) if last >= 0 else None,
            "time_ns": ps_to_ns(last - part.start_ps) if last >= 0 else None,
            **iteration_summary(world, view, timeline),
            **inference_summary(world, view),
        }
        out.append(JobResult(summary, timeline, part.start_ps, last))
    return out


def jobs_rows(results: list[JobResult]) -> list[tuple]:
    """jobs.csv: a row per job and iteration (one row with the iteration left empty for a job
    without iterations or whose iterations did not all finish)."""
    rows: list[tuple] = []
    for r in results:
        s = r.summary
        done = r.last_finish_ps >= 0
        head = (
            s["job"],
            " ".join(map(str, s["hosts"])),
            s["priority"],
            s["cc"],
            format_ps_as_ns(r.start_ps) or "0",
            format_ps_as_ns(r.last_finish_ps) if done else "",
            format_ps_as_ns(r.last_finish_ps - r.start_ps) if done else "",
        )
        times = s.get("iteration_ns") or []
        rows.extend(head + (str(it), repr(t)) for it, t in enumerate(times))
        if not times:
            rows.append(head + ("", ""))
    return rows


def add_job_columns(tables: dict[str, tuple], workload: Workload, results: list[JobResult]) -> None:
    """Add the ``job`` column to flows.csv, tasks.csv and collectives.csv (in place), and the
    tables of a run with jobs: timeline.csv per job (its ``job`` column first) and jobs.csv."""
    assert workload.job is not None
    names = [part.name for part in workload.jobs]
    job = workload.job
    for name, id_column in (("flows.csv", "flow_id"), ("tasks.csv", "task_id")):
        if name in tables:
            columns, rows = tables[name]
            for row in rows:
                row["job"] = names[job[row[id_column]]]
            tables[name] = (columns + ("job",), rows)
    if "collectives.csv" in tables:
        columns, rows = tables["collectives.csv"]
        for row, c in zip(rows, workload.collectives):
            row["job"] = names[job[next(iter(c.end.values()))]] if c.end else names[job[c.flows[0]]]
        tables["collectives.csv"] = (columns + ("job",), rows)
    timeline = [(name,) + row for name, r in zip(names, results) for row in timeline_rows(r.timeline)]
    if timeline:
        tables["timeline.csv"] = (("job",) + TIMELINE_COLUMNS, timeline)
    tables["jobs.csv"] = (JOB_COLUMNS, jobs_rows(results))


SLOWDOWN_COLUMNS = (
    "job",
    "time_alone_ns",
    "time_ns",
    "slowdown",
    "mean_iteration_alone_ns",
    "mean_iteration_ns",
    "iteration_slowdown",
)


def jobs_of(run_dir: Path) -> list[dict]:
    """summary.json's ``jobs`` of a run directory (ScenarioError if it has none)."""
    jobs = read_summary(run_dir).get("jobs")
    if not jobs:
        raise ScenarioError(str(run_dir), "jobs", "the run has no jobs: give a run of a scenario with jobs")
    return jobs


def baseline_jobs(paths: list[Path], names: list[str]) -> dict[str, dict]:
    """Each named job's summary entry as run alone, from run directories (or folders of them)
    whose jobs include it: one entry per job, found exactly once (ScenarioError otherwise)."""
    runs = []
    for path in paths:
        path = Path(path)
        if (path / "summary.json").is_file():
            runs.append(path)
        elif path.is_dir():
            runs += sorted(p.parent for p in path.glob("*/summary.json"))
        else:
            raise ScenarioError(str(path), "--baseline", "not a run directory nor a folder of them (nor 'alone')")
    found: dict[str, tuple[Path, dict]] = {}
    for run_dir in runs:
        for job in read_summary(run_dir).get("jobs") or []:
            if job["job"] in found:
                raise ScenarioError(
                    str(run_dir),
                    "--baseline",
                    f"job '{job['job']}' is in {found[job['job']][0]} too: give one run of it",
                )
            found[job["job"]] = (run_dir, job)
    missing = [name for name in names if name not in found]
    if missing:
        where = ", ".join(map(str, paths))
        raise ScenarioError(
            where, "--baseline", f"no run of job {', '.join(missing)} alone (jobs found: {', '.join(found) or 'none'})"
        )
    return {name: found[name][1] for name in names}


def slowdown_rows(together: list[dict], alone: dict[str, dict]) -> list[tuple]:
    """jobs_slowdown.csv: each job's time (start to last finish) and mean iteration time
    among the other jobs against alone, and their ratios (empty where a run did not finish)."""

    def ratio(a, b):
        return repr(a / b) if a is not None and b else ""

    def cell(v):
        return "" if v is None else repr(v)

    rows = []
    for job in together:
        base = alone[job["job"]]
        t, t0 = job.get("time_ns"), base.get("time_ns")
        it, it0 = job.get("mean_iteration_ns"), base.get("mean_iteration_ns")
        rows.append((job["job"], cell(t0), cell(t), ratio(t, t0), cell(it0), cell(it), ratio(it, it0)))
    return rows


def slowdown_markdown(rows: list) -> str:
    """``plot --baseline``'s table on stdout: the slowdown rows (SLOWDOWN_COLUMNS) as Markdown, numbers in four
    significant digits."""
    from .compare import table

    return table(
        list(SLOWDOWN_COLUMNS), [[f"{float(c):.4g}" if c and i else c for i, c in enumerate(row)] for row in rows]
    )
