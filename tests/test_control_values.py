"""The control block (``shared.control``): each value and column at its index, read and written only through
``Control``'s methods, and a batch whole by its one producer's mark or once every row has completed it."""

from __future__ import annotations

import numpy as np

from streamcli.scheduled import cursor
from streamcli.shared.control import Control, arrays


def _control(B: int = 2, W: int = 2) -> tuple[Control, dict[str, np.ndarray]]:
    raw = {name: np.zeros(shape, dtype) for name, shape, dtype in arrays(B, 3, W, 4)}
    c = Control(*raw.values())
    c.clear()
    return c, raw


def test_the_control_blocks_arrays_keep_their_shapes_and_dtypes() -> None:
    assert arrays(16, 6, 2, 64) == (
        ("ctl", (15,), "<i8"),
        ("slot_of", (6,), "<i8"),
        ("rows", (16, 3), "<i8"),
        ("held", (16, cursor.WIDTH), "<i8"),
        ("wstat", (2, 5), "<f8"),
        ("order", (64, 4), "<i8"),
        ("start", (16, cursor.WIDTH), "<i8"),
        ("mark", (2, 3), "<i8"),
        ("done", (6,), "<i8"),
    )


def test_each_value_of_ctl_is_the_int64_at_its_index() -> None:
    c, raw = _control()
    ctl = raw["ctl"]
    assert ctl[5] == -1 and ctl[6] == -1  # ready and awaited start at "none"
    c.set_generation(3)
    c.set_streams(np.zeros((4, 4), np.int64), tickets=2)
    c.stage(cursor.fresh(2), first_batch=5, epoch=7, balanced=True)
    c.open_epoch(3, first_batch=5)
    c.await_batch(6)
    c.publish(5, slot=1)
    assert c.take_ticket() == 2
    c.set_idle(1, True)
    assert c.hand_over(0, 1, 6, [0, 0, 0, 0]) and c.arrived(1) is not None
    assert ctl.tolist() == [3, 3, 5, 4, 6, 3, 6, 1, 7, 1, 2, 0, -1, 1, 6]  # ..., moved, epoch, ..., to, at
    assert (c.generation, c.tickets, c.first_batch, len(c.order_table()), c.handed) == (3, 3, 5, 4, 6)
    assert (c.epoch, c.balanced, c.moved, c.tables_ready(3)) == (7, True, 1, True)
    assert isinstance(c.handed, int) and isinstance(c.load_of(0), float)  # Python numbers, not numpy scalars


def test_the_columns_of_rows_and_wstat_are_read_and_written_by_name() -> None:
    c, raw = _control()
    rows, wstat = raw["rows"], raw["wstat"]
    c.set_rows(np.array([0, -1]), np.array([30, 25]), np.array([4, 5]), cursor.fresh(2))
    assert rows.tolist() == [[0, 30, 4], [-1, 25, 5]]  # owner, claim, written
    c.report(1, busy=0.5, steps=6)
    c.set_idle(1, True)
    c.count_sent(1)
    c.set_load(1, 0.25)
    assert wstat[1].tolist() == [0.5, 6, 1, 1, 0.25]  # busy, steps, idle, sent, load
    assert wstat[0].tolist() == [0, 0, 0, 0, 0]
    assert c.load_of(1) == 0.25 and c.load_of(0) == 0


def test_released_control_holds_no_view_of_the_segment() -> None:
    c, raw = _control()
    c.release()
    c.set_generation(4)  # writes to its own detached values, not the segment's
    assert raw["ctl"][0] == 0


def test_a_batch_is_whole_by_its_one_producers_mark_or_once_every_row_has_completed_it() -> None:
    c, raw = _control(B=4)
    c.set_rows(np.full(4, -1), np.zeros(4, np.int64), np.full(4, 2), cursor.fresh(4))
    assert c.batch_done(1) and not c.batch_done(2)  # the epoch starts at batch 2
    c.set_done(3)  # a whole batch, by the producer that filled it
    assert c.batch_done(3) and not c.batch_done(2) and c.done_after(1) == 0
    c.set_written(slice(0, 2), 3)  # one producer's block of rows has completed batch 2, the other's has not
    assert not c.batch_done(2) and c.written_min() == 2
    c.await_batch(2)
    assert not c.wake_due()
    c.set_written(slice(2, 4), 3)
    assert c.batch_done(2) and c.done_after(1) == 2  # batches 2 (its rows) and 3 (its mark)
    assert c.wake_due() and not c.wake_due()  # the first producer to see it wakes the loader, once
    assert raw["done"].tolist() == [4, 0, 0]  # batch 3's mark, in place 3 % 3 of 3
