"""Heavy streams first (``engine.heavy``): with planned claims, a producer makes the claim of a stream known to cost
far more per step before earlier ones, and runs a row ahead of its others when the row's next stream is heavy.
Who writes a row, and when, never changes the batches."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from _invariants import collect
from _sources import CountingSource

from streamcli import Field, StreamLoader
from streamcli.engine import heavy, produce
from streamcli.engine.claims import ClaimPlan
from streamcli.engine.control import Control
from streamcli.engine.producer import Row
from streamcli.engine.ring import Ring

B, T = 4, 4
CHEAP, HEAVY = 1e-3, 1e-2  # seconds per step


_rings: list[Ring] = []


@pytest.fixture(autouse=True)
def _close_rings() -> Iterator[None]:
    yield
    while _rings:
        _rings.pop().close()


def _control(items: int, costs: dict[int, float]) -> Control:
    """A real control block (``Ring.create``): ticket j names item j, a whole stream of 8 steps."""
    ring = Ring.create(dict(fields=(Field("x", (1,), "uint8"),), batch_size=B, time_steps=T, num_slots=2,
                            num_workers=2, num_streams=items, layout="TB", num_items=items))  # fmt: skip
    _rings.append(ring)
    control = ring.control
    control.set_streams(np.array([[j, 0, 0, 8] for j in range(items)], np.int64), 0)
    for item, c in costs.items():
        control.note_cost(item, c)
    return control


def _plan(items: int) -> ClaimPlan:
    """Every row claims at the epoch's start (key = its row), then again after its 8 steps."""
    return ClaimPlan([8] * items, [(b, b) for b in range(B)], 0, B=B, T=T, pack=True, restream=False)


def _producer(control: Control, plan: ClaimPlan, rows: dict[int, Row]) -> Any:
    return SimpleNamespace(rows=rows, ring=SimpleNamespace(control=control), claims=plan, T=T, B=B)


def _waiting(control: Control, rows: list[int]) -> None:
    for b in rows:
        control.release_row(b, b, 0, (-1, 0, 0, 0))  # waiting for its claim at key b


def test_the_heaviest_waiting_claim_goes_first() -> None:
    control = _control(8, {0: CHEAP, 1: CHEAP, 2: HEAVY, 3: CHEAP})
    _waiting(control, [0, 1, 2])
    held = Row(3, item=3, rate=CHEAP)
    p = _producer(control, _plan(8), {3: held})
    assert heavy.costliest_claim(p, 0, 0, top=1) == (2, 2, True)  # row 2 takes ticket 2: item 2, heavy


def test_claims_stay_in_key_order_when_no_stream_is_heavy() -> None:
    control = _control(8, {0: CHEAP, 1: 2 * CHEAP, 2: 3 * CHEAP, 3: CHEAP})  # 3x the held rate: not heavy
    _waiting(control, [0, 1, 2])
    p = _producer(control, _plan(8), {3: Row(3, item=3, rate=CHEAP)})
    assert heavy.costliest_claim(p, 0, 0, top=1) == (0, 0, False)


def test_unknown_costs_and_an_idle_producer_keep_key_order() -> None:
    control = _control(8, {})  # nothing measured yet
    _waiting(control, [0, 1, 2])
    p = _producer(control, _plan(8), {3: Row(3, item=3, rate=CHEAP)})
    assert heavy.costliest_claim(p, 0, 0, top=1) == (0, 0, False)
    control = _control(8, {2: HEAVY})
    _waiting(control, [0, 1, 2, 3])
    p = _producer(control, _plan(8), {})  # holds no row: it takes the earliest claim anyway
    assert heavy.costliest_claim(p, 0, 0, top=1) == (0, 0, False)


def test_a_claim_beyond_the_hand_out_window_waits() -> None:
    control = _control(8, {0: CHEAP, 2: HEAVY})
    _waiting(control, [0])
    control.release_row(2, 2 * T * B + 2, 0, (-1, 0, 0, 0))  # row 2 claims in batch 2, not handed out yet
    p = _producer(control, _plan(8), {3: Row(3, item=3, rate=CHEAP)})
    assert heavy.costliest_claim(p, 0, 0, top=1) == (0, 0, False)


def test_a_stale_waiting_claim_is_skipped() -> None:
    control, plan = _control(8, {0: CHEAP, 1: HEAVY}), _plan(8)
    for b in range(B):
        plan.claim(b, b, 0)  # made (by another producer, say): those rows have moved on
    _waiting(control, [0, 1])  # but a stale read still shows rows 0 and 1 waiting at keys 0 and 1
    p = _producer(control, plan, {3: Row(3, item=3, rate=CHEAP)})
    assert heavy.costliest_claim(p, 0, 0, top=1) == (0, 0, False)  # take_row will find row 0 taken


