"""A wide batch's changed rows planned as arrays: the plan ``Schedule._walk`` makes one row at a time, where a
wide batch of short streams changes hundreds of rows. A row *crosses* a batch when it does not read one stream
throughout it; the usual shapes: its stream ends and it pads to the batch's end ("pad"), or it makes one claim (where
its stream ends, or at the batch's start) of a known stream that covers the rest of the batch.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from streamcli.scheduled import cursor as _cursor
from streamcli.scheduled.claims import OPEN
from streamcli.scheduled.cursor import RowPhase
from streamcli.scheduled.plans import Run

# ``Schedule``'s table of rows: the cursor record (``scheduled.cursor``), then where its stream stops, replayed, its
# item's promised length, its segment's end and its next claim.
COLUMNS = ("item", "pos", "state", "flags", "stop", "replay", "expect", "seg_end", "claim_q")
ITEM, POS, STATE, FLAGS, STOP, REPLAY, EXPECT, SEG_END, CLAIM_Q = range(len(COLUMNS))
LIVE, SHORT, IDLE, DRY = int(RowPhase.LIVE), int(RowPhase.SHORT), int(RowPhase.IDLE), int(RowPhase.DRY)


class Crossed(NamedTuple):
    """The rows ``cross_many`` planned, their runs and padding, and the batch of each row's next event."""

    rows: np.ndarray
    runs: list[Run]
    pads: list[tuple[int, int, int]]
    due: np.ndarray


def cross_many(
    table: np.ndarray,
    rows: np.ndarray,
    got: np.ndarray,
    order: np.ndarray,
    q0: int,
    T: int,
    pack: bool,
    segment: int,
) -> Crossed:
    """Plan the crossing ``rows`` (sorted) of the usual shapes, and move them in ``table`` past the batch that starts
    at epoch step ``q0``. ``got``: the batch's claims (row, step, first ticket, count, dry, steps); ``order``: the
    ring's streams, which the tickets name modulo their number."""
    t = table[rows]
    state, pos, stop, claim_q = t[:, STATE], t[:, POS], t[:, STOP], t[:, CLAIM_Q]
    B, n_streams = len(table), len(order)
    q1 = q0 + T
    n_claims = np.bincount(got[:, 0], minlength=B)[rows] if len(got) else np.zeros(len(rows), np.int64)
    live = state == LIVE
    e = np.where(live, stop - pos, 0)  # the steps left of the row's stream
    ends = live & (e > 0) & (e < T)  # (a stream of unknown length has ``stop`` at OPEN: never here)
    padding = ends & (n_claims == 0) & (claim_q == q1)
    one = np.flatnonzero((n_claims == 1) & (claim_q == q0 + e) & (ends | (state == IDLE)))
    if n_streams and len(one):
        row_of = np.full(B, -1, np.int64)
        row_of[got[:, 0]] = np.arange(len(got))
        c = got[row_of[rows[one]]]
        ok = (c[:, 1] == q0 + e[one]) & (c[:, 4] == 0) & (c[:, 5] >= T - e[one])  # (steps not known: -1)
        one, c = one[ok], c[ok]
    else:
        one, c = one[:0], got[:0]
    pad_at = np.flatnonzero(padding)
    # The stream that ends, in each row that has one; then padding, or the stream claimed.
    heads = np.concatenate([pad_at, one[e[one] > 0]])  # (disjoint: no claim, one claim; ranked below)
    h = t[heads]
    taken = c[:, 2] + c[:, 3] - 1  # the last of a claim's tickets (those before it are empty)
    item, start, _, length = order[taken % max(n_streams, 1)].T
    t0, step, steps = e[one], c[:, 1], c[:, 5]
    replay = taken >= n_streams
    new_stop = start + steps
    seg_end = (start // segment + 1) * segment if segment else np.full(len(one), -1, np.int64)
    # Each row's runs in step order, the rows in order: as ``_cross`` makes them one row at a time.
    at = np.concatenate([heads, one])
    first = np.concatenate([np.zeros(len(heads), np.int64), t0])
    ranked = np.lexsort((first, at))
    columns = (
        rows[at],
        first,
        np.concatenate([e[heads], T - t0]),
        np.concatenate([h[:, ITEM], item]),
        np.concatenate([h[:, POS], start]),
        np.concatenate([h[:, REPLAY] != 0, replay]),
        np.arange(len(at)) >= len(heads),  # (fresh: the stream claimed)
        np.concatenate([h[:, STOP], new_stop]),
        np.concatenate([h[:, EXPECT], length]),
        np.concatenate([h[:, SEG_END], seg_end]),
    )
    runs: list[Run] = list(zip(*(col[ranked].tolist() for col in columns), strict=True))
    pads = list(zip(rows[pad_at].tolist(), e[pad_at].tolist(), [T] * len(pad_at), strict=True))
    new = t.copy()
    new[pad_at, POS], new[pad_at, STATE] = stop[pad_at], IDLE
    next_q = step + steps if pack else ((step + steps - 1) // T + 1) * T
    new_pos = start + T - t0
    # A stream that ends with the batch leaves its row short, free at once if its claim is the next batch's start.
    ended = new_pos == new_stop
    new_state = np.where(ended, np.where(next_q == q1, IDLE, SHORT), LIVE)
    flags = _cursor.REPLAYED * replay + _cursor.OPEN_ENDED * ((segment != 0) & (length < 0))
    new[one] = np.stack([item, new_pos, new_state, flags, new_stop, replay, length, seg_end, next_q], axis=1)
    done = np.zeros(len(rows), bool)
    done[pad_at] = done[one] = True
    new = new[done]
    # The batch of each row's next event (``Schedule._file``): its stream's end, its padding's end, its claim.
    s, q = new[:, STATE], new[:, CLAIM_Q]
    due = np.where(s == LIVE, (q1 + new[:, STOP] - new[:, POS] - 1) // T, np.where(s == SHORT, (q - 1) // T, q // T))
    planned = rows[done]
    table[planned] = new
    return Crossed(planned, runs, pads, np.maximum(due, q1 // T))


def read_on(
    table: np.ndarray, rest: list[int], kind: np.ndarray, crossing: set[int], q1: int, T: int
) -> list[tuple[int, int, int]]:
    """Of the changed ``rest`` rows, those that read or pad on through the batch ending at epoch step ``q1`` (their
    ``kind``) and those that cross (into ``crossing``); returns (row, steps left after the batch or -1, next claim)
    of the first, to file."""
    r = np.array(rest, np.int64)
    t = table[r]
    s, left, claim = t[:, STATE], t[:, STOP] - t[:, POS], t[:, CLAIM_Q]
    reads, pads_on, dry = (s == LIVE) & (left >= T), (s == SHORT) & (claim >= q1), s == DRY
    kind[r[reads]] = (1, 0, T)
    kind[r[pads_on]] = np.stack([0 * claim, 1 + 0 * claim, np.where(claim > q1, T, 0)], axis=1)[pads_on]
    kind[r[dry]] = (0, 1, 0)
    crossing.update(r[~(reads | pads_on | dry) & (s >= 0)].tolist())  # (not a row another producer plans)
    after = np.where(t[:, STOP] < OPEN, left - T, OPEN)
    ends = list(zip(r[reads].tolist(), after[reads].tolist(), claim[reads].tolist(), strict=True))
    return ends + [(b, -1, c) for b, c in zip(r[pads_on].tolist(), claim[pads_on].tolist(), strict=True)]
