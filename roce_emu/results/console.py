"""The line ``roce-emu run`` prints when a run ends: its iteration times (or its jobs' times),
its inference requests' latency, flows, drops, pauses and events, in the units a reader takes
in at a glance (us or ms)."""

from pathlib import Path


def fmt_ns(ns: float | None) -> str:
    """A time in ns as us below a millisecond, else ms (three decimals); "never" for None."""
    if ns is None:
        return "never"
    return f"{ns / 1e3:.3f} us" if ns < 1e6 else f"{ns / 1e6:.3f} ms"


def iterations_text(summary: dict) -> str:
    """The iterations part of the line: the mean, then each iteration in its unit (min .. max
    beyond eight); else how many iterations finished; else nothing."""
    if summary.get("iteration_ns"):
        times, mean = summary["iteration_ns"], summary["mean_iteration_ns"]
        unit, scale = ("ms", 1e6) if mean >= 1e6 else ("us", 1e3)
        few = len(times) <= 8
        each = [f"{t / scale:.3f}" for t in (times if few else (min(times), max(times)))]
        return f"iteration {mean / scale:.3f} {unit} ({(', ' if few else ' .. ').join(each)}), "
    if "iterations_finished" in summary:
        return f"{summary['iterations_finished']} iterations finished, "
    return ""


def jobs_text(summary: dict) -> str:
    """With jobs, each job's time from its start to its last finish; else nothing."""
    jobs = summary.get("jobs")
    if not jobs:
        return ""
    return "jobs " + ", ".join(f"{j['job']} {fmt_ns(j['time_ns'])}" for j in jobs) + ", "


def requests_text(summary: dict) -> str:
    """With inference requests, how many finished and their latency's median and 99th percentile; else nothing."""
    inference = summary.get("inference")
    if not inference:
        return ""
    return (
        f"requests {inference['finished']}/{inference['requests']}, latency p50 "
        f"{fmt_ns(inference['latency_p50_ns'])} p99 {fmt_ns(inference['latency_p99_ns'])}, "
    )


def run_line(summary: dict, out: Path | str) -> str:
    """A finished run's summary (summary.json's fields) in one line, ending with where it was written."""
    s = summary
    return (
        f"{s['scenario']}: {iterations_text(s)}{jobs_text(s)}{requests_text(s)}"
        f"{s['flows_finished']}/{s['flows']} flows finished, last at "
        f"{fmt_ns(s['last_finish_ns'])}, {s['data_packets_dropped']} drops, "
        f"{s['pfc_pauses_sent']} PFC pauses, {s['events']} events in {s['wall_s']:.2f} s "
        f"-> {out}"
    )
