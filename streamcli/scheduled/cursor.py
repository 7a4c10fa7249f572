"""A row's cursor: the one record that says where a batch row stands between two batches.

Every producer writes the cursor of each of its rows into the slot it just filled, so for any batch handed out
the loader knows, without asking a worker, what every row will do next: continue stream ``item`` at step
``pos`` (``LIVE``), start the next segment of it at ``pos`` (``FOLLOW``), pad where a short stream would have
gone on (``SHORT``), take the next ticket (``IDLE``), or nothing more this epoch (``DRY``). A producer starts an
epoch, fresh or resumed, from a table of the same records. This module alone knows the record's layout.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from streamcli.errors import StateError

ITEM, POS, STATE, FLAGS = 0, 1, 2, 3  # columns of a cursor record (int64 each)
REPLAYED, OPEN_ENDED = 1, 2  # bits of FLAGS: a replayed stream; an item of unknown length cut into segments
WIDTH = 4
IDLE, LIVE, DRY, FOLLOW, SHORT = 0, 1, 2, 3, 4
STATE_NAMES = {IDLE: "idle", LIVE: "live", DRY: "dry", FOLLOW: "follow", SHORT: "short"}
"""``FOLLOW``: the row's segment ended at ``pos`` and its item goes on; the row's next step starts the next
segment of the same item (segments of items whose length is unknown stay on their row). ``SHORT``: the stream
ended before the length it promised (or failed under on_error="skip"); the row is padding, and ``pos`` counts on
as if the stream did, up to its planned next claim (``scheduled.claims``)."""


def fresh(batch_size: int) -> np.ndarray:
    """Cursors of an epoch's start: every row idle, about to take a ticket."""
    out = np.zeros((batch_size, WIDTH), np.int64)
    out[:, ITEM] = -1
    return out


def record(item: int, pos: int, state: int, replay: bool, open_ended: bool) -> tuple[int, int, int, int]:
    return (item, pos, state, REPLAYED * replay + OPEN_ENDED * open_ended)


def to_json(cursors: np.ndarray) -> list[list[int]]:
    """``[[item, pos, state, flags], ...]``, one per row: plain data for ``state_dict()``."""
    return [[int(v) for v in row] for row in cursors]


def from_json(rows: Sequence[Sequence[Any]], batch_size: int, num_items: int) -> np.ndarray:
    """Validate and convert cursors read back from a state; raise ``ValueError`` naming what is wrong."""
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
        if state not in STATE_NAMES or pos < 0 or not 0 <= flags <= REPLAYED | OPEN_ENDED:
            raise StateError(
                f"the state's rows[{b}]: row {b}'s cursor {row!r} is not a valid [item, pos, state, flags]"
            )
        if state in (LIVE, FOLLOW, SHORT) and not 0 <= item < num_items:
            raise StateError(
                f"the state's rows[{b}]: row {b}'s cursor names stream {item}, but the source has {num_items} streams"
            )
        out[b] = row
    return out
