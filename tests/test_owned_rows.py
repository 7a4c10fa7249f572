"""Rows owned by whichever producer writes them, on the one schedule (issue 35 §1, the balanced policy): every
producer plans every row, writes the rows it owns from that plan (``BatchRuns.only``, the flags and cursors of
those rows alone), and a row that changes hands at a batch boundary is reopened where the plan says
(``open(item, start=pos)``). The bytes are those of one producer writing every row."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any, cast

import numpy as np
import pytest
from _sources import CountingBlocks, CountingSource

from streamcli.fills import writers
from streamcli.fills.balanced import Balancer
from streamcli.fills.flags import Views, write_cursors, write_flags
from streamcli.fills.iterators import Reader, Rows
from streamcli.fills.spec import Faults, Skip
from streamcli.scheduled import cursor as _cursor
from streamcli.scheduled.schedule import Schedule
from streamcli.scheduled.streams import all_streams, shuffled
from streamcli.source import StreamSource

LENGTHS = [3, 11, 5, 0, 20, 1, 9, 0, 14, 2, 4, 4, 7, 13]
B, T = 5, 4


def _views() -> Views:
    """A slot's arrays, every cell set to a value no writer writes there, so a cell left unwritten shows."""
    return Views(
        data=[np.full((T, B, 2), -7, np.int64)],
        first=np.ones((T, B), bool),
        valid=np.ones((T, B), bool),
        stream=np.full((T, B), -7, np.int64),
        position=np.full((T, B), -7, np.int64),
        replayed=np.ones((T, B), bool),
        claims=np.full(B, -7, np.int64),
        cursor=np.full((B, _cursor.WIDTH), -7, np.int64),
    )


def _rows(source: StreamSource, skips: list[Skip]) -> Rows:
    faults = Faults("test", source, source.items(), "skip", skips.append)
    return Rows(source, source.fields(), bool(getattr(source, "block_steps", False)), faults, np.zeros(3, np.int64))


def _cells(v: Views) -> list[bytes]:
    return [a.tobytes() for a in (*v.data, v.first, v.valid, v.stream, v.position, v.replayed, v.claims, v.cursor)]


def _columns(v: Views, rows: np.ndarray) -> Views:
    """A copy of ``rows``'s cells."""
    return Views(
        data=[a[:, rows] for a in v.data],
        first=v.first[:, rows],
        valid=v.valid[:, rows],
        stream=v.stream[:, rows],
        position=v.position[:, rows],
        replayed=v.replayed[:, rows],
        claims=v.claims[rows],
        cursor=v.cursor[rows],
    )


def _batches(source: CountingSource, owners: np.ndarray | None, *, pack: bool, segment: int) -> list[list[bytes]]:
    """Every batch of an epoch (restreamed, 12 batches), written by one producer (``owners`` None) or by
    producers that own the rows ``owners[k]`` says in batch ``k`` (each plans every row)."""
    s = shuffled(all_streams(source.lengths, segment), 3, 0, True)
    order = np.stack([s.items, s.starts, s.open_ended, np.asarray(source.lengths)[s.items]], axis=1)
    W = 1 if owners is None else int(owners.max()) + 1
    plans = [Schedule(order, _cursor.fresh(B), 0, 0, T=T, pack=pack, segment=segment, restream=True) for _ in range(W)]
    skips: list[Skip] = []
    readers = [_rows(source, skips) for _ in range(W)]
    steps_t = np.arange(T, dtype=np.int64)
    out = []
    for k in range(12):
        v = _views()
        for w, (sched, rows) in enumerate(zip(plans, readers, strict=True)):
            plan = sched.next_plan()
            if owners is None:
                write_flags(v, plan, steps_t)
                write_cursors(v, plan, rows.fill(v, plan))
                continue
            mine = owners[k] == w
            for b in np.flatnonzero(~mine).tolist():
                rows.drop(b)
            part, cols = plan.only(mine), np.flatnonzero(mine).tolist()
            others = _cells(_columns(v, ~mine))
            write_flags(v, part, steps_t, cols)
            write_cursors(v, part, rows.fill(v, part), cols)
            assert _cells(_columns(v, ~mine)) == others  # the other producers' rows are theirs alone
        out.append(_cells(v))
    for rows in readers:
        rows.close()
    assert not skips  # an honest source: nothing reported, however often a row changed hands
    return out


@pytest.mark.parametrize("segment", [0, 3])
@pytest.mark.parametrize("pack", [True, False])
@pytest.mark.parametrize("blocks", [False, True])
def test_rows_owned_by_any_producer_give_the_batches_of_one(blocks: bool, pack: bool, segment: int) -> None:
    source = (CountingBlocks if blocks else CountingSource)(LENGTHS)
    one = _batches(source, None, pack=pack, segment=segment)
    rng = np.random.default_rng(0)
    for owners in (
        rng.integers(0, 2, (12, B)),  # rows change hands at random batch boundaries, mid-stream too
        rng.integers(0, 3, (12, B)),
        np.tile(np.arange(B) % 2, (12, 1)),  # scattered, never moving
        np.array([np.roll(np.arange(B) % 2, k) for k in range(12)]),  # every row moves at every boundary
    ):
        assert _batches(source, owners, pack=pack, segment=segment) == one


