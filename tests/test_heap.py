"""The event heap (core/heap.py): events come out in (time, sequence) order, whatever the
order of pushes and pops, and a rebuild after a fast-forward jump keeps that order.

The engine's results depend on this order alone."""

import heapq

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roce_emu.core.heap import heap_pop, heap_push, heap_rebuild
from roce_emu.core.kinds import M_EV_COUNT, M_EV_SEQ, M_SIZE
from roce_emu.core.state import EV_DTYPE

pytestmark = [pytest.mark.quick, pytest.mark.nojit]

# a step pushes an event at this time (>= 0) or pops one (-1). Pushes outnumber pops, so the
# heap grows several levels deep; the times are few, so ties are many
STEPS = st.lists(
    st.one_of(st.integers(0, 6), st.integers(0, 60), st.integers(0, 60), st.just(-1)), min_size=1, max_size=400
)


def _empty(cap: int):
    return np.zeros(cap + 1, EV_DTYPE), np.zeros(M_SIZE, np.int64)


@settings(max_examples=200, deadline=None)
@given(STEPS)
def test_pops_come_out_in_time_then_push_order(steps):
    ev, meta = _empty(len(steps))
    pending = []  # the reference: (time, sequence) of the events in the heap
    for n, t in enumerate(steps):
        if t >= 0:
            heap_push(ev, meta, t, 1, n, 0)
            pending.append((t, n))
        elif pending:
            got_t, _, got_obj, _ = heap_pop(ev, meta)
            want = min(pending)
            pending.remove(want)
            assert (got_t, got_obj) == want  # obj is the push number, so the sequence is checked
    assert meta[M_EV_COUNT] == len(pending)
    while pending:
        want = min(pending)
        pending.remove(want)
        got_t, _, got_obj, _ = heap_pop(ev, meta)
        assert (got_t, got_obj) == want


def test_a_deep_heap_against_a_reference():
    """20,000 pushes and pops (the heap up to a few thousand events deep) against heapq."""
    rng = np.random.default_rng(7)
    ev, meta = _empty(20_000)
    reference: list = []
    for n in range(20_000):
        if rng.random() < 0.6 or not reference:
            t = int(rng.integers(0, 1000)) + n // 4
            heap_push(ev, meta, t, 1, n, 0)
            heapq.heappush(reference, (t, n))
        else:
            got_t, _, got_obj, _ = heap_pop(ev, meta)
            assert (got_t, got_obj) == heapq.heappop(reference)
    assert [heap_pop(ev, meta)[::2] for _ in range(len(reference))] == [
        heapq.heappop(reference) for _ in range(len(reference))
    ]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 9), st.booleans(), st.integers(-3, 3)), min_size=1, max_size=200))
def test_a_rebuild_drops_dead_events_and_restores_the_order(events):
    """Fast-forward moves events in time in place and marks dead ones (kind < 0): the rebuilt
    heap pops the live ones by (new time, original sequence)."""
    ev, meta = _empty(len(events))
    for n, (t, _, _) in enumerate(events):
        heap_push(ev, meta, t, 1, n, 0)
    for i in range(int(meta[M_EV_COUNT])):
        t, dead, shift = events[ev[i]["obj"]]
        ev[i]["t_ps"] = t + shift + 3
        if dead:
            ev[i]["kind"] = -1
    heap_rebuild(ev, meta)
    want = sorted((t + shift + 3, n) for n, (t, dead, shift) in enumerate(events) if not dead)
    got = [heap_pop(ev, meta) for _ in range(int(meta[M_EV_COUNT]))]
    assert [(g[0], g[2]) for g in got] == want
    assert meta[M_EV_SEQ] == len(events)
