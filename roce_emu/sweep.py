"""Ablation sweeps: a grid of overrides x seeds, one process per point, resumable, local or on dask.

Every point is the scenario with its overrides applied, validated up front (a bad key or value
stops the sweep before anything runs). Its results go to ``DIR/points/<hash>/``, where the hash
is of the resolved scenario, written atomically by the point's own process; a point whose
directory exists is done and is not run again, so an interrupted sweep resumes where it
stopped. A point that fails (a deadlock, a combination the fabric cannot hold) is recorded
with its status and reason and does not stop the others. ``DIR/results.csv`` has one row per
point: the swept keys, then the summary's scalar fields.

Ctrl-C (SIGINT) or SIGTERM stops a sweep: no new point starts, local worker processes are
killed and their unfinished points cleared, results.csv is written for the finished points,
and the exception goes on to the caller (the CLI exits 130 or 143). The workers ignore both
signals themselves (Ctrl-C reaches the whole process group): the sweep process alone decides,
so a worker never drops its point half-way and goes on to the next. On dask the points not
started are cancelled; a point a worker is running finishes there and is kept.
"""

import hashlib
import itertools
import json
import logging
import os
import shutil
import signal
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from .config.load import apply_override, parse_override, read_document, validate_document
from .config.schema import Scenario
from .errors import ScenarioError
from .results.destination import PROBE_PREFIX, check_directory, make_directory
from .results.output import write_csv, write_run_files

POINT_FILE = "point.json"  # what a point is: its overrides, seed and hash


@dataclass(frozen=True)
class Point:
    overrides: tuple[str, ...]  # KEY=VALUE, the swept values (and the seed)
    values: tuple[tuple[str, object], ...]  # (key, value) for results.csv
    digest: str  # short hash of the resolved scenario


@dataclass
class SweepSpec:
    scenario: Path
    grid: dict  # key -> list of values
    repeat: int = 1  # seeds per point: scenario seed, +1, ...
    fixed: tuple[str, ...] = ()  # --set overrides applied to every point


def parse_grid(texts) -> dict:
    """``--grid KEY=v1,v2`` options -> {key: [values]} (each value read like a --set value)."""
    grid = {}
    for text in texts:
        key, eq, raw = text.partition("=")
        key = key.strip()
        if not eq or not key or any(part == "" for part in key.split(".")):
            raise ScenarioError("--grid", text, "expected KEY=v1,v2,..., e.g. network.cc.algorithm=none,dcqcn")
        items = raw.split(",")
        if any(item.strip() == "" for item in items):
            raise ScenarioError("--grid", key, f"'{raw}' has an empty value; write KEY=v1,v2,...")
        if key in grid:
            raise ScenarioError("--grid", key, "is given twice")
        grid[key] = [parse_override(f"{key}={item.strip()}")[1] for item in items]
    return grid


def load_sweep_file(path: Path) -> SweepSpec:
    """A sweep described in YAML: ``scenario: FILE``, ``grid: {key: [values]}``, ``repeat: N``, ``set: [...]``."""
    doc = read_document(path)
    allowed = {"scenario", "grid", "repeat", "set"}
    for key in doc:
        if key not in allowed:
            raise ScenarioError(str(path), key, f"unknown key '{key}' (allowed: {', '.join(sorted(allowed))})")
    if "scenario" not in doc:
        raise ScenarioError(str(path), "scenario", "required key is missing")
    grid = doc.get("grid") or {}
    if not isinstance(grid, dict) or not all(isinstance(v, list) and v for v in grid.values()):
        raise ScenarioError(str(path), "grid", "must map each key to a non-empty list of values")
    repeat = doc.get("repeat", 1)
    if not isinstance(repeat, int) or repeat < 1:
        raise ScenarioError(str(path), "repeat", f"{repeat!r} is not allowed: a positive integer")
    return SweepSpec(path.parent / doc["scenario"], grid, repeat, tuple(doc.get("set") or ()))


def is_sweep_file(path: Path) -> bool:
    """A sweep file has a top-level 'grid' or 'scenario' key; a scenario file has neither."""
    doc = read_document(path)
    return "grid" in doc or "scenario" in doc


