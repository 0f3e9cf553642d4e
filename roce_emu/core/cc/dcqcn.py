"""DCQCN reaction point (sender) and notification point (receiver), docs/model.md §1.

Two variants. ``VARIANT_CX`` is the ConnectX-style model of the HPCC ns-3 simulator
(§1.5): the receiver flags the ACK of every CE-marked packet, and three periodic
timers started by the first CNP update alpha, cut the rate at most once per T_dec,
and raise it (fast recovery, additive, hyper increase by the stage count s).
``VARIANT_PAPER`` is Zhu et al.'s (§1.4): the receiver sends a CNP packet at most
once per N per flow; each CNP cuts the rate at once; alpha decays after K without
CNP; a timer T and a byte counter B drive the increase stages.

World arrays: reads qp, ccp; writes ccs.
"""

from ..jit import njit
from ..kinds import TM_ALPHA, TM_DECREASE, TM_INCREASE
from .base import arm_timer, set_rate
from .registry import DCQCN as SPEC

VARIANT_CX = 0
VARIANT_PAPER = 1

# ---- parameters: columns of World.ccp (engine units: ps, bit/s, bytes), from the registry's table ----
P_VARIANT = SPEC.slot("variant")
P_G = SPEC.slot("g")  #: alpha EWMA gain
P_ALPHA_PS = SPEC.slot("alpha_interval_us")  #: alpha update period (cx: T_alpha; paper: K)
P_DEC_PS = SPEC.slot("decrease_interval_us")  #: cx: rate-decrease check period T_dec
P_INC_PS = SPEC.slot("increase_interval_us")  #: rate-increase timer period (cx: T_inc; paper: T)
P_BYTES = SPEC.slot("byte_counter_bytes")  #: paper: byte counter B
P_F = SPEC.slot("fast_recovery_steps")  #: fast-recovery stages F
P_RAI = SPEC.slot("rate_ai_mbps")  #: additive increase R_AI (bit/s)
P_RHAI = SPEC.slot("rate_hai_mbps")  #: hyper increase R_HAI (bit/s)
P_MIN_RATE = SPEC.slot("min_rate_mbps")
P_CNP_PS = SPEC.slot("cnp_interval_us")  #: paper: minimum interval N between CNPs of one flow at the receiver
P_FIRST_CNP = SPEC.slot("rate_on_first_cnp")  #: cx: the rate becomes this fraction of itself on the first CNP
P_CLAMP = SPEC.slot("clamp_target_rate")  #: cx: 1 = the target follows every cut (ClampTargetRate)
N_PARAMS = SPEC.n_params


@njit
def on_cnp(w, f, t):
    """A congestion notification reached the sender (CNP packet, or CNP-flagged ACK for cx)."""
    p = w.ccp
    row = w.qp[f]["cc_row"]  # the flow's parameters: its row of World.ccp
    c = w.ccs[f]
    if p[row, P_VARIANT] == VARIANT_CX:
        c["alpha_cnp"] = 1
        c["dec_cnp"] = 1
        if c["cnp_seen"] == 0:
            c["cnp_seen"] = 1
            c["alpha"] = 1.0
            c["alpha_cnp"] = 0
            arm_timer(w, f, TM_ALPHA, t + int(p[row, P_ALPHA_PS]))
            arm_timer(w, f, TM_DECREASE, t + int(p[row, P_DEC_PS]) + 1000)  # after the alpha update
            set_rate(w, f, p[row, P_FIRST_CNP] * c["rate"], p[row, P_MIN_RATE])
            c["target"] = c["rate"]
        return
    c["cnp_seen"] = 1
    c["target"] = c["rate"]
    set_rate(w, f, c["rate"] * (1.0 - c["alpha"] / 2.0), p[row, P_MIN_RATE])
    c["alpha"] = (1.0 - p[row, P_G]) * c["alpha"] + p[row, P_G]
    c["t_cnt"] = 0
    c["bc_cnt"] = 0
    c["bytes_ctr"] = 0
    arm_timer(w, f, TM_ALPHA, t + int(p[row, P_ALPHA_PS]))
    arm_timer(w, f, TM_INCREASE, t + int(p[row, P_INC_PS]))


