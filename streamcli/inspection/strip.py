"""Where one stream lies across the batches it spans: which row, which batch, which positions.

Read from the batches' flags alone: with every length known from the planner's stand-in (no data read), else from
an export's shards or the batches already read.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from streamcli.batch import Batch
from streamcli.inspection.record import time_major

MOST_BATCHES = 256  # a strip is cut to this many batches around the one shown


@dataclass(frozen=True)
class Piece:
    """Stream steps ``first .. last`` (positions) in row ``row`` of batch ``batch``; ``starts``: its first step is
    flagged ``is_first`` there."""

    batch: int
    row: int
    first: int
    last: int
    starts: bool


def pieces_in(k: int, batch: Batch, stream: int) -> list[Piece]:
    """The stream's pieces in batch ``k``, one per row that holds it."""
    valid, ids = time_major(batch, "valid"), time_major(batch, "stream")
    pos, first = time_major(batch, "position"), time_major(batch, "is_first")
    out = []
    for b in range(ids.shape[1]):
        mine = valid[:, b] & (ids[:, b] == stream)
        if mine.any():
            p = pos[:, b][mine]
            out.append(Piece(k, b, int(p.min()), int(p.max()), bool(first[:, b][mine].any())))
    return out


def strip_of(batches: Iterable[tuple[int, Batch]], stream: int) -> list[Piece]:
    """Every piece of ``stream`` in these batches, in batch order."""
    return [piece for k, batch in batches for piece in pieces_in(k, batch, stream)]


def span_around(k: int, position: int, length: int | None, time_steps: int) -> tuple[int, int]:
    """The batches a stream at ``position`` in batch ``k`` can span: back to its start, on to its end (a few
    more either side for padding), at most ``MOST_BATCHES``."""
    back = position // max(time_steps, 1) + 2
    ahead = (max(length - position, 0) // max(time_steps, 1) + 2) if length is not None else MOST_BATCHES // 2
    first = max(0, k - min(back, MOST_BATCHES // 2))
    return first, k + 1 + min(ahead, MOST_BATCHES - (k - first))


def moves(strip: list[Piece]) -> list[tuple[int, int, int]]:
    """``(batch, from_row, to_row)`` wherever the stream goes on in another row than the batch before."""
    out = []
    for a, b in itertools.pairwise(strip):
        if b.batch != a.batch and b.row != a.row and not b.starts:
            out.append((b.batch, a.row, b.row))
    return out


def first_valid(batch: Batch, row: int) -> tuple[int, int] | None:
    """``(stream, position)`` of the row's first valid step, or None on a padding row."""
    valid = time_major(batch, "valid")[:, row]
    if not valid.any():
        return None
    t = int(np.flatnonzero(valid)[0])
    return int(time_major(batch, "stream")[t, row]), int(time_major(batch, "position")[t, row])


def around(strip: list[Piece], batch: int) -> list[Piece]:
    """The pieces of the one pass of the stream that holds ``batch``: from its last beginning at or before
    ``batch`` to the next (the same item in the next epoch, say), excluded."""
    starts = [i for i, p in enumerate(strip) if p.starts]
    begin = max((i for i in starts if strip[i].batch <= batch), default=0)
    end = min((i for i in starts if strip[i].batch > batch), default=len(strip))
    return strip[begin:end]