def sweep_spec(
    path: Path | str, grid: Sequence[str] = (), overrides: Sequence[str] = (), repeat: int | None = None
) -> SweepSpec:
    """The sweep ``roce-emu sweep PATH`` runs: PATH is a scenario swept over the ``--grid``
    options (``KEY=v1,v2``), or, without them, a sweep file (load_sweep_file) or a scenario
    run as one point. The ``--set`` ``overrides`` apply to every point, after a sweep file's
    own; ``repeat`` (default the sweep file's, else 1) is the seeds per point."""
    path = Path(path)
    if grid or not is_sweep_file(path):
        return SweepSpec(path, parse_grid(grid), repeat or 1, tuple(overrides))
    spec = load_sweep_file(path)
    spec.fixed = spec.fixed + tuple(overrides)
    spec.repeat = repeat or spec.repeat
    return spec


def default_out_dir(sweep_or_scenario: Path | str) -> Path:
    """Where a sweep goes without --out: sweeps/<file name without suffix>."""
    return Path("sweeps") / Path(sweep_or_scenario).stem


def points(spec: SweepSpec) -> list[Point]:
    """Every grid point x seed, validated; raises ScenarioError naming the bad key."""
    base = read_document(Path(spec.scenario))
    for text in spec.fixed:
        apply_override(base, *parse_override(text))
    seed0 = int(base.get("seed", 1)) if isinstance(base.get("seed", 1), int) else 1
    keys = list(spec.grid)
    out = []
    for combo in itertools.product(*(spec.grid[k] for k in keys)):
        for r in range(spec.repeat):
            doc = json.loads(json.dumps(base))
            values = list(zip(keys, combo))
            for key, value in values:
                _apply_grid_value(doc, key, value)
            if spec.repeat > 1:
                doc["seed"] = seed0 + r
                values.append(("seed", seed0 + r))
            scenario = _validate(doc, spec.scenario, values)
            resolved = json.dumps(scenario.model_dump(mode="json"), sort_keys=True)
            digest = hashlib.sha256(resolved.encode()).hexdigest()[:12]
            overrides = tuple(spec.fixed) + tuple(f"{k}={json.dumps(v)}" for k, v in values)
            out.append(Point(overrides, tuple(values), digest))
    return out


def _apply_grid_value(doc: dict, key: str, value) -> None:
    try:
        apply_override(doc, key, value)
    except ScenarioError as err:
        raise ScenarioError("--grid", key, err.message) from None


def _validate(doc: dict, source: Path, values) -> Scenario:
    try:
        return validate_document(doc, str(source))
    except ScenarioError as bad:
        where = ", ".join(f"{k}={v}" for k, v in values)
        raise ScenarioError("--grid", bad.key, f"{bad.message} (at {where})") from None


def run_point(scenario_path: str, overrides: tuple[str, ...], point_dir: str, point: dict) -> dict:
    """Run one point in this process and write its directory atomically; returns its summary."""
    from . import api

    target = Path(point_dir)
    started = time.time()
    try:
        prepared = api.prepare(scenario_path, list(overrides))
        result = api.run(prepared, target, progress=False)
        summary = result.summary
    except ScenarioError as err:  # a combination that cannot be built (e.g. buffer vs headroom)
        summary = {"status": "error", "reason": str(err)}
        _write_error(target, summary)
    except Exception as err:  # noqa: BLE001 - recorded, the sweep goes on
        summary = {"status": "error", "reason": f"{type(err).__name__}: {err}"}
        _write_error(target, summary)
    # written last and atomically: a point is done exactly when this file exists
    tmp = target / f".{POINT_FILE}.tmp"
    tmp.write_text(json.dumps({**point, "started": started, "finished": time.time()}) + "\n")
    os.replace(tmp, target / POINT_FILE)
    return summary


def _write_error(target: Path, summary: dict) -> None:
    """A failed point's directory: its summary alone (unchecked: its destination may be what failed)."""
    write_run_files(target, summary, {})


def is_done(point_dir: Path) -> bool:
    return (point_dir / POINT_FILE).is_file() and (point_dir / "summary.json").is_file()


