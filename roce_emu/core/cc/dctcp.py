"""DCTCP (Alizadeh et al., SIGCOMM'10) for RDMA, as in the HPCC ns-3 model (docs/model.md §4).

The receiver echoes each packet's CE mark on its ACK. Once per window of data the
sender updates alpha <- (1 - g) alpha + g F, with F the fraction of echoed marks, and
adds R_AI when it is not recovering. An echoed mark cuts the rate by alpha / 2, at
most once per window (CWR until the data sent before the cut is acknowledged). The
window follows the rate: W = R T.

World arrays: reads pkt, qp, ccp; writes ccs.
"""

from ..jit import njit
from .base import set_rate, set_window_for_rate
from .registry import DCTCP as SPEC

# ---- parameters: columns of World.ccp (engine units: ps, bit/s, bytes), from the registry's table ----
P_G = SPEC.slot("g")  #: alpha EWMA gain
P_RAI = SPEC.slot("rate_ai_mbps")  #: additive increase per window (bit/s)
P_MIN_RATE = SPEC.slot("min_rate_mbps")
P_BASE_RTT_PS = SPEC.slot("base_rtt_ns")  #: T: window = rate x T
N_PARAMS = SPEC.n_params


@njit
def on_ack(w, f, k):
    p = w.ccp
    row = w.qp[f]["cc_row"]  # the flow's parameters: its row of World.ccp
    c = w.ccs[f]
    r = w.qp[f]
    ack = w.pkt[k]["seq"]
    marked = w.pkt[k]["ecn"] != 0
    if marked:
        c["ecn_cnt"] += 1
    new_window = ack > c["update_seq"]
    if new_window:
        if c["update_seq"] > 0:
            frac = min(1.0, c["ecn_cnt"] / c["batch"])
            c["alpha"] = (1.0 - p[row, P_G]) * c["alpha"] + p[row, P_G] * frac
            c["ecn_cnt"] = 0
            c["batch"] = r["snd_nxt"] - ack + 1
        else:
            c["batch"] = r["snd_nxt"] + 1
        c["update_seq"] = r["snd_nxt"]
    if c["in_cwr"] != 0 and ack > c["cwr_seq"]:
        c["in_cwr"] = 0
    rate = c["rate"]
    if marked and c["in_cwr"] == 0:
        c["in_cwr"] = 1
        c["cwr_seq"] = r["snd_nxt"]
        rate = rate * (1.0 - c["alpha"] / 2.0)
    elif c["in_cwr"] == 0 and new_window:
        rate = rate + p[row, P_RAI]
    set_rate(w, f, rate, p[row, P_MIN_RATE])
    set_window_for_rate(w, f, p[row, P_BASE_RTT_PS])
