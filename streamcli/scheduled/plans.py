"""What a batch holds, as planned: the rows one stream covers for the whole batch, as arrays, and the rest as runs
of a stream's steps and padding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

Run = tuple[int, int, int, int, int, bool, bool, int, int, int]
"""(row, first batch step, steps, item, first position, replayed, fresh, stop, promised length, segment end);
``stop``: where the stream ends in its item (``OPEN``-based if not known); ``fresh``: it starts the stream."""


@dataclass
class BatchRuns:
    """Batch ``k``: the ``whole`` rows' streams as arrays, ``runs`` and ``pads`` for the rest; ``cursors``, ``claims``
    and ``dry``: every row's cursor and tickets after the batch."""

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
        """The part of the plan in ``rows`` (a mask); ``cursors``, ``claims`` and ``dry`` stay every row's."""
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
    """A batch whose plan has begun (``Schedule.open_batch``): its claims so far, the rows read, the opener of its
    claims' streams, and the key that ends it."""

    got: list[tuple[int, ...]]
    opened: list[int]
    opener: Any
    limit: int