def run_sweep(
    spec: SweepSpec, out: Path, jobs: int = 1, scheduler: str | None = None, progress: bool | None = None
) -> tuple[int, int, Path]:
    """Run the missing points; rewrite results.csv. Returns (points run now, points in all, csv).
    ``out`` must be new, empty or a sweep directory roce-emu wrote (results/destination.py)."""
    check_directory(out, "--out", "sweep", inputs=[spec.scenario])
    todo_all = points(spec)
    client = _connect(scheduler) if scheduler else None  # before anything is written
    make_directory(out, "sweep")
    (out / "points").mkdir(exist_ok=True)
    todo = [p for p in todo_all if not is_done(out / "points" / p.digest)]
    clear_unfinished(out, todo)  # points a killed sweep left half-done start again
    args = [
        (
            str(spec.scenario),
            p.overrides,
            str(out / "points" / p.digest),
            {"hash": p.digest, "overrides": list(p.overrides)},
        )
        for p in todo
    ]
    disable = None if progress is None else not progress
    bar = tqdm(
        total=len(todo_all),
        initial=len(todo_all) - len(todo),
        unit="point",
        desc="sweep",
        disable=disable,
        dynamic_ncols=True,
    )
    try:
        if todo:
            warm_engine_cache()
            if client is not None:
                _run_dask(client, args, bar)
            else:
                _run_local(jobs, args, bar)
    except BaseException:  # Ctrl-C, SIGTERM, a failure: keep what finished, ready to plot
        if client is None:  # on dask a running point may still be writing its directory
            clear_unfinished(out, todo)
        write_results(out, todo_all)
        raise
    finally:
        bar.close()
        if client is not None:
            client.close()
    path = write_results(out, todo_all)
    write_sweep_record(out, spec, len(todo_all))
    return len(todo), len(todo_all), path


def clear_unfinished(out: Path, todo: list[Point]) -> None:
    """Remove what the points of ``todo`` that did not finish left behind (their directories
    and half-written temporary ones), so that each starts again from nothing, and the
    writability probes (results/destination.py) a killed process left."""
    for p in todo:
        if not is_done(out / "points" / p.digest):
            shutil.rmtree(out / "points" / p.digest, ignore_errors=True)
    for pattern in (".*.tmp-*", f"{PROBE_PREFIX}*"):
        for leftover in (out / "points").glob(pattern):
            if leftover.is_dir() and not leftover.is_symlink():
                shutil.rmtree(leftover, ignore_errors=True)
            else:
                leftover.unlink(missing_ok=True)


def write_sweep_record(out: Path, spec: SweepSpec, n_points: int) -> None:
    """sweep.json: what the sweep is (scenario, grid, seeds, fixed overrides) and the code and
    platform that last ran it; each point's summary.json carries its own provenance too."""
    from .results.provenance import provenance

    record = {
        "scenario": str(spec.scenario),
        "grid": spec.grid,
        "repeat": spec.repeat,
        "fixed": list(spec.fixed),
        "points": n_points,
        "provenance": provenance(str(spec.scenario), spec.fixed, None),
    }
    tmp = out / f".sweep.json.tmp-{os.getpid()}"
    tmp.write_text(json.dumps(record, indent=2, default=str) + "\n")
    os.replace(tmp, out / "sweep.json")


def warm_engine_cache() -> None:
    """Compile (or load) the engine once here, so worker processes only read the cache:
    several processes compiling into one Numba cache at once can crash (numba#4807). The first
    point that needs a fast-forward kernel compiles it under the driver's lock while the others
    wait (run/driver.compiling)."""
    from .api import prepare_scenario, run

    sc = Scenario.model_validate(
        {
            "name": "warm",
            "topology": {"kind": "single_switch", "hosts": 2},
            "workload": {"flows": [{"src": 0, "dst": 1, "bytes": 1000}]},
        }
    )
    run(prepare_scenario(sc), write=False, progress=False)


def _init_worker() -> None:
    """A local worker's initializer. SIGINT and SIGTERM are the sweep process's to act on. A
    worker shows no progress bar: tqdm gets a thread lock instead of its default
    multiprocessing one, a semaphore that a killed worker would leave registered (and Python
    would warn about at exit)."""
    import threading

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    tqdm.set_lock(threading.RLock())


def _run_local(jobs: int, args, bar) -> None:
    import multiprocessing

    pool = ProcessPoolExecutor(
        max_workers=max(1, jobs),
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_init_worker,
    )
    try:
        futures = [pool.submit(run_point, *a) for a in args]
        for future in as_completed(futures):
            future.result()
            bar.update(1)
    except BaseException:
        _stop(pool)
        raise
    pool.shutdown()


