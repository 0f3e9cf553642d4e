"""Unit conversions of the Python side, in one place.

Scenario files speak nanoseconds and Gb/s; the engine counts integer picoseconds and bits per
second. Every layer (config, fabric, workload, run, results) converts with these, so that a
time or a rate is rounded the same way wherever it is read. The jitted core (roce_emu/core)
imports nothing from the Python side and keeps its own integer arithmetic.
"""

from typing import overload

import numpy as np


def ns_to_ps(ns: float) -> int:
    """Nanoseconds as the engine's integer picoseconds, rounded to the nearest."""
    return int(round(ns * 1000))


@overload
def ps_to_ns(ps: float) -> float: ...
@overload
def ps_to_ns(ps: np.ndarray) -> np.ndarray: ...
def ps_to_ns(ps):
    """Picoseconds (a number or an array) as (fractional) nanoseconds, for figures and summaries."""
    return ps / 1000


def format_ps_as_ns(ps: int) -> str:
    """Exact decimal nanoseconds of an integer picosecond time, as tables write it ('' for a
    negative time, the engine's "none")."""
    if ps < 0:
        return ""
    return f"{ps // 1000}.{ps % 1000:03d}" if ps % 1000 else str(ps // 1000)


def ns_to_s(ns: float) -> float:
    """Nanoseconds as seconds, for the analytical models."""
    return ns * 1e-9


def ps_to_s(ps: float) -> float:
    """Picoseconds as seconds, for the analytical models."""
    return ps * 1e-12


def gbps_to_bps(gbps: float) -> int:
    """Gb/s as the engine's integer bits per second, rounded to the nearest."""
    return int(round(gbps * 1e9))


def bps_to_gbps(bps: float) -> float:
    """Bits per second as Gb/s, for reports."""
    return bps / 1e9
