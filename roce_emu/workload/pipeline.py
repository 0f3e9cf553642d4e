"""Pipeline schedules: the order in which each stage runs its micro-batches' forwards (F) and
backwards (B), and an order to build those ops in where every op comes after the ops it waits for.

A forward on stage s takes the activations of the same micro-batch's forward on stage s - 1; a
backward takes the gradients of the same micro-batch's backward on stage s + 1 (its feeder).

- ``gpipe`` runs every F, then every B.
- ``1f1b`` (PipeDream-Flush, as Megatron runs it) runs pp - 1 - s forwards to fill the pipeline,
  then alternates one F and one B, then drains the remaining Bs.

Both take (m + pp - 1) (f + b) / m on uniform stages of f forward and b backward per batch;
1F1B holds at most pp - s micro-batches' activations on stage s, GPipe all m.
"""

from dataclasses import dataclass

import numpy as np

Op = tuple[str, int]  #: ("F" or "B", micro-batch)


@dataclass(frozen=True)
class PipelineSchedule:
    """Each stage's ops in the order it runs them: ``ops[s][k]`` is stage s's k-th op."""

    ops: list[list[Op]]

    @classmethod
    def of(cls, schedule: str, pp: int, m: int) -> "PipelineSchedule":
        """The ``schedule`` (``1f1b`` or ``gpipe``) of pp stages and m micro-batches."""
        return cls([stage_ops(schedule, s, pp, m) for s in range(pp)])

    def feeder(self, s: int, op: Op) -> int | None:
        """The stage whose output op takes on stage s (activations for a forward, gradients for a
        backward); None for the first forward and the last backward, which take none."""
        source = s - 1 if op[0] == "F" else s + 1
        return source if 0 <= source < len(self.ops) else None

    def is_last(self, s: int, k: int) -> bool:
        """Whether op k is stage s's last: its last backward, after which its gradients are complete."""
        return k == len(self.ops[s]) - 1

    def build_order(self) -> list[tuple[int, int]]:
        """(stage, op index) in an order where every op comes after the ops it waits for: repeatedly
        the first stage (forwards, lowest first; backwards, highest first) whose next op is ready.
        With one micro-batch: every forward stage by stage, then every backward from the last stage."""
        pp = len(self.ops)
        done: set = set()
        nxt = [0] * pp
        order: list = []
        total = sum(map(len, self.ops))
        while len(order) < total:
            for s in list(range(pp)) + list(range(pp - 1, -1, -1)):
                if nxt[s] == len(self.ops[s]):
                    continue
                op = self.ops[s][nxt[s]]
                source = self.feeder(s, op)
                if source is not None and (source, op) not in done:
                    continue
                order.append((s, nxt[s]))
                done.add((s, op))
                nxt[s] += 1
                break
            else:  # pragma: no cover - both schedules always leave a stage ready
                raise AssertionError("pipeline schedule waits for itself")
        return order


def stage_ops(schedule: str, s: int, pp: int, m: int) -> list[Op]:
    """Stage s's micro-batches in the order it runs them."""
    if schedule == "gpipe":
        return [("F", j) for j in range(m)] + [("B", j) for j in range(m)]
    warm = min(pp - 1 - s, m)  # forwards before the first backward: the stages still ahead
    steady = [op for j in range(m - warm) for op in (("F", warm + j), ("B", j))]
    return [("F", j) for j in range(warm)] + steady + [("B", j) for j in range(m - warm, m)]


def stage_split(n_layers: int, pp: int) -> list[np.ndarray]:
    """The layers of each pipeline stage: pp contiguous runs, the first ones a layer longer."""
    return np.array_split(np.arange(n_layers), pp)
