"""The schedule plans each batch from the rows whose events fall in it (``Schedule.due``): the same plans as planning
every row in every batch, and most batches of long streams cost no row's planning at all."""

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


class _EveryRow(Schedule):
    EVENTS = False  # every row planned in every batch
    MANY = 1 << 30  # one by one (``Schedule._walk``), never together (``scheduled.crossings``)


class _Counting(Schedule):
    MANY = 8  # (fewer than the default: more batches of the shapes below plan their crossings together)
    together = 0  # the crossings planned together (``scheduled.crossings``)

    def _cross_many(self, rows: set[int], got: list[tuple[int, ...]], q0: int, out: BatchRuns) -> set[int]:
        planned = super()._cross_many(rows, got, q0, out)
        self.together += len(planned)
        return planned


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
        (1024, 16, None, {"pack": False, "segment": 0, "restream": False}),
        (1024, 8, (100, 900), {"pack": True, "segment": 0, "restream": True}),
        (1024, 16, None, {"pack": True, "segment": 24, "restream": False}),
    ],
)
def test_plans_from_events_equal_those_of_every_row_planned_in_every_batch(
    B: int, T: int, rows: tuple[int, int] | None, kw: dict[str, Any]
) -> None:
    rng = np.random.default_rng(B * 100 + T)
    lengths = [int(n) for n in rng.integers(0, 60 * T, 6 * B)]
    full, steady = _schedule(lengths, B, T, rows, **kw), _schedule(lengths, B, T, rows, **kw)
    full.__class__, steady.__class__ = _EveryRow, _Counting
    assert isinstance(steady, _Counting)
    pairs: list[tuple[BatchRuns, BatchRuns]] = []
    quick = 0
    while (full.claim_order.pending() or len(pairs) < 5) and len(pairs) < 300:
        pairs.append((full.next_plan(), steady.next_plan()))
        quick += pairs[-1][1].whole is steady._same[0].whole if steady._same is not None else False
    for a, b in pairs:  # compared at the end: a plan still holds its batch once later ones are made
        _same(a, b)
    if B < 100:
        assert quick > len(pairs) // 5  # batches where no row changes were taken, and their plans compared
    else:  # a wide batch changes rows in every batch: most of its crossings were planned together
        claims = sum(int(b.claims.sum()) for _, b in pairs)
        assert steady.together > claims // 2, (steady.together, claims)
    assert full.k == steady.k


def test_batches_where_no_row_changes_share_their_rows_parts_and_count_positions_on() -> None:
    steady = _schedule([100] * 4, 4, 4, None, pack=False, segment=0, restream=False)
    plans = [steady.next_plan() for _ in range(10)]
    assert plans[1].whole is plans[9].whole  # batch 0 claims every row; in 1 .. 9 no row changes
    assert [p.pos.tolist() for p in plans[1:]] == [[4 * k] * 4 for k in range(1, 10)]
    assert [p.cursors[:, _cursor.POS].tolist() for p in plans] == [[4 * (k + 1)] * 4 for k in range(10)]


@pytest.mark.parametrize(("B", "T"), [(6, 4), (64, 8)])
@pytest.mark.parametrize(("pack", "segment"), [(True, 0), (False, 0), (True, 24), (False, 12)])
def test_plans_of_unknown_lengths_from_events_equal_those_of_every_row_planned(
    pack: bool, segment: int, B: int, T: int
) -> None:
    """Streams of unknown length: the batch's reads (the probe) say when a stream does not go on, so a batch
    changes no row only while no read finds an end, and its plans are those of every row planned. At B=64 the odd
    streams' lengths are known: open and known bounds in one batch, enough rows changing to plan some together."""
    rng = np.random.default_rng(7 + segment)
    lengths = [int(n) for n in rng.integers(0, 40 * T, 5 * B)]
    known = B > 8 and segment == 0  # (an item of known length would be cut into segments: here they are not)
    order = np.array([(i, 0, 0, n if known and i % 2 else -1) for i, n in enumerate(lengths)], np.int64)
    start = np.array([_cursor.record(-1, 0, RowPhase.IDLE, False, False)] * B, np.int64)

    def probe(b: int, item: int, pos: int, t0: int, n: int, fresh: bool) -> int:
        left = lengths[item] - pos
        return left if left <= n else OPEN  # (ended within the steps asked for, or a step after them exists)

    kw: dict[str, Any] = {"T": T, "pack": pack, "segment": segment, "restream": False}
    full, steady = _EveryRow(order, start, 0, 0, **kw), _Counting(order, start, 0, 0, **kw)
    pairs: list[tuple[BatchRuns, BatchRuns]] = []
    quick = 0
    while len(pairs) < 200:
        pairs.append((full.next_plan(probe), steady.next_plan(probe)))
        quick += steady._same is not None and pairs[-1][1].whole is steady._same[0].whole
    for a, b in pairs:
        _same(a, b)
    if B < 8:
        assert quick >= 3  # batches where no row changes were taken, and their plans compared
    if known:  # (the known streams' crossings of the usual shapes: some planned together beside the open rows)
        assert steady.together > 0


def test_dry_and_padding_rows_pad_on_in_batches_where_no_row_changes() -> None:
    """Four rows, ``pad``, resumed after two tickets: one row takes the last stream and another is dry from batch 0
    on, and a resumed short row pads until its claim; the batches between events plan none of them again, and pad
    them all the same."""
    order = np.array([(0, 0, 0, 90), (1, 0, 0, 70), (2, 0, 0, 30)], np.int64)
    start = np.array(
        [
            _cursor.record(0, 10, RowPhase.LIVE, False, False),
            _cursor.record(1, 5, RowPhase.SHORT, False, False),  # fell short: pads until step 65's batch
            _cursor.record(-1, 0, RowPhase.IDLE, False, False),
            _cursor.record(-1, 0, RowPhase.IDLE, False, False),
        ],
        np.int64,
    )
    kw: dict[str, Any] = {"T": 4, "pack": False, "segment": 0, "restream": False}
    full, events = _EveryRow(order, start, 0, 2, **kw), Schedule(order, start, 0, 2, **kw)
    plans, kept = [], []
    for _ in range(24):
        plans.append((full.next_plan(), events.next_plan()))
        kept.append(events._same)
    for a, b in plans:
        _same(a, b)
    _, second = plans[1]
    assert second.whole.tolist() == [0, 2] and sorted(p[0] for p in second.pads) == [1, 3]
    assert kept[10] is not None and plans[10][1].whole is kept[10][0].whole  # (no row planned again)
    assert [p[1].cursors[1, _cursor.POS] for p in plans[:3]] == [9, 13, 17]  # the short row's position counts on
    assert plans[16][1].cursors[1].tolist()[_cursor.STATE] == RowPhase.IDLE  # step 68: its claim, at batch 17
