"""The line `roce-emu run` prints at the end (results/console.py), built from a summary alone."""

import pytest

from roce_emu.results.console import fmt_ns, run_line

BASE = {
    "scenario": "incast",
    "flows_finished": 2,
    "flows": 3,
    "last_finish_ns": 2_500.0,
    "data_packets_dropped": 0,
    "pfc_pauses_sent": 4,
    "events": 1234,
    "wall_s": 0.5,
}


@pytest.mark.quick
@pytest.mark.parametrize(
    "ns, text", [(None, "never"), (2_500.0, "2.500 us"), (999_999.0, "999.999 us"), (3e6, "3.000 ms")]
)
def test_times_in_us_below_a_millisecond_else_ms(ns, text):
    assert fmt_ns(ns) == text


@pytest.mark.quick
def test_run_line_without_iterations():
    assert run_line(BASE, "runs/incast") == (
        "incast: 2/3 flows finished, last at 2.500 us, 0 drops, 4 PFC pauses, 1234 events in 0.50 s -> runs/incast"
    )


@pytest.mark.quick
def test_run_line_lists_up_to_eight_iterations_then_their_range():
    few = {**BASE, "iteration_ns": [1e6, 3e6], "mean_iteration_ns": 2e6}
    assert run_line(few, "o").startswith("incast: iteration 2.000 ms (1.000, 3.000), 2/3 flows")
    many = {**BASE, "iteration_ns": [1e3 * (i + 1) for i in range(9)], "mean_iteration_ns": 5e3}
    assert run_line(many, "o").startswith("incast: iteration 5.000 us (1.000 .. 9.000), 2/3 flows")
    unfinished = {**BASE, "iterations_finished": 0}
    assert run_line(unfinished, "o").startswith("incast: 0 iterations finished, 2/3 flows")
