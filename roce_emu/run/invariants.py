"""Engine invariants: the reports of the cheap ones the engine checks at every event, and the
expensive ones ``--check`` runs between slices (every packet in at most one queue, queue byte
counts equal to their packets, the free lists holding exactly the free packets and queue
pairs, every open queue pair counting the packets that name it)."""

import numpy as np

from ..core import kinds as K
from ..core.state import World
from ..fabric.topology import Fabric
from ..units import ps_to_ns


class InvariantError(Exception):
    """An invariant broke; the message names the time, the event or check, and the entity."""


def broken_invariant_message(world: World, fabric: Fabric) -> str:
    """One line for the invariant the engine stopped on."""
    code = int(world.meta[K.M_INVARIANT])
    obj = int(world.meta[K.M_INVARIANT_OBJ])
    kind = int(world.meta[K.M_INVARIANT_KIND])
    what = K.INVARIANT_NAMES[code]
    if code in (K.INV_BUFFER_NEGATIVE, K.INV_BUFFER_OVER):
        what += f" {fabric.names[obj]}"
    elif code in (K.INV_QUEUE_NEGATIVE, K.INV_KICKS_FULL):
        what += f" {obj} ({fabric.names[world.port['node'][obj]]})"
    else:
        what += f" {obj}"
    t_ns = ps_to_ns(int(world.stats[K.C_NOW_PS]))
    return f"invariant broken at t={t_ns:g} ns during a {K.EVENT_NAMES[kind]} event: {what}"


def check_world(world: World) -> None:
    """The expensive invariants; raises InvariantError naming the first that fails."""
    t_ns = ps_to_ns(int(world.stats[K.C_NOW_PS]))
    pkt = world.pkt
    seen = np.zeros(len(pkt), np.int64)
    pq = world.pq
    for p, prio in zip(*np.nonzero(pq["head"] >= 0)):
        k = int(pq[p, prio]["head"])
        total = 0
        steps = 0
        while k >= 0:
            seen[k] += 1
            total += int(pkt[k]["frame_bytes"])
            if pkt[k]["kind"] == K.PK_FREE:
                raise InvariantError(f"t={t_ns:g} ns: free packet {k} in the queue of port {p} priority {prio}")
            k = int(pkt[k]["nxt"])
            steps += 1
            if steps > len(pkt):
                raise InvariantError(f"t={t_ns:g} ns: the queue of port {p} priority {prio} loops")
        if total != int(pq[p, prio]["bytes"]):
            raise InvariantError(
                f"t={t_ns:g} ns: port {p} priority {prio} counts {int(pq[p, prio]['bytes'])} B but holds {total} B"
            )
    if (seen > 1).any():
        k = int(np.argmax(seen > 1))
        raise InvariantError(f"t={t_ns:g} ns: packet {k} is in {int(seen[k])} queues")
    n_free = int(world.meta[K.M_FREE])
    free_ids = world.pkt_free[:n_free]
    if len(np.unique(free_ids)) != n_free or (pkt["kind"][free_ids] != K.PK_FREE).any():
        raise InvariantError(f"t={t_ns:g} ns: the free list holds a packet in use or the same packet twice")
    if int((pkt["kind"] == K.PK_FREE).sum()) != n_free:
        raise InvariantError(
            f"t={t_ns:g} ns: {int((pkt['kind'] == K.PK_FREE).sum())} free packets, {n_free} on the free list"
        )
    queued = pq["bytes"].sum(axis=1)
    if (queued != world.port["q_bytes"]).any():
        p = int(np.argmax(queued != world.port["q_bytes"]))
        raise InvariantError(
            f"t={t_ns:g} ns: port {p} queue total {int(world.port['q_bytes'][p])} B, "
            f"its priorities hold {int(queued[p])} B"
        )
    _check_queue_pairs(world, t_ns)


def _check_queue_pairs(world: World, t_ns: float) -> None:
    qp, flow = world.qp, world.flow
    n_free = int(world.meta[K.M_QP_FREE])
    free_ids = world.qp_free[:n_free]
    open_ids = np.flatnonzero(qp["flow"] >= 0)
    if len(np.unique(free_ids)) != n_free or (qp["flow"][free_ids] >= 0).any() or n_free + len(open_ids) != len(qp):
        raise InvariantError(f"t={t_ns:g} ns: the free queue pairs are not exactly the slots without a flow")
    if (flow["qp"][qp["flow"][open_ids]] != open_ids).any():
        raise InvariantError(f"t={t_ns:g} ns: an open queue pair and its flow do not name each other")
    # a connection's flows send their new packets one flow at a time (a resend after a loss may
    # overlap the next flow's packets)
    o = qp[open_ids]
    new = (o["in_ring"] == 1) & (o["conn"] >= 0) & (o["snd_nxt"] == o["max_sent"]) & (o["snd_nxt"] < o["n_pkts"])
    keys = np.stack([o[name][new].astype(np.int64) for name in ("nic_port", "dst", "prio", "conn")])
    if np.unique(keys, axis=1).shape[1] != int(new.sum()):
        raise InvariantError(f"t={t_ns:g} ns: two queue pairs of one connection send new packets at once")
    pkt = world.pkt
    named = pkt["qp"][(pkt["kind"] != K.PK_FREE) & (pkt["qp"] >= 0)]
    alive = np.bincount(named, minlength=len(qp))
    if (alive != qp["alive"]).any():
        f = int(np.argmax(alive != qp["alive"]))
        raise InvariantError(
            f"t={t_ns:g} ns: queue pair {f} counts {int(qp['alive'][f])} packets, {int(alive[f])} name it"
        )
    ev = world.ev[: int(world.meta[K.M_EV_COUNT])]
    timers = np.bincount(ev["obj"][ev["kind"] == K.EV_RTO], minlength=len(qp))
    if (timers != qp["rto_armed"]).any():
        f = int(np.argmax(timers != qp["rto_armed"]))
        raise InvariantError(
            f"t={t_ns:g} ns: queue pair {f} has {int(timers[f])} retransmission timer events pending, "
            f"armed={int(qp['rto_armed'][f])} (one at most, nic.arm_rto)"
        )
