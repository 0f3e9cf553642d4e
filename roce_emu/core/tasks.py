"""The workload's task DAG: flows and compute tasks released when their predecessors finish.

Task t < F is flow t; it counts as done when its receiver holds every byte in order (so
the next step of a collective can start before the last ACK returns). A compute task
occupies nothing and finishes ``duration_ps`` after it starts; zero-length compute tasks
join the DAG's branches. Everything runs inside the event loop, no Python per task.

**Runtime queues** decide, while the run goes, the order in which tasks take a resource:
the orders a collective scheduler's dimensions serve their stages in (workload/themis.py).
A task whose predecessors are done may still wait for its queue (World.qtask, World.queue):

- a *dispatch queue* is granted to one task at a time, and stays taken until a task that
  ``frees`` it finishes. Waiting tasks are granted it by ``key`` (smaller first), then by when
  they became ready, then by task id. Each grant hands out the next ticket: the order of
  service, kept in the granted task's row;
- an *ordered queue* starts its tasks strictly in the order of the tickets of their ``gate``
  tasks, each after the one before it has finished. Tasks that run in the order their gates
  were dispatched (a stage's later ring steps, on every rank alike) hold one.

A flow waiting for a dispatch queue may carry a deadline (a parameter server's update under
MLFabric's scheduling, workload/parameter_server.py): if, when the queue would be granted to it
at t, t plus its key (its length) ends past its ready time plus the deadline, it is dropped: it
never sends, counts as a finished flow at t (no packet sent), frees nothing, and the queue goes
to the next in line.

World arrays: reads succ_off, succ; writes stats, meta, ev, flow, task, qtask, queue.
"""

from .heap import heap_push
from .jit import njit
from .kinds import (
    C_FLOWS_DONE,
    C_LAST_PROGRESS_PS,
    C_TASKS_DONE,
    EV_FLOW_START,
    EV_TASK_DONE,
    FL_DONE,
    I64,
    M_COMPUTING,
    NO_ARG,
    TK_FLOW,
)


@njit
def release(w, k, t):
    """All of task k's predecessors are done at t: start it, or let it wait for its queue."""
    r = w.task[k]["qrow"]
    q = w.qtask[r]["queue"] if r >= 0 else -1
    if q < 0:
        _begin(w, k, t)
        return
    row = w.qtask[r]
    row["ready_ps"] = t
    queue = w.queue[q]
    if queue["ordered"]:
        row["key"] = w.qtask[w.task[row["gate"]]["qrow"]]["ticket"]
        if row["key"] == queue["next_ticket"]:
            _begin(w, k, t)
        else:
            _wait(w, k, q)
    elif queue["busy"]:
        _wait(w, k, q)
    elif _late(w, k, t):
        _drop(w, k, t)
    else:
        _grant(w, k, q, t)


@njit
def _wait(w, k, q):
    """Task k waits in queue q's list, before the first task that ranks after it."""
    me = w.qtask[w.task[k]["qrow"]]
    prev = -1
    i = w.queue[q]["first"]
    while i >= 0:
        other = w.qtask[w.task[i]["qrow"]]
        if me["key"] < other["key"] or (
            me["key"] == other["key"]
            and (me["ready_ps"] < other["ready_ps"] or (me["ready_ps"] == other["ready_ps"] and k < i))
        ):
            break
        prev = i
        i = other["next"]
    me["next"] = i
    if prev < 0:
        w.queue[q]["first"] = k
    else:
        w.qtask[w.task[prev]["qrow"]]["next"] = k


@njit
def _pop(w, q):
    """Take queue q's first waiting task out of its list."""
    k = w.queue[q]["first"]
    w.queue[q]["first"] = w.qtask[w.task[k]["qrow"]]["next"]
    return k


@njit
def _grant(w, k, q, t):
    """Dispatch queue q goes to task k at t, with the next ticket."""
    queue = w.queue[q]
    queue["busy"] = 1
    w.qtask[w.task[k]["qrow"]]["ticket"] = queue["next_ticket"]
    queue["next_ticket"] += 1
    _begin(w, k, t)


@njit
def _queues_after(w, k, t):
    """Task k, which has a row in the runtime queues, finished at t: serve what it let go."""
    row = w.qtask[w.task[k]["qrow"]]
    q = row["queue"]
    if q >= 0 and w.queue[q]["ordered"]:
        queue = w.queue[q]
        queue["next_ticket"] += 1
        first = queue["first"]
        if first >= 0 and w.qtask[w.task[first]["qrow"]]["key"] == queue["next_ticket"]:
            _begin(w, _pop(w, q), t)
    f = row["frees"]
    if f >= 0:
        w.queue[f]["busy"] = 0
        while w.queue[f]["first"] >= 0:
            n = _pop(w, f)
            if not _late(w, n, t):
                _grant(w, n, f, t)
                break
            _drop(w, n, t)


@njit
def _late(w, k, t):
    """Whether task k, granted its dispatch queue at t, would end past its deadline."""
    row = w.qtask[w.task[k]["qrow"]]
    return row["deadline_ps"] >= 0 and t + row["key"] > row["ready_ps"] + row["deadline_ps"]


@njit
def _drop(w, k, t):
    """Flow k misses its deadline: it never sends, and finishes at t (an EV_TASK_DONE) without
    freeing the queue it was never granted."""
    w.qtask[w.task[k]["qrow"]]["frees"] = -1
    w.task[k]["start_ps"] = t
    fl = w.flow[k]
    fl["start_ps"] = t
    fl["finish_ps"] = t
    fl["state"] = FL_DONE
    w.stats[C_FLOWS_DONE] += 1
    heap_push(w.ev, w.meta, t, EV_TASK_DONE, I64(k), NO_ARG)


@njit
def _begin(w, k, t):
    """Task k starts at t (not before its earliest time)."""
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
    if task["qrow"] >= 0:
        _queues_after(w, k, t)
    for i in range(w.succ_off[k], w.succ_off[k + 1]):
        s = w.succ[i]
        left = w.task[s]["deps_left"] - 1
        w.task[s]["deps_left"] = left
        if left == 0:
            release(w, s, t)
