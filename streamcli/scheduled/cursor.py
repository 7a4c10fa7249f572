"""A row's cursor: where a batch row stands between two batches, ``[item, pos, state, flags]``. A state holds one per
row, and a producer starts an epoch, fresh or resumed, from a table of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum
from typing import Any

import numpy as np

from streamcli.errors import StateError

ITEM, POS, STATE, FLAGS = 0, 1, 2, 3  # columns of a cursor record (int64 each)
REPLAYED, OPEN_ENDED = 1, 2  # bits of FLAGS: a replayed stream; an item of unknown length cut into segments
WIDTH = 4


class RowPhase(IntEnum):
    """What a row does next (``Schedule._walk`` makes the transitions): take the next ticket (``IDLE``), read on
    (``LIVE``), pad until its planned claim, ``pos`` counting on (``SHORT``, also a stream that broke its promise),
    start an open item's next segment on the same row (``FOLLOW``), or nothing more this epoch (``DRY``)."""

    IDLE = 0
    LIVE = 1
    DRY = 2
    FOLLOW = 3
    SHORT = 4


def fresh(batch_size: int) -> np.ndarray:
    """Cursors of an epoch's start: every row idle, about to take a ticket."""
    out = np.zeros((batch_size, WIDTH), np.int64)
    out[:, ITEM] = -1  # (STATE: RowPhase.IDLE, 0)
    return out


def record(item: int, pos: int, state: int, replay: bool, open_ended: bool) -> tuple[int, int, int, int]:
    return (item, pos, state, REPLAYED * replay + OPEN_ENDED * open_ended)


def to_json(cursors: np.ndarray) -> list[list[int]]:
    """``[[item, pos, state, flags], ...]``, one per row: plain data for ``state_dict()``."""
    rows: list[list[int]] = cursors.astype(np.int64, copy=False).tolist()  # (Python ints: C speed)
    return rows


def from_json(rows: Sequence[Sequence[Any]], batch_size: int, num_items: int) -> np.ndarray:
    """Cursors read back from a state, checked (``StateError`` naming what is wrong)."""
    if not isinstance(rows, (list, tuple)) or len(rows) != batch_size:
        got = len(rows) if isinstance(rows, (list, tuple)) else type(rows).__name__
        raise StateError(f"the state's rows: it holds {got} row cursors but batch_size={batch_size}")
    out = fresh(batch_size)
    for b, row in enumerate(rows):
        ints = all(isinstance(v, int) and not isinstance(v, bool) for v in row) if isinstance(row, (list, tuple)) else 0
        if not isinstance(row, (list, tuple)) or len(row) != WIDTH or not ints:
            raise StateError(
                f"the state's rows[{b}]: row {b}'s cursor {row!r} must be [item, pos, state, flags] integers"
            )
        item, pos, state, flags = row
        if state not in RowPhase._value2member_map_ or pos < 0 or not 0 <= flags <= REPLAYED | OPEN_ENDED:
            raise StateError(
                f"the state's rows[{b}]: row {b}'s cursor {row!r} is not a valid [item, pos, state, flags]"
            )
        if state in (RowPhase.LIVE, RowPhase.FOLLOW, RowPhase.SHORT) and not 0 <= item < num_items:
            raise StateError(
                f"the state's rows[{b}]: row {b}'s cursor names stream {item}, but the source has {num_items} streams"
            )
        out[b] = row
    return out
