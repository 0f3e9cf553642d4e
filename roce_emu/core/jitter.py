"""Per-packet latency jitter (network.jitter): the NIC's processing and PCIe latency, at the NIC that
sends a packet and at the NIC that receives it, and the pipeline latency of every switch it crosses.

A packet that leaves port p reaches p's peer after the link's propagation delay plus a hold: the
sending NIC's if p is a NIC port, and the receiving NIC's or switch's, whichever is at the other
end. Each hold is drawn from its role's distribution (cfg[CFG_JITTER_NIC], cfg[CFG_JITTER_SWITCH]) with
the world's generator (rng.py), so a run is the same for a seed however it is sliced.

The holds form one first-in first-out pipeline per link direction, as a NIC's transmit and receive
pipelines and a switch's ingress pipeline are: a packet comes out of it no sooner than the packet
before it on the same link (port["jit_out_ps"]), so jitter never reorders a link, and a packet
follows its predecessor rather than overtaking it when its own hold is shorter. The hold is latency,
not occupancy: the port serialises the next packet meanwhile, as a pipelined NIC or switch does, so
jitter lowers no link's rate. PFC frames are taken by the receiving MAC before any pipeline and
hold nothing.

With no jitter configured the arrival time is the exact engine's, and nothing is drawn.

World arrays: reads cfg, pkt, node; writes rng, port.
"""

import numpy as np

from .jit import njit
from .kinds import (
    CFG_JITTER_NIC,
    CFG_JITTER_NIC_MEAN_PS,
    CFG_JITTER_NIC_SD_PS,
    CFG_JITTER_SWITCH,
    CFG_JITTER_SWITCH_MEAN_PS,
    CFG_JITTER_SWITCH_SD_PS,
    I64,
    JD_EXPONENTIAL,
    JD_NONE,
    JD_UNIFORM,
)
from .pfc import is_pfc
from .rng import rand_unit


@njit
def jitter_on(w):
    return w.cfg[CFG_JITTER_NIC] != JD_NONE or w.cfg[CFG_JITTER_SWITCH] != JD_NONE


@njit
def draw_ps(w, dist, mean, sd):
    """One hold (ps) from distribution dist (JD_*) of the given mean and standard deviation."""
    if dist == JD_NONE:
        return I64(0)
    if dist == JD_UNIFORM:
        x = 2.0 * mean * rand_unit(w.rng)
    elif dist == JD_EXPONENTIAL:
        x = -mean * np.log(1.0 - rand_unit(w.rng))
    else:  # normal (JD_NORMAL), by Box-Muller; a negative draw holds nothing
        r = np.sqrt(-2.0 * np.log(1.0 - rand_unit(w.rng)))
        x = mean + sd * r * np.cos(2.0 * np.pi * rand_unit(w.rng))
    return I64(np.rint(x)) if x > 0.0 else I64(0)


@njit
def _role_hold(w, is_host):
    if is_host:
        return draw_ps(w, w.cfg[CFG_JITTER_NIC], w.cfg[CFG_JITTER_NIC_MEAN_PS], w.cfg[CFG_JITTER_NIC_SD_PS])
    return draw_ps(w, w.cfg[CFG_JITTER_SWITCH], w.cfg[CFG_JITTER_SWITCH_MEAN_PS], w.cfg[CFG_JITTER_SWITCH_SD_PS])


@njit(inline="always")
def arrival_ps(w, p, k, t):
    """When packet k, sent by port p, reaches its peer, if it would at t without jitter."""
    if not jitter_on(w) or is_pfc(w.pkt[k]["kind"]):
        return t
    return held_arrival_ps(w, p, t)


@njit
def held_arrival_ps(w, p, t):
    pt = w.port[p]
    hold = I64(0)
    if pt["at_host"] != 0:
        hold += _role_hold(w, True)
    hold += _role_hold(w, w.node[w.port[pt["peer_port"]]["node"]]["is_host"] != 0)
    out = max(t + hold, pt["jit_out_ps"])
    pt["jit_out_ps"] = out
    return out