@njit
def on_timer(w, f, timer, t):
    p = w.ccp
    row = w.qp[f]["cc_row"]  # the flow's parameters: its row of World.ccp
    c = w.ccs[f]
    g = p[row, P_G]
    if p[row, P_VARIANT] == VARIANT_CX:
        if timer == TM_ALPHA:
            c["alpha"] = (1.0 - g) * c["alpha"] + (g if c["alpha_cnp"] != 0 else 0.0)
            c["alpha_cnp"] = 0
            arm_timer(w, f, TM_ALPHA, t + int(p[row, P_ALPHA_PS]))
        elif timer == TM_DECREASE:
            if c["dec_cnp"] != 0:
                if p[row, P_CLAMP] != 0 or c["stage"] != 0:
                    c["target"] = c["rate"]
                set_rate(w, f, c["rate"] * (1.0 - c["alpha"] / 2.0), p[row, P_MIN_RATE])
                c["stage"] = 0
                c["dec_cnp"] = 0
                arm_timer(w, f, TM_INCREASE, t + int(p[row, P_INC_PS]))
            arm_timer(w, f, TM_DECREASE, t + int(p[row, P_DEC_PS]))
        else:
            _cx_increase(w, f)
            arm_timer(w, f, TM_INCREASE, t + int(p[row, P_INC_PS]))
        return
    if timer == TM_ALPHA:  # K passed without a CNP
        c["alpha"] = (1.0 - g) * c["alpha"]
        arm_timer(w, f, TM_ALPHA, t + int(p[row, P_ALPHA_PS]))
    elif timer == TM_INCREASE:
        c["t_cnt"] += 1
        _paper_increase(w, f)
        arm_timer(w, f, TM_INCREASE, t + int(p[row, P_INC_PS]))


@njit
def _cx_increase(w, f):
    """Increase timer: fast recovery while s < F, then additive (s == F), then hyper."""
    p = w.ccp
    row = w.qp[f]["cc_row"]  # the flow's parameters: its row of World.ccp
    c = w.ccs[f]
    s = c["stage"]
    if s == p[row, P_F]:
        c["target"] = min(c["line_bps"], c["target"] + p[row, P_RAI])
    elif s > p[row, P_F]:
        c["target"] = min(c["line_bps"], c["target"] + p[row, P_RHAI])
    set_rate(w, f, (c["rate"] + c["target"]) / 2.0, p[row, P_MIN_RATE])
    c["stage"] = s + 1


@njit
def _paper_increase(w, f):
    """One increase event: fast recovery while both counters are <= F, hyper when both exceed
    F (by i = min - F steps of R_HAI), additive otherwise (htsim's reading of the paper)."""
    p = w.ccp
    row = w.qp[f]["cc_row"]  # the flow's parameters: its row of World.ccp
    c = w.ccs[f]
    hi = max(c["t_cnt"], c["bc_cnt"])
    lo = min(c["t_cnt"], c["bc_cnt"])
    F = p[row, P_F]
    if lo > F:
        c["target"] = c["target"] + (lo - F) * p[row, P_RHAI]
    elif hi > F:
        c["target"] = c["target"] + p[row, P_RAI]
    c["target"] = min(c["target"], c["line_bps"])
    set_rate(w, f, (c["rate"] + c["target"]) / 2.0, p[row, P_MIN_RATE])


@njit
def on_send(w, f, wire_bytes):
    """Paper byte counter: one increase event per B bytes sent since the last cut."""
    p = w.ccp
    row = w.qp[f]["cc_row"]  # the flow's parameters: its row of World.ccp
    c = w.ccs[f]
    if p[row, P_VARIANT] != VARIANT_PAPER or c["cnp_seen"] == 0:
        return
    c["bytes_ctr"] += wire_bytes
    B = int(p[row, P_BYTES])
    while c["bytes_ctr"] >= B:
        c["bytes_ctr"] -= B
        c["bc_cnt"] += 1
        _paper_increase(w, f)


@njit
def receiver_wants_cnp(w, f, t):
    """Paper notification point: a CE-marked packet arrived; send a CNP unless one went within N."""
    c = w.ccs[f]
    last = c["last_cnp_ps"]
    if last >= 0 and t - last < int(w.ccp[w.qp[f]["cc_row"], P_CNP_PS]):
        return False
    c["last_cnp_ps"] = t
    return True
