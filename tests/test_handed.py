"""Groups of a producer's rows at different batches (``scheduled.handed``): rows whose claim waits for its turn split
off where the plan stands, the rest go on, and the groups merge again; every row's plan is the one schedule's."""

from __future__ import annotations

from typing import Any

import numpy as np

from streamcli.scheduled import cursor as _cursor
from streamcli.scheduled.claims import OPEN
from streamcli.scheduled.handed import HandedSchedule
from streamcli.scheduled.schedule import BatchRuns, Schedule

LENGTHS = [3, 11, 5, 0, 20, 1, 9, 0, 14, 2, 4, 4, 7, 30, 6, 2, 13, 5, 8, 1]
B, T = 4, 4


def probe(b: int, item: int, pos: int, t0: int, n: int, fresh: bool) -> int:
    left = LENGTHS[item] - pos
    return left if left <= n else OPEN  # (ended within the steps asked for, or a step after them exists)


class Turns:
    """The shared claims of one producer's groups: a claim may go once no row has published a smaller key; the
    first claim asked for in each batch of ``deny`` is refused once (its turn "has not come"), which splits the rows
    waiting in that batch off."""

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


def test_groups_that_split_and_merge_plan_every_row_as_one_schedule_does() -> None:
    order = np.array([(i, 0, 0, -1) for i in range(len(LENGTHS))], np.int64)  # (-1: lengths not known)
    start = _cursor.fresh(B)
    kw: dict[str, Any] = {"T": T, "pack": True, "segment": 0, "restream": False}
    one = Schedule(order, start, 0, 0, **kw)
    want = [_rows(one.next_plan(probe), np.ones(B, bool)) for _ in range(14)]

    turns = Turns(deny={2, 5, 8, 9, 11})
    groups = [HandedSchedule(order, start, 0, 0, turns=turns, owned=np.ones(B, bool), **kw)]
    got: dict[int, dict[int, Any]] = {}
    splits = merges = 0
    while min(g.k for g in groups) < 14:
        for g in sorted(groups, key=lambda g: g.k):
            owned = g.owned.copy()
            plan = g.try_plan(probe)
            if plan is None:
                waiting = g.waiting()
                if len(waiting) == int(owned.sum()):
                    continue  # every row of it waits: another group goes first
                groups.append(g.split(waiting))
                splits += 1
                owned = g.owned.copy()
                plan = g.try_plan(probe)
                assert plan is not None
            parts = got.setdefault(plan.k, {})
            assert not set(parts) & set(_rows(plan, owned)), "a row planned twice in one batch"
            parts.update(_rows(plan, owned))
            break
        else:
            raise AssertionError("no group can go on")
        at: dict[int, HandedSchedule] = {}
        for g in list(groups):
            other = at.get(g.k) if g.opening is None else None
            if other is not None:
                other.merge(g)
                groups.remove(g)
                merges += 1
            elif g.opening is None:
                at[g.k] = g
    assert splits >= 3 and merges >= 1
    for k in range(14):
        assert got[k] == want[k], k
