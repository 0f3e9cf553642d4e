"""Streaming in-switch reduction: flows gated packet by packet by the flows they reduce.

A switch's reduction unit (fabric/reduction.py) is an endpoint, and the flows in and out of it
are flows like any other. In a streaming reduction (``network.switch.reduction: streaming``,
workload/collectives.py) they are tied together by *gates*: flow L may have sent (first
transmissions; resends, go-back-N's or IRN's, are free) at most

    min over its gates g of  held(source_g) * n(L) // n(source_g) + window_g

packets, where held(S) is the packets flow S's receiver holds in order and n() a flow's size
in packets (its packets match its source's in proportion: a result segment of a
reduce-scatter takes the chunk's packets in that proportion). A gate of window 0 is a *data*
gate: a point's flow out forwards what its flows in have brought, so packet i leaves the
switch once packet i has arrived from every branch. A gate with a window is a *credit* gate:
a member sends at most ``window`` packets (``network.switch.reduction_slots``, the switch's
aggregation slots) ahead of the results the point has brought back to it, as SwitchML's and
SHARP's senders do; the window is at least one result packet's worth of packets (plus one if
they do not divide), so a reduce-scatter's segments never wait for each other.

When a flow's receiver holds more packets, the flows it gates whose limit it set get their new
limit, and the NIC port of each one that may now send is kicked. A flow whose sender had nothing in flight
restarts its retransmission timer then: its wait for data is not a loss.

World arrays: reads cfg, flow, qp, gate_off, gate_in, gate_out; writes gate_state.
"""

from .jit import njit
from .kinds import CFG_MTU, FL_ACTIVE, I64
from .nic import restart_rto
from .port import kick
from .state import GATE_HELD, GATE_LIMIT, GATE_OPEN


@njit
def _packets(w, L):
    """Flow L's size in packets (as its queue pair counts them, qp.qp_open)."""
    mtu = w.cfg[CFG_MTU]
    return (w.flow[L]["size_bytes"] + mtu - 1) // mtu


@njit
def _allowed(w, L, source, window, held):
    """The packets flow L may have sent by one gate, its source holding ``held`` packets."""
    n, m = _packets(w, L), _packets(w, source)
    allowed = held * n // m
    if window > 0:
        allowed += max(window, (n + m - 1) // m + (1 if n % m != 0 else 0))
    return allowed


@njit
def _limit(w, L):
    """The packets flow L may have sent by its gates now (GATE_OPEN if none holds it back)."""
    lim = I64(GATE_OPEN)
    for g in range(w.gate_off[0, L], w.gate_off[0, L + 1]):
        source = w.gate_in[g, 0]
        lim = min(lim, _allowed(w, L, source, w.gate_in[g, 1], w.gate_state[source, GATE_HELD]))
    return lim


@njit
def open_gates(w):
    """Every flow's limit before anything is delivered (a world without gates has no rows)."""
    for L in range(w.gate_state.shape[0]):
        w.gate_state[L, GATE_LIMIT] = _limit(w, L)


@njit
def on_delivered(w, f, t):
    """Queue pair f's receiver took a data packet at t: if it holds more in order than before,
    raise the limits of the flows its flow gates and kick those that may now send."""
    L = w.qp[f]["flow"]
    held = w.qp[f]["rcv_nxt"]
    was = w.gate_state[L, GATE_HELD]
    if held <= was:
        return
    w.gate_state[L, GATE_HELD] = held
    for i in range(w.gate_off[1, L], w.gate_off[1, L + 1]):
        G = w.gate_out[i, 0]
        before = w.gate_state[G, GATE_LIMIT]
        if _allowed(w, G, L, w.gate_out[i, 1], was) > before:
            continue  # another gate of G holds it back, not this one
        lim = _limit(w, G)
        if lim <= before:
            continue
        w.gate_state[G, GATE_LIMIT] = lim
        g = w.flow[G]["qp"]
        if g < 0 or w.qp[g]["state"] != FL_ACTIVE or w.qp[g]["snd_nxt"] < before:
            continue  # not started, or it was not waiting for its gates
        r = w.qp[g]
        if r["snd_nxt"] == r["snd_una"]:  # nothing in flight: its timer runs from now
            restart_rto(w, g, t)
        kick(w, r["nic_port"])
