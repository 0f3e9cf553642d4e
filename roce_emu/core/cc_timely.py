"""TIMELY (Mittal et al., SIGCOMM'15), in the per-RTT form of the HPCC ns-3 model (docs/model.md §3).

The ACK echoes the data packet's send time, so each ACK gives an RTT sample. Once per
window of data the sender updates: below T_low it adds delta; above T_high it cuts by
beta (1 - T_high / rtt); otherwise it follows the normalised EWMA gradient of RTT
differences: add delta when it is <= 0, else multiply by 1 - beta * gradient. After
N increases in a row the step is the hyperactive R_HAI.
"""
from .cc_base import set_rate
from .jit import njit

# ---- parameters: indices into World.ccp (engine units) ---------------------------------
P_ALPHA = 0  #: EWMA weight of the newest RTT difference
P_BETA = 1  #: multiplicative decrease factor
P_T_LOW_PS = 2
P_T_HIGH_PS = 3
P_MIN_RTT_PS = 4  #: gradient normaliser
P_RAI = 5  #: additive increase delta (bit/s)
P_RHAI = 6  #: hyperactive increase (bit/s)
P_HAI_N = 7  #: increases in a row before the hyperactive step
P_MIN_RATE = 8
N_PARAMS = 9


@njit
def next_rate(p, ref_rate, stage, rtt_diff, last_rtt, rtt):
    """The gradient rule: (new rate before clamping to min/line, new stage, new rtt_diff)."""
    diff = (1.0 - p[P_ALPHA]) * rtt_diff + p[P_ALPHA] * float(rtt - last_rtt)
    gradient = diff / p[P_MIN_RTT_PS]
    if rtt < p[P_T_LOW_PS]:
        factor = -1.0
    elif rtt > p[P_T_HIGH_PS]:
        factor = 1.0 - p[P_BETA] * (1.0 - p[P_T_HIGH_PS] / rtt)
    elif gradient <= 0.0:
        factor = -1.0
    else:
        factor = max(0.0, 1.0 - p[P_BETA] * gradient)
    if factor < 0.0:  # increase
        step = p[P_RAI] if stage < p[P_HAI_N] else p[P_RHAI]
        return ref_rate + step, stage + 1, diff
    return ref_rate * factor, 0, diff


@njit
def on_ack(w, f, k, t):
    """ACK (or NACK) k reached the sender: an RTT sample; update once per window."""
    c = w.ccs[f]
    r = w.qp[f]
    if w.pkt[k]["seq"] <= c["update_seq"]:
        return
    rtt = t - w.pkt[k]["sent_ps"]
    if c["update_seq"] > 0:  # not the first window: there is a previous sample
        rate, stage, diff = next_rate(w.ccp, c["ref_rate"], c["stage"], c["rtt_diff"], c["last_rtt_ps"], rtt)
        set_rate(w, f, min(rate, c["line_bps"]), w.ccp[P_MIN_RATE])
        c["ref_rate"] = c["rate"]
        c["stage"] = stage
        c["rtt_diff"] = diff
    c["update_seq"] = r["snd_nxt"]
    c["last_rtt_ps"] = rtt