def test_a_row_whose_next_stream_is_heavy_runs_ahead() -> None:
    control = _control(8, {5: HEAVY, 6: CHEAP})
    rows = {b: Row(b, item=b, q=2 * T, rate=CHEAP) for b in range(3)}
    rows[1].q, rows[1].next_item = 3 * T, 5  # one batch ahead of the others, and claims item 5 next
    rows[2].next_item = 6
    p = _producer(control, _plan(8), rows)
    assert heavy.lead_row(p, k_run=2, top=6) is rows[1]
    assert heavy.lead_row(p, k_run=2, top=3) is None  # its batch is not handed out
    rows[1].next_item = 6
    assert heavy.lead_row(p, k_run=2, top=6) is None


def test_costs_are_uneven_when_one_item_costs_fourfold_the_median() -> None:
    assert not _control(8, {}).uneven(heavy.HEAVIER)
    assert not _control(8, {0: CHEAP, 1: 3 * CHEAP, 2: CHEAP}).uneven(heavy.HEAVIER)
    assert _control(8, {0: CHEAP, 1: HEAVY, 2: CHEAP}).uneven(heavy.HEAVIER)
    assert not _control(8, {0: CHEAP, 1: HEAVY, 2: HEAVY}).uneven(heavy.HEAVIER)  # the median item is heavy


def test_the_cost_table_keeps_the_least_measurement() -> None:
    # A busy host only slows a measurement: a slowed re-measurement of a cheap item must not make it heavy.
    control = _control(8, {0: CHEAP, 1: CHEAP, 2: CHEAP})
    control.note_cost(1, 10 * CHEAP)
    assert control.item_cost(1) == CHEAP and not control.uneven(heavy.HEAVIER)
    control.note_cost(1, CHEAP / 2)
    assert control.item_cost(1) == CHEAP / 2


def test_a_stream_cost_is_noted_after_its_steady_pieces() -> None:
    # The piece that opened the stream is not counted; from then on the least of the pieces, noted for every
    # producer only once there are ``_STEADY_PIECES`` of them, so that a few preempted pieces cannot make a
    # cheap item look heavy.
    control = _control(8, {})
    p = SimpleNamespace(steps=0, ring=SimpleNamespace(control=control))
    row = Row(0, item=3, it=iter(()))

    def piece(seconds_per_step: float, steps: int = 4) -> None:
        p.steps += steps
        produce._measure(p, row, time.perf_counter() - seconds_per_step * steps, p.steps - steps)  # type: ignore[arg-type]

    piece(HEAVY)  # the open
    assert row.cost > 0 and row.pieces == 0
    for slow in (5 * HEAVY, 3 * HEAVY, 2 * HEAVY):
        piece(slow)
        assert control.item_cost(3) == 0  # not yet noted
    piece(4 * HEAVY)
    assert control.item_cost(3) == pytest.approx(2 * HEAVY, rel=0.2)  # the least of the four
    piece(HEAVY)
    assert control.item_cost(3) == pytest.approx(HEAVY, rel=0.2)
    piece(9 * HEAVY)
    assert control.item_cost(3) == pytest.approx(HEAVY, rel=0.2)


def test_a_short_stream_cost_is_noted_when_it_ends() -> None:
    # A stream of a few batches (a short segment) has fewer than ``_STEADY_PIECES`` steady pieces: its cost is
    # the least of them, noted when it ends, from two pieces on.
    control = _control(8, {})
    p = SimpleNamespace(steps=0, ring=SimpleNamespace(control=control))

    def piece(row: Row, seconds_per_step: float, ends: bool = False) -> None:
        p.steps += 4
        if ends:
            row.it = None
        produce._measure(p, row, time.perf_counter() - seconds_per_step * 4, p.steps - 4)  # type: ignore[arg-type]

    one, two = Row(0, item=1, it=iter(())), Row(1, item=2, it=iter(()))
    for row in (one, two):
        piece(row, HEAVY)  # the open
    piece(one, 3 * HEAVY)
    piece(one, 9 * HEAVY, ends=True)
    assert control.item_cost(1) == 0  # one steady piece: nothing to go on
    piece(two, 3 * HEAVY)
    piece(two, 2 * HEAVY)
    assert control.item_cost(2) == 0
    piece(two, 9 * HEAVY, ends=True)
    assert control.item_cost(2) == pytest.approx(2 * HEAVY, rel=0.2)


