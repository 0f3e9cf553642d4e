"""The workload's task DAG: flows and compute tasks released when their predecessors finish.

Task t < F is flow t; it counts as done when its receiver holds every byte in order (so
the next step of a collective can start before the last ACK returns). A compute task
occupies nothing and finishes ``duration_ps`` after it starts; zero-length compute tasks
join the DAG's branches. Everything runs inside the event loop, no Python per task.

World arrays: reads succ_off, succ; writes stats, meta, ev, flow, task.
"""

from .heap import heap_push
from .jit import njit
from .kinds import C_LAST_PROGRESS_PS, C_TASKS_DONE, EV_FLOW_START, EV_TASK_DONE, I64, M_COMPUTING, NO_ARG, TK_FLOW


@njit
def release(w, k, t):
    """All of task k's predecessors are done at t: start it (not before its earliest time)."""
    task = w.task[k]
    start = max(t, task["earliest_ps"])
    task["start_ps"] = start
    if task["kind"] == TK_FLOW:
        w.flow[k]["start_ps"] = start
        heap_push(w.ev, w.meta, start, EV_FLOW_START, I64(k), NO_ARG)
    else:
        w.meta[M_COMPUTING] += 1
        heap_push(w.ev, w.meta, start + task["duration_ps"], EV_TASK_DONE, I64(k), NO_ARG)


@njit
def schedule_roots(w):
    """Release every task without predecessors, in task order (deterministic ties)."""
    for k in range(w.task.shape[0]):
        if w.task[k]["deps_left"] == 0:
            release(w, k, 0)


@njit
def task_done(w, k, t):
    """Task k finished at t: count it and release the successors it was the last wait of."""
    task = w.task[k]
    if task["finish_ps"] >= 0:
        return
    task["finish_ps"] = t
    if task["kind"] != TK_FLOW:
        w.meta[M_COMPUTING] -= 1
    w.stats[C_TASKS_DONE] += 1
    w.stats[C_LAST_PROGRESS_PS] = t
    for i in range(w.succ_off[k], w.succ_off[k + 1]):
        s = w.succ[i]
        left = w.task[s]["deps_left"] - 1
        w.task[s]["deps_left"] = left
        if left == 0:
            release(w, s, t)
