"""The schedule's steady path plans the same batches as the full pass, and takes most batches of long streams."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from streamcli.scheduled import cursor as _cursor
from streamcli.scheduled.cursor import RowState
from streamcli.scheduled.schedule import BatchRuns, Schedule
from streamcli.scheduled.steady import Steady


def _schedule(lengths: list[int], B: int, T: int, rows: tuple[int, int] | None, **kw: Any) -> Schedule:
    order = np.array([(i, 0, 0, n) for i, n in enumerate(lengths)], np.int64)  # item, first step, open, length
    start = np.array([_cursor.record(-1, 0, RowState.IDLE, False, False)] * B, np.int64)
    return Schedule(order, start, 0, 0, T=T, rows=rows, **kw)


def _same(a: BatchRuns, b: BatchRuns) -> None:
    assert (a.k, a.runs, a.pads) == (b.k, b.runs, b.pads)
    for name in ("whole", "item", "pos", "replay", "stop", "expect", "seg_end", "cursors", "claims", "dry"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and x.shape == y.shape and (x == y).all(), (a.k, name)


@pytest.mark.parametrize(
    ("B", "T", "rows", "kw"),
    [
        (16, 8, None, {"pack": False, "segment": 0, "restream": False}),
        (16, 8, (4, 12), {"pack": False, "segment": 0, "restream": False}),
        (5, 3, None, {"pack": True, "segment": 0, "restream": True}),
        (8, 4, (0, 3), {"pack": True, "segment": 24, "restream": False}),
        (3, 16, None, {"pack": False, "segment": 0, "restream": True}),
    ],
)
def test_steady_plans_equal_the_full_pass(B: int, T: int, rows: tuple[int, int] | None, kw: dict[str, Any]) -> None:
    rng = np.random.default_rng(B * 100 + T)
    lengths = [int(n) for n in rng.integers(0, 60 * T, 6 * B)]
    full, steady = _schedule(lengths, B, T, rows, **kw), Steady(_schedule(lengths, B, T, rows, **kw))
    pairs: list[tuple[BatchRuns, BatchRuns]] = []
    quick = 0
    while (full.claim_order.pending() or len(pairs) < 5) and len(pairs) < 300:
        pairs.append((full.next_plan(), steady.next_plan()))
        quick += pairs[-1][1].whole is steady._same.whole if steady._same is not None else False
    for a, b in pairs:  # compared at the end: a plan still holds its batch once later ones are made
        _same(a, b)
    assert quick > len(pairs) // 5  # the steady path was taken, and its plans compared
    assert full.k == steady.k


def test_plans_of_a_stretch_stay_as_planned() -> None:
    steady = Steady(_schedule([100] * 4, 4, 4, None, pack=False, segment=0, restream=False))
    plans = [steady.next_plan() for _ in range(10)]
    assert plans[1].whole is plans[9].whole  # batch 0 claims every row; 1 .. 9 are one steady stretch
    assert [p.pos.tolist() for p in plans[1:]] == [[4 * k] * 4 for k in range(1, 10)]
    assert [p.cursors[:, _cursor.POS].tolist() for p in plans] == [[4 * (k + 1)] * 4 for k in range(10)]