def _stop(pool: ProcessPoolExecutor) -> None:
    """Cancel the points not started and kill the processes running the others (the executor
    has no public way to stop a running task; waiting would run every queued point)."""
    workers = list((pool._processes or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in workers:
        process.kill()
    for process in workers:
        process.join(10)
    pool.shutdown(wait=True)  # the executor's thread notices the dead workers and closes its queues


#: how long to wait for a dask scheduler to answer
CONNECT_TIMEOUT_S = 10


class _QuietInterruptedSync(logging.Filter):
    """Drops the traceback distributed's ``sync`` logs when Ctrl-C reaches it before its call has
    started: its cancel callback then reads a variable not yet set (a NameError in the client's
    event loop thread, harmless: the sweep stops as asked). Every other record passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not (isinstance(error, NameError) and "sync.<locals>.cancel" in record.getMessage())


def _connect(address: str):
    """A dask client of the scheduler at address, or a one-line error naming it."""
    try:
        from distributed import Client
    except ImportError:
        raise ScenarioError("--scheduler", address, "needs dask.distributed: pip install 'roce-emu[dask]'") from None
    tornado_log = logging.getLogger("tornado.application")
    if not any(isinstance(f, _QuietInterruptedSync) for f in tornado_log.filters):
        tornado_log.addFilter(_QuietInterruptedSync())
    try:
        return Client(address, timeout=f"{CONNECT_TIMEOUT_S}s")
    except (OSError, TimeoutError, ValueError) as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ScenarioError(
            "--scheduler", address, f"no dask scheduler answered within {CONNECT_TIMEOUT_S} s ({reason[:120]})"
        ) from None


def _run_dask(client, args, bar) -> None:
    from distributed import as_completed as dask_completed

    futures = [client.submit(run_point, *a, pure=False) for a in args]
    try:
        for future in dask_completed(futures):
            future.result()
            bar.update(1)
    except BaseException:
        client.cancel(futures)  # the points not started; a running one finishes on its worker
        raise


def _flat(summary: dict) -> dict:
    """The summary's scalar fields, and each job's as ``jobs.NAME.FIELD`` (a run with ``jobs``);
    lists and nested mappings are left out (the summary has a scalar beside each list, such as
    mean_iteration_ns beside iteration_ns)."""
    out = {}
    for key, value in summary.items():
        if key == "jobs" and isinstance(value, list):
            for job in value:
                out.update({f"jobs.{job['job']}.{k}": v for k, v in _flat(job).items() if k != "job"})
        elif not isinstance(value, (dict, list)):
            out[key] = value
    return out


def swept_columns(key: str, value) -> dict:
    """A swept value as results.csv columns: a mapping flattened into KEY.SUBKEY columns
    (topology.kind, topology.k, ...), a list as JSON, anything else as it is."""
    if isinstance(value, dict):
        out = {}
        for sub, inner in value.items():
            out.update(swept_columns(f"{key}.{sub}", inner))
        return out
    return {key: json.dumps(value) if isinstance(value, list) else value}


def write_results(out: Path, all_points: list[Point]) -> Path:
    """results.csv from every point directory, in grid order, written atomically. The swept
    values come first and win over a summary field of the same name (the summary's topology
    is the fabric kind; the swept one tells a k=4 from a k=6 fat-tree)."""
    swept: dict[str, None] = {}  # every point's swept columns, in order
    for p in all_points:
        for key, value in p.values:
            swept.update(dict.fromkeys(swept_columns(key, value)))
    rows, columns = [], ["point", *swept]
    for p in all_points:
        d = out / "points" / p.digest
        if not is_done(d):
            continue
        summary = json.loads((d / "summary.json").read_text())
        row = {"point": p.digest, **_flat(summary)}
        for key, value in p.values:
            row.update(swept_columns(key, value))
        for key in row:
            if key not in columns:
                columns.append(key)
        rows.append(row)
    tmp = out / f".results.csv.tmp-{os.getpid()}"
    write_csv(tmp, columns, [{c: r.get(c, "") for c in columns} for r in rows])
    os.replace(tmp, out / "results.csv")
    return out / "results.csv"