def test_a_plan_of_some_rows_holds_only_theirs() -> None:
    order = np.array([(i, 0, 0, n) for i, n in enumerate(LENGTHS)], np.int64)
    sched = Schedule(order, _cursor.fresh(B), 0, 0, T=T, pack=True, segment=0, restream=False)
    for _ in range(6):
        plan = sched.next_plan()
        mine = np.array([True, False, True, False, False])
        part: Any = plan.only(mine)
        assert set(part.whole.tolist()) == set(plan.whole.tolist()) & {0, 2}
        assert [r for r in plan.runs if r[0] in (0, 2)] == part.runs
        assert [p for p in plan.pads if p[0] in (0, 2)] == part.pads
        assert part.item.tolist() == [i for b, i in zip(plan.whole, plan.item, strict=True) if b in (0, 2)]
        assert part.cursors is plan.cursors


def test_balanced_epochs_of_known_lengths_run_on_the_schedule() -> None:
    def choose(*, known: bool, balanced: bool, w: int = 1, W: int = 2) -> writers.Planned | None:
        return writers.choose(by_batch=False, w=w, W=W, B=5, known=known, balanced=balanced)

    policy = choose(known=True, balanced=True)
    assert policy == writers.Balanced(1, 2, 5)
    assert isinstance(policy, writers.Balanced) and policy.rows == (0, 5) and policy.block == (2, 5)
    assert choose(known=False, balanced=True) == writers.Balanced(1, 2, 5, known=False)  # (``fills.balanced.Handover``)
    assert choose(known=True, balanced=True, w=0, W=1) == writers.RowBlocks(0, 1, 5)  # (no one to balance with)
    assert choose(known=True, balanced=False) == writers.RowBlocks(1, 2, 5)


class _Control:
    """What ``OwnedRows.write`` asks of the control block, recorded: every batch waits for producer 1's batch 1,
    producer 0 is idle (its load ``idle_load``), and no producer is timed row by row (the costs stay as set)."""

    def __init__(self, idle_load: float = 0.0) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.idle_load = idle_load

    def idle_elsewhere(self, w: int) -> bool:
        return False

    def set_load(self, w: int, seconds: float) -> None:
        pass

    def written_min(self) -> int:
        return 1

    def taker(self, w: int) -> int:
        return 0

    def load_of(self, w: int) -> float:
        return self.idle_load

    def set_written(self, rows: list[int], batches: int) -> None:
        self.calls.append(("written", tuple(rows), batches))

    def hand_over(self, b: int, to: int, k: int, cursor: list[int]) -> bool:
        self.calls.append(("hand_over", b, to, k, tuple(cursor)))
        return True


def test_the_cheapest_row_moves_after_its_batch_is_marked_but_never_one_whose_stream_broke_its_promise() -> None:
    source = CountingSource(LENGTHS)
    order = np.array([(i, 0, 0, n) for i, n in enumerate(LENGTHS)], np.int64)
    sched = Schedule(order, _cursor.fresh(B), 0, 0, T=T, pack=True, segment=0, restream=False)

    def balancer(control: _Control) -> Balancer:
        rows = _rows(source, [])
        own = Balancer(cast(Any, control), sched, rows, rows.faults, lambda k: _views(), w=1,
                       lock=nullcontext(), busy=lambda: None)  # fmt: skip
        own.cost = {0: 3.0, 1: 0.1, 2: 0.5}  # (row 3: not measured yet)
        return own

    sched.next_plan()
    plan = sched.next_plan()  # batch 1
    mine = np.array([True, True, True, True, False])
    control = _Control()
    own = balancer(control)
    own.write(plan.only(mine), [0, 1, 2, 3])
    # Row 1 is the cheapest: marked written through batch 1 with the others, then handed over from batch 2 on, with
    # its cursor after batch 1 (the plan's).
    assert control.calls == [("written", (0, 1, 2, 3), 2), ("hand_over", 1, 0, 2, tuple(plan.cursors[1].tolist()))]
    assert 1 not in own.cost and 1 not in own.rows.readers
    own = balancer(control)
    own.rows.readers[1] = Reader(item=0, pos=2, it=None, dead=True)  # ended before its promise: it stays
    assert own._choose([0, 1, 2, 3], 1) == (2, 0)
    assert own._choose([0, 1], 1) == (-1, -1)  # row 0 is the costliest left that may move: it stays
    assert balancer(_Control(idle_load=3.55))._choose([0, 1, 2], 1) == (-1, -1)  # the taker would be no less busy
    assert own._choose([0, 1, 2, 3], 0) == (-1, -1)  # batch 0 is not what every batch waits for
