"""Inference requests' results (workload/inference.py): requests.csv, a row per request, and
summary.json's ``inference``: how many requests arrived and finished, and the finished ones'
latency (arrival to the last worker's last layer) as its mean and percentiles."""

import numpy as np

from ..core.state import World
from ..units import format_ps_as_ns, ps_to_ns
from ..workload import Workload

REQUEST_COLUMNS = ("request", "arrival_ns", "finish_ns", "latency_ns")
PERCENTILES = (50, 90, 99)


def request_times(world: World, workload: Workload) -> tuple[np.ndarray, np.ndarray]:
    """(arrival, finish) of every request in ps, finish -1 for one that did not finish."""
    requests = workload.requests
    return workload.tasks.earliest_ps[requests.first], world.task["finish_ps"][requests.end].astype(np.int64)


def request_rows(world: World, workload: Workload) -> tuple[tuple, list[tuple]]:
    """requests.csv: (columns, rows), with the request's job where the scenario has jobs."""
    arrival, finish = request_times(world, workload)
    rows = [
        (r, format_ps_as_ns(a), format_ps_as_ns(f) if f >= 0 else "", format_ps_as_ns(f - a) if f >= 0 else "")
        for r, (a, f) in enumerate(zip(arrival.tolist(), finish.tolist()))
    ]
    if workload.job is None:
        return REQUEST_COLUMNS, rows
    names = [part.name for part in workload.jobs]
    jobs = workload.job[workload.requests.first].tolist()
    return REQUEST_COLUMNS + ("job",), [row + (names[j],) for row, j in zip(rows, jobs)]


def latency_summary(latency_ps: np.ndarray, requests: int) -> dict:
    """summary.json's ``inference``: the requests, those finished, and the finished ones'
    latency in ns: mean and PERCENTILES (linear between the nearest ranks, NumPy's default);
    None for each when none finished."""
    lat = np.asarray(latency_ps, np.int64)
    out: dict = {"requests": requests, "finished": len(lat)}
    out["latency_mean_ns"] = ps_to_ns(float(lat.mean())) if len(lat) else None
    for q in PERCENTILES:
        out[f"latency_p{q}_ns"] = ps_to_ns(float(np.percentile(lat, q))) if len(lat) else None
    return out


def inference_summary(world: World, workload: Workload) -> dict:
    """``{"inference": latency_summary}`` of a workload with requests, else {}."""
    if not len(workload.requests):
        return {}
    arrival, finish = request_times(world, workload)
    done = finish >= 0
    return {"inference": latency_summary(finish[done] - arrival[done], len(arrival))}
