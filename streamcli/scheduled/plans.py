"""What a batch holds, as its schedule plans it (``scheduled.schedule``): the rows one stream covers for the whole
batch, as arrays, and the rest as runs of a stream's steps and padding; fillers write the batch from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

Run = tuple[int, int, int, int, int, bool, bool, int, int, int]
"""(row, first batch step, steps, item, first item position, replayed, fresh, stop, promised length, segment end):
a stream's steps in a row it does not cover for the whole batch; ``stop``: where the stream ends in its item
(``OPEN``-based where its length is not known); ``fresh``: the run starts the stream (``is_first``)."""


@dataclass
class BatchRuns:
    """What batch ``k`` holds, as planned. ``whole``: rows covered by one stream for the whole batch (with the
    stream's item, first position, replayed flag, and where it stops); ``runs`` and ``pads`` for the
    rest. ``cursors``, ``claims`` and ``dry`` are every row's cursor and tickets after the batch."""

    k: int
    whole: np.ndarray  # int64 rows
    item: np.ndarray  # int64, per whole row
    pos: np.ndarray  # int64, per whole row
    replay: np.ndarray  # bool, per whole row
    stop: np.ndarray  # int64, per whole row
    expect: np.ndarray  # int64, per whole row: the item's promised length
    seg_end: np.ndarray  # int64, per whole row
    runs: list[Run]
    pads: list[tuple[int, int, int]]  # (row, first step, end) of padding
    cursors: np.ndarray  # (B, 4) int64 as ``scheduled.cursor`` records, planned
    claims: np.ndarray  # (B,) int64 tickets taken in the batch
    dry: np.ndarray  # (B,) int64 claims that found no stream

    def only(self, rows: np.ndarray) -> BatchRuns:
        """The part of the plan in ``rows`` (a mask over the batch's rows): what a producer that owns those rows
        writes (``fills.writers.Balanced``). ``cursors``, ``claims`` and ``dry`` stay every row's."""
        keep = rows[self.whole]
        return BatchRuns(
            k=self.k,
            whole=self.whole[keep],
            item=self.item[keep],
            pos=self.pos[keep],
            replay=self.replay[keep],
            stop=self.stop[keep],
            expect=self.expect[keep],
            seg_end=self.seg_end[keep],
            runs=[r for r in self.runs if rows[r[0]]],
            pads=[p for p in self.pads if rows[p[0]]],
            cursors=self.cursors,
            claims=self.claims,
            dry=self.dry,
        )


@dataclass
class Opening:
    """A batch whose plan has begun (``Schedule.open_batch``): the claims made so far (row, step, first ticket,
    count, dry, steps), the rows whose reads it plans from, the opener of its claims' streams, and the key that
    ends it."""

    got: list[tuple[int, ...]]
    opened: list[int]
    opener: Any
    limit: int
