"""The schedule's steady path plans the same batches as the full pass, and takes most batches of long streams."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from streamcli.scheduled import cursor as _cursor
from streamcli.scheduled.claims import OPEN
from streamcli.scheduled.cursor import RowPhase
from streamcli.scheduled.schedule import BatchRuns, Schedule


def _schedule(lengths: list[int], B: int, T: int, rows: tuple[int, int] | None, **kw: Any) -> Schedule:
    order = np.array([(i, 0, 0, n) for i, n in enumerate(lengths)], np.int64)  # item, first step, open, length
    start = np.array([_cursor.record(-1, 0, RowPhase.IDLE, False, False)] * B, np.int64)
    return Schedule(order, start, 0, 0, T=T, rows=rows, **kw)


class _FullPass(Schedule):
    STRETCHES = False  # every batch through the full pass


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
    full, steady = _schedule(lengths, B, T, rows, **kw), _schedule(lengths, B, T, rows, **kw)
    full.__class__ = _FullPass
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
    steady = _schedule([100] * 4, 4, 4, None, pack=False, segment=0, restream=False)
    plans = [steady.next_plan() for _ in range(10)]
    assert plans[1].whole is plans[9].whole  # batch 0 claims every row; 1 .. 9 are one steady stretch
    assert [p.pos.tolist() for p in plans[1:]] == [[4 * k] * 4 for k in range(1, 10)]
    assert [p.cursors[:, _cursor.POS].tolist() for p in plans] == [[4 * (k + 1)] * 4 for k in range(10)]


@pytest.mark.parametrize(("pack", "segment"), [(True, 0), (False, 0), (True, 24), (False, 12)])
def test_steady_plans_of_unknown_lengths_equal_the_full_pass(pack: bool, segment: int) -> None:
    """Streams of unknown length: the batch's reads (the probe) say when a stream does not go on, so a stretch
    holds only while no read finds an end, and its plans are those of the full pass."""
    rng = np.random.default_rng(7 + segment)
    B, T = 6, 4
    lengths = [int(n) for n in rng.integers(0, 40 * T, 5 * B)]
    order = np.array([(i, 0, 0, -1) for i in range(len(lengths))], np.int64)  # (-1: the length is not known)
    start = np.array([_cursor.record(-1, 0, RowPhase.IDLE, False, False)] * B, np.int64)

    def probe(b: int, item: int, pos: int, t0: int, n: int, fresh: bool) -> int:
        left = lengths[item] - pos
        return left if left <= n else OPEN  # (ended within the steps asked for, or a step after them exists)

    kw: dict[str, Any] = {"T": T, "pack": pack, "segment": segment, "restream": False}
    full, steady = _FullPass(order, start, 0, 0, **kw), Schedule(order, start, 0, 0, **kw)
    pairs: list[tuple[BatchRuns, BatchRuns]] = []
    quick = 0
    while len(pairs) < 200:
        pairs.append((full.next_plan(probe), steady.next_plan(probe)))
        quick += steady._same is not None and pairs[-1][1].whole is steady._same.whole
    for a, b in pairs:
        _same(a, b)
    assert quick >= 3  # the steady path was taken, and its plans compared
