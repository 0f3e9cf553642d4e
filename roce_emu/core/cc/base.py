"""What every congestion-control module shares: changing a flow's rate and window, and its timers.

Rates are float bit/s in ``World.ccs``; the pacer reads the integer copy in
``qp["rate_bps"]``. Each timer (TM_*) has one deadline and at most one pending
event per queue pair: restarting a timer moves its deadline later, and the pending event,
when it fires early, re-queues itself at the deadline. The heap therefore holds at
most N_TIMERS timer events per flow however often the algorithms restart them.

World arrays: reads none; writes meta, ev, qp, ccs, timer.
"""

from ..heap import heap_push
from ..jit import njit
from ..kinds import EV_CC_TIMER, FL_ACTIVE, I64, TIMER_SPAN
from ..paths import ser_ps
from ..state import TIMER_ARMED, TIMER_DUE


@njit
def set_rate(w, f, rate, min_rate):
    """Clamp rate to [min_rate, line] and apply it; the next packet's send time moves as if
    the last packet had been paced at the new rate (the HPCC model's ChangeRate)."""
    c = w.ccs[f]
    rate = min(max(rate, min_rate), c["line_bps"])
    c["rate"] = rate
    r = w.qp[f]
    old = r["rate_bps"]
    new = max(int(rate), 1)
    if new != old:
        r["rate_bps"] = new
        last = c["last_wire"]
        if last > 0:
            r["next_tx_ps"] += ser_ps(last, new) - ser_ps(last, old)


@njit
def set_window_for_rate(w, f, base_rtt_ps):
    """Window of the rate over one base RTT (HPCC / DCTCP VAR_WIN: W = maxBdp * R / R_max)."""
    win = int(w.ccs[f]["rate"] * base_rtt_ps // 8_000_000_000_000)
    w.qp[f]["window_bytes"] = max(win, 1)


@njit
def timer_arg(w, f, timer):
    """EV_CC_TIMER's arg: queue pair f's flow and the timer, so that an event outliving its
    queue pair is recognised (loop.py)."""
    return I64(w.qp[f]["flow"]) * TIMER_SPAN + timer


@njit
def arm_timer(w, f, timer, due_ps):
    """(Re)start a timer to fire at due_ps (never earlier than a pending deadline)."""
    slot = w.timer[f, timer]
    slot[TIMER_DUE] = due_ps
    if slot[TIMER_ARMED] == 0:
        slot[TIMER_ARMED] = 1
        heap_push(w.ev, w.meta, due_ps, EV_CC_TIMER, I64(f), timer_arg(w, f, timer))


@njit
def timer_fires(w, f, timer, t):
    """A timer event popped: True if the timer is due now and its flow still sends."""
    slot = w.timer[f, timer]
    slot[TIMER_ARMED] = 0
    if w.qp[f]["state"] != FL_ACTIVE:
        return False
    due = slot[TIMER_DUE]
    if t < due:  # restarted since this event was queued
        slot[TIMER_ARMED] = 1
        heap_push(w.ev, w.meta, due, EV_CC_TIMER, I64(f), timer_arg(w, f, timer))
        return False
    return True
