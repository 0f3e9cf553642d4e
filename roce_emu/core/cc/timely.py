"""TIMELY (Mittal et al., SIGCOMM'15), in the per-RTT form of the HPCC ns-3 model (docs/model.md §3).

The ACK echoes the data packet's send time, so each ACK gives an RTT sample. Once per
window of data the sender updates: below T_low it adds delta; above T_high it cuts by
beta (1 - T_high / rtt); otherwise it follows the normalised EWMA gradient of RTT
differences: add delta when it is <= 0, else multiply by 1 - beta * gradient. After
N increases in a row the step is the hyperactive R_HAI.

World arrays: reads pkt, qp, ccp; writes ccs.
"""

from ..jit import njit
from .base import set_rate
from .registry import TIMELY as SPEC

# ---- parameters: columns of World.ccp (engine units: ps, bit/s, bytes), from the registry's table ----
P_ALPHA = SPEC.slot("alpha")  #: EWMA weight of the newest RTT difference
P_BETA = SPEC.slot("beta")  #: multiplicative decrease factor
P_T_LOW_PS = SPEC.slot("t_low_us")
P_T_HIGH_PS = SPEC.slot("t_high_us")
P_MIN_RTT_PS = SPEC.slot("min_rtt_us")  #: gradient normaliser
P_RAI = SPEC.slot("rate_ai_mbps")  #: additive increase delta (bit/s)
P_RHAI = SPEC.slot("rate_hai_mbps")  #: hyperactive increase (bit/s)
P_HAI_N = SPEC.slot("hai_after")  #: increases in a row before the hyperactive step
P_MIN_RATE = SPEC.slot("min_rate_mbps")
N_PARAMS = SPEC.n_params


@njit
def next_rate(p, row, ref_rate, stage, rtt_diff, last_rtt, rtt):
    """The gradient rule with the parameters of p's row: (new rate before clamping to
    min/line, new stage, new rtt_diff)."""
    diff = (1.0 - p[row, P_ALPHA]) * rtt_diff + p[row, P_ALPHA] * float(rtt - last_rtt)
    gradient = diff / p[row, P_MIN_RTT_PS]
    if rtt < p[row, P_T_LOW_PS]:
        factor = -1.0
    elif rtt > p[row, P_T_HIGH_PS]:
        factor = 1.0 - p[row, P_BETA] * (1.0 - p[row, P_T_HIGH_PS] / rtt)
    elif gradient <= 0.0:
        factor = -1.0
    else:
        factor = max(0.0, 1.0 - p[row, P_BETA] * gradient)
    if factor < 0.0:  # increase
        step = p[row, P_RAI] if stage < p[row, P_HAI_N] else p[row, P_RHAI]
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
        row = r["cc_row"]
        rate, stage, diff = next_rate(w.ccp, row, c["ref_rate"], c["stage"], c["rtt_diff"], c["last_rtt_ps"], rtt)
        set_rate(w, f, min(rate, c["line_bps"]), w.ccp[row, P_MIN_RATE])
        c["ref_rate"] = c["rate"]
        c["stage"] = stage
        c["rtt_diff"] = diff
    c["update_seq"] = r["snd_nxt"]
    c["last_rtt_ps"] = rtt
