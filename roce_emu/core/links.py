"""Network faults in the engine: the timed link actions of World.link_plan.

Python compiles the scenario's ``faults:`` into rows (a link goes down or up, changes
rate or loss, the switches install the routes computed without the dead links); each
row is one EV_LINK event, scheduled before anything else so ties go to the fault.

World arrays: reads link_plan; writes stats, meta, ev, port.
"""

from .heap import heap_push
from .jit import njit
from .kinds import (
    C_LAST_PROGRESS_PS,
    C_ROUTE_UPDATES,
    EV_LINK,
    I64,
    LA_DOWN,
    LA_LOSS,
    LA_RATE,
    LA_ROUTES,
    M_PLAN_LEFT,
    M_ROUTE_EPOCH,
    NO_ARG,
)
from . import pfc
from .port import kick


@njit
def schedule_link_plan(w):
    for i in range(w.link_plan.shape[0]):
        heap_push(w.ev, w.meta, w.link_plan[i]["t_ps"], EV_LINK, I64(i), NO_ARG)
    w.meta[M_PLAN_LEFT] = w.link_plan.shape[0]


@njit
def apply_link_action(w, i, t):
    """Carry out plan row i. A change to the network restarts the stall clock: flows that
    waited for a link may move again."""
    a = w.link_plan[i]
    action = a["action"]
    p = a["port"]
    w.meta[M_PLAN_LEFT] -= 1
    w.stats[C_LAST_PROGRESS_PS] = t
    if action == LA_ROUTES:
        w.meta[M_ROUTE_EPOCH] = a["value"]
        w.stats[C_ROUTE_UPDATES] += 1
        return
    if action == LA_LOSS:
        w.port[p]["loss"] = a["loss"]
        return
    q = w.port[p]["peer_port"]
    if action == LA_RATE:  # packets already on the wire keep the rate they started at
        w.port[p]["rate_bps"] = a["value"]
        w.port[q]["rate_bps"] = a["value"]
        return
    down = 1 if action == LA_DOWN else 0
    for side in (p, q):
        w.port[side]["down"] = down
        pfc.reset(w, side)
        kick(w, side)
