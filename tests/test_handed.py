"""A producer's own rows at different batches (``scheduled.handed``): rows whose claim waits for its turn stay behind
where the plan stands, the rest go on, and the rows behind, planned alone, rejoin; every row's plan is the one
schedule's."""

from __future__ import annotations

from typing import Any

import numpy as np

from streamcli.scheduled import cursor as _cursor
from streamcli.scheduled.claims import OPEN
from streamcli.scheduled.handed import HandedSchedule
from streamcli.scheduled.schedule import FOREIGN, BatchRuns, Schedule

LENGTHS = [3, 11, 5, 0, 20, 1, 9, 0, 14, 2, 4, 4, 7, 30, 6, 2, 13, 5, 8, 1]
B, T = 4, 4


def probe(b: int, item: int, pos: int, t0: int, n: int, fresh: bool) -> int:
    left = LENGTHS[item] - pos
    return left if left <= n else OPEN  # (ended within the steps asked for, or a step after them exists)


class Turns:
    """The shared claims of one producer's rows: a claim may go once no row has published a smaller key; the first
    claim asked for in each batch of ``deny`` is refused once (its turn "has not come"), which leaves the rows waiting
    in that batch behind."""

    def __init__(self, deny: set[int]) -> None:
        self.keys: dict[int, int] = {}
        self.tickets = 0
        self.deny = set(deny)

    def ready(self, key: int) -> bool:
        if key // (T * B) in self.deny:
            self.deny.discard(key // (T * B))
            return False
        return min(self.keys.values(), default=key) >= key

    def wait(self, b: int, key: int) -> None:
        assert self.ready(key), f"a claim at {key} was made out of turn"

    def ticket(self) -> int:
        self.tickets += 1
        return self.tickets - 1

    def publish(self, b: int, key: int | None) -> None:
        self.keys[b] = 1 << 62 if key is None else key


def _rows(plan: BatchRuns, owned: np.ndarray) -> dict[int, Any]:
    """Each owned row's part of a plan: its runs (whole rows as one run), pads and cursor."""
    out: dict[int, Any] = {int(b): [[], [], None] for b in np.flatnonzero(owned)}
    for b, item, pos, replay in zip(*(a.tolist() for a in (plan.whole, plan.item, plan.pos, plan.replay)), strict=True):
        out[b][0].append((0, T, item, pos, replay, False))
    for r in plan.runs:
        out[r[0]][0].append(tuple(r[1:7]))
    for b, t0, t1 in plan.pads:
        out[b][1].append((t0, t1))
    for b in out:
        out[b][0].sort()
        out[b][2] = [*plan.cursors[b].tolist(), int(plan.claims[b]), int(plan.dry[b])]
    return out


def test_rows_left_behind_at_a_waiting_claim_plan_every_row_as_one_schedule_does() -> None:
    order = np.array([(i, 0, 0, -1) for i in range(len(LENGTHS))], np.int64)  # (-1: lengths not known)
    start = _cursor.fresh(B)
    kw: dict[str, Any] = {"T": T, "pack": True, "segment": 0, "restream": False}
    one = Schedule(order, start, 0, 0, **kw)
    want = [_rows(one.next_plan(probe), np.ones(B, bool)) for _ in range(14)]

    sched = HandedSchedule(order, start, 0, 0, turns=Turns(deny={2, 5, 8, 9, 11}), owned=np.ones(B, bool), **kw)
    got: dict[int, dict[int, Any]] = {}
    left = rejoined = 0

    def add(plan: BatchRuns, rows: list[int]) -> None:
        owned = np.zeros(B, bool)
        owned[rows] = True
        parts = got.setdefault(plan.k, {})
        assert not set(parts) & set(_rows(plan, owned)), "a row planned twice in one batch"
        parts.update(_rows(plan, owned))

    while min([sched.k, *(r.k for r in sched.alone.values())]) < 14:
        behind = len(sched.alone)
        sched.rejoin()
        rejoined += behind - len(sched.alone)
        for b in sorted(sched.alone, key=lambda b: (sched.alone[b].k, b)):
            plan = sched.plan_alone(b, probe) if sched.alone[b].k < 14 else None
            if plan is not None:
                add(plan, [b])
                break
        else:
            own = int((sched.state != FOREIGN).sum())
            plan = sched.try_plan(probe) if own and sched.k < 14 else None
            if plan is None and own and sched.k < 14:
                waiting = sched.waiting()
                if len(waiting) == own:
                    continue  # every row waits: the turn comes at the next try
                sched.leave(waiting)
                left += 1
                plan = sched.try_plan(probe)
                assert plan is not None
            if plan is not None:
                add(plan, np.flatnonzero(sched.state != FOREIGN).tolist())
    assert left >= 3 and rejoined >= 1
    for k in range(14):
        assert got[k] == want[k], k