def test_next_item_peeks_the_plan_without_changing_it() -> None:
    control, plan = _control(8, {}), _plan(8)
    row = Row(1, item=1, claim_q=8)  # ticket 1's 8 steps from step 0: row 1 claims again at step 8
    p = _producer(control, plan, {1: row})
    assert heavy.next_item(p, row) == 5  # the claims at step 8 take tickets 4..7 in row order
    fresh = _plan(8)
    keys = [(b, b) for b in range(B)] + [(1, 8 * B + 1)]
    assert [plan.claim(b, k, 0) for b, k in keys] == [fresh.claim(b, k, 0) for b, k in keys]


class HeavySource(CountingSource):
    """Items in ``slow`` sleep ``delay`` seconds a step, the others nothing."""

    def __init__(self, lengths: list[int], slow: set[int], delay: float = 0.004) -> None:
        super().__init__(lengths)
        self.slow, self.delay = slow, delay

    def open(self, item: int, start: int = 0) -> Iterator[dict[str, np.ndarray]]:
        for step in super().open(item, start):
            if item in self.slow:
                time.sleep(self.delay)
            yield step


@pytest.mark.slow
@pytest.mark.parametrize("boundary", ["pack", "pad"])
def test_heavy_streams_first_leaves_the_batches_unchanged(boundary: str, no_leaks: None) -> None:
    lengths = [int(n) for n in np.random.default_rng(3).integers(20, 70, 24)]
    slow = {5, 17}
    kw: dict[str, Any] = dict(batch_size=4, time_steps=2, boundary=boundary, segment=24)
    with StreamLoader(HeavySource(lengths, slow), **kw) as loader:
        want = [collect(loader) for _ in range(3)]
    with StreamLoader(HeavySource(lengths, slow), num_workers=2, **kw) as loader:
        ring = loader.ring
        shallow = ring.reserved
        assert shallow < ring.spec.num_slots  # the deep window's slots are not backed with memory yet
        got = [collect(loader) for _ in range(3)]  # the later epochs know every item's cost
        control = ring.control
        cheap = max(control.item_cost(i) for i in range(len(lengths)) if i not in slow)
        assert min(control.item_cost(i) for i in slow) > heavy.HEAVIER * cheap  # the rule had costs to act on
        assert loader.window > loader.prefetch  # uneven costs: the workers may run further ahead
        assert ring.reserved == ring.spec.num_slots == loader.stats.num_slots > shallow  # in slots backed only now
        assert loader.stats.heavy_first > 0  # and the heavy streams went first
    for epoch_got, epoch_want in zip(got, want, strict=True):
        assert len(epoch_got) == len(epoch_want)
        for a, b in zip(epoch_got, epoch_want, strict=True):
            for name in a:
                np.testing.assert_array_equal(a[name], b[name], err_msg=name)


@pytest.mark.slow
def test_no_room_for_the_deep_window_keeps_the_shallow_one(monkeypatch: pytest.MonkeyPatch, no_leaks: None) -> None:
    # /dev/shm has no room left when the costs turn out uneven: the window stays at ``prefetch`` and nothing
    # fails; the heavy streams still go first, and the batches are the same.
    import errno
    import os

    backed, refused = os.posix_fallocate, []

    def full_later(fd: int, offset: int, length: int) -> None:
        if offset:  # the ring's start is backed when it is made; nothing after that
            refused.append(threading.current_thread().name)
            raise OSError(errno.ENOSPC, "No space left on device")
        backed(fd, offset, length)

    monkeypatch.setattr(os, "posix_fallocate", full_later)
    lengths = [int(n) for n in np.random.default_rng(3).integers(20, 70, 24)]
    kw: dict[str, Any] = dict(batch_size=4, time_steps=2, segment=24)
    with StreamLoader(HeavySource(lengths, {5, 17}), **kw) as loader:
        want = [collect(loader) for _ in range(2)]
    with StreamLoader(HeavySource(lengths, {5, 17}), num_workers=2, **kw) as loader:
        got = [collect(loader) for _ in range(2)]
        # The loader asked for the deep window once, in a thread of its own (the consumer never waits for the
        # half second that backing 1 GiB takes), and was refused.
        assert refused == ["streamcli-reserve"]
        assert loader.window == loader.prefetch and loader.ring.reserved < loader.ring.spec.num_slots
        assert loader.stats.num_slots == loader.ring.reserved and loader.stats.heavy_first > 0
    for epoch_got, epoch_want in zip(got, want, strict=True):
        assert len(epoch_got) == len(epoch_want)
        for a, b in zip(epoch_got, epoch_want, strict=True):
            for name in a:
                np.testing.assert_array_equal(a[name], b[name], err_msg=name)
