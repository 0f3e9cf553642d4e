"""HPCC (Li et al., SIGCOMM'19), in the rate form of the HPCC ns-3 model (docs/model.md §2.3).

Switches push one INT record per hop as a data packet leaves (``stamp``); the receiver
echoes the records on the ACK; the sender estimates each hop's utilisation
u = min(qlen, qlen_prev) / (B T) + txRate / B, keeps an EWMA U of the largest over
time, and sets R = R_c / (U / eta) + R_AI (or R_c + R_AI in the additive stages).
The reference rate R_c and the stage are committed once per RTT; every ACK recomputes
R from them (fast reaction). The window is W = R T.

World arrays: reads port, qp, ccp, int_prev; writes pkt, ccs, int_rec.
"""

from ..jit import njit
from ..state import INT_FIELDS, INT_PORT, INT_QLEN, INT_TS_PS, INT_TX_BYTES
from .base import set_rate, set_window_for_rate
from .registry import HPCC as SPEC

# ---- parameters: columns of World.ccp (engine units: ps, bit/s, bytes), from the registry's table ----
P_ETA = SPEC.slot("eta")  #: target utilisation
P_MAX_STAGE = SPEC.slot("max_stage")  #: additive-increase stages before multiplicative steps
P_RAI = SPEC.slot("rate_ai_mbps")  #: R_AI = W_AI / T (bit/s)
P_MIN_RATE = SPEC.slot("min_rate_mbps")
P_BASE_RTT_PS = SPEC.slot("base_rtt_ns")  #: T: the network's largest base RTT
N_PARAMS = SPEC.n_params

PS_PER_S = 1e12


@njit
def stamp(w, k, p, t):
    """Egress switch port p starts sending data packet k: push this hop's INT record."""
    n = w.pkt[k]["n_int"]
    if n >= w.int_rec.shape[1]:
        return
    rec = w.int_rec[k, n]
    pt = w.port[p]
    rec[INT_TS_PS] = t
    rec[INT_TX_BYTES] = pt["tx_bytes"]
    rec[INT_QLEN] = pt["q_bytes"]
    rec[INT_PORT] = p
    w.pkt[k]["n_int"] = n + 1


@njit
def _copy_records(src, dst, n):
    for i in range(n):
        for j in range(INT_FIELDS):
            dst[i, j] = src[i, j]


@njit
def echo(w, k_data, k_ack):
    """The receiver copies the data packet's INT records onto its ACK."""
    n = w.pkt[k_data]["n_int"]
    _copy_records(w.int_rec[k_data], w.int_rec[k_ack], n)
    w.pkt[k_ack]["n_int"] = n


@njit(inline="always")
def _measure(w, f, k):
    """Update U from the ACK's INT against the last records seen (MeasureInflight)."""
    c = w.ccs[f]
    T = w.ccp[w.qp[f]["cc_row"], P_BASE_RTT_PS]
    prev = w.int_prev[f]
    now = w.int_rec[k]
    best_u = -1.0
    best_tau = 0.0
    for i in range(min(w.pkt[k]["n_int"], c["n_hops"])):
        tau = float(now[i, INT_TS_PS] - prev[i, INT_TS_PS])
        if tau <= 0.0 or now[i, INT_PORT] != prev[i, INT_PORT]:  # no interval, or rerouted
            continue
        rate = float(w.port[now[i, INT_PORT]]["rate_bps"])
        tx_rate = (now[i, INT_TX_BYTES] - prev[i, INT_TX_BYTES]) * 8.0 * PS_PER_S / tau
        qlen = min(now[i, INT_QLEN], prev[i, INT_QLEN])
        u = qlen * 8.0 * PS_PER_S / (rate * T) + tx_rate / rate
        if u > best_u:
            best_u = u
            best_tau = tau
    if best_u >= 0.0:
        tau = min(best_tau, T)
        c["util"] = (1.0 - tau / T) * c["util"] + (tau / T) * best_u


@njit(inline="always", entry=True)
def on_ack(w, f, k):
    """ACK (or NACK) k with echoed INT reached the sender of flow f."""
    if w.pkt[k]["n_int"] == 0:
        return
    c = w.ccs[f]
    if c["n_hops"] == 0:  # first ACK: only remember the records
        c["update_seq"] = w.qp[f]["snd_nxt"]
    else:
        _update_rate(w, f, k)
    n = w.pkt[k]["n_int"]
    _copy_records(w.int_rec[k], w.int_prev[f], n)
    c["n_hops"] = n


@njit(inline="always")
def _update_rate(w, f, k):
    """R = R_c / (U / eta) + R_AI, or R_c + R_AI in the additive stages; commit once per RTT."""
    p = w.ccp
    row = w.qp[f]["cc_row"]  # the flow's parameters: its row of World.ccp
    c = w.ccs[f]
    r = w.qp[f]
    _measure(w, f, k)
    per_rtt = w.pkt[k]["seq"] > c["update_seq"]
    stage = c["stage"]
    ratio = c["util"] / p[row, P_ETA]
    if ratio >= 1.0 or stage >= p[row, P_MAX_STAGE]:
        rate = c["ref_rate"] / ratio + p[row, P_RAI]
        stage = 0
    else:
        rate = c["ref_rate"] + p[row, P_RAI]
        stage += 1
    set_rate(w, f, rate, p[row, P_MIN_RATE])
    set_window_for_rate(w, f, p[row, P_BASE_RTT_PS])
    if per_rtt:
        c["ref_rate"] = c["rate"]
        c["stage"] = stage
        c["update_seq"] = r["snd_nxt"]
