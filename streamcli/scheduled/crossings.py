"""The crossing rows of a batch's usual shapes, planned with array operations (``Schedule``'s many-rows path).

A row *crosses* a batch when it does not read one stream throughout it. Most crossings are of a few shapes: a
stream ends in the batch, then the row pads to the batch's end ("pad") or takes the next stream right there, or
the row takes a stream at the batch's start; either way the stream taken covers the rest. With many such rows
(wide batches), planning them together costs less than one by one (``Schedule._cross``).
"""

from __future__ import annotations

import numpy as np

from streamcli.scheduled.claims import ClaimOrder
from streamcli.scheduled.cursor import RowPhase
from streamcli.scheduled.plans import BatchRuns, RowColumns, rows_of

MANY_CROSSINGS = 32
"""From this many crossing rows in a batch, those of the usual shapes are planned here; fewer cost less one by one."""
LIVE, SHORT, IDLE = int(RowPhase.LIVE), int(RowPhase.SHORT), int(RowPhase.IDLE)


class SimpleCrossings(RowColumns):
    """What this part reads besides the row columns (``scheduled.schedule.Schedule`` holds it all)."""

    pack: bool
    order: np.ndarray
    claim_order: ClaimOrder

    def _cross_simply(self, crossing: np.ndarray, claimed: np.ndarray, q0: int, out: BatchRuns) -> np.ndarray:
        """The crossing rows of the usual shapes, all at once: a row whose stream ends in the batch, then pads to
        the batch's end (``boundary="pad"``) or takes the next stream right there, and a row that takes a stream
        at the batch's start; either way the stream taken covers the rest of the batch. Returns the other
        crossing rows (``_cross`` plans them one by one)."""
        T, B, n_streams = self.T, self.B, self.claim_order.n
        state, pos, stop, claim_q = self.state, self.pos, self.stop, self.claim_q
        e = np.where(state == LIVE, stop - pos, 0)  # the steps left of a row's stream
        heads = crossing & (state == LIVE) & (e < T)
        n_claims = np.bincount(claimed[:, 0], minlength=B)
        # Pads to the batch's end: its next claim is at the next batch.
        padding = np.flatnonzero(heads & (n_claims == 0) & (claim_q == q0 + T))
        # One claim, where the row's stream ends (or at the batch's start), of a stream that covers the rest.
        row_of = np.full(B, -1, np.int64)
        row_of[claimed[:, 0]] = np.arange(len(claimed))
        one = crossing & (n_claims == 1) & ((heads & (claim_q == q0 + e)) | ((state == IDLE) & (e == 0)))
        rows = np.flatnonzero(one)
        c = claimed[row_of[rows]]
        taken = c[:, 2] + c[:, 3] - 1
        ok = (c[:, 1] == q0 + e[rows]) & (c[:, 4] == 0) & (n_streams > 0)
        tk = taken % max(n_streams, 1)
        steps = self.claim_order._steps[tk]
        ok &= steps >= T - e[rows]
        rows, c, taken, tk, steps = rows[ok], c[ok], taken[ok], tk[ok], steps[ok]
        simple = np.zeros(B, bool)
        simple[padding] = simple[rows] = True
        runs, pads = out.runs, out.pads
        cols = (self.item, pos, self.replay, stop, self.expect, self.seg_end)
        # The end of each stream, in row order; then the stream each row takes.
        for b, t_end, item, p, rp, st, ex, se in rows_of(padding, e, *cols):
            runs.append((b, 0, t_end, item, p, rp != 0, False, st, ex, se))
            pads.append((b, t_end, T))
        pos[padding] = stop[padding]
        state[padding] = IDLE
        head = rows[e[rows] > 0]
        for b, t_end, item, p, rp, st, ex, se in rows_of(head, e, *cols):
            runs.append((b, 0, t_end, item, p, rp != 0, False, st, ex, se))
        item, start, _, length = self.order[tk].T
        t0 = e[rows]
        replay = taken >= n_streams
        new_stop = start + steps
        seg_end = (start // self.segment + 1) * self.segment if self.segment else np.full(len(rows), -1, np.int64)
        runs.extend(
            zip(
                rows.tolist(),
                t0.tolist(),
                (T - t0).tolist(),
                item.tolist(),
                start.tolist(),
                replay.tolist(),
                [True] * len(rows),
                new_stop.tolist(),
                length.tolist(),
                seg_end.tolist(),
                strict=True,
            )
        )
        out.claims[rows] += c[:, 3]
        step = c[:, 1]
        pos[rows] = start + T - t0
        stop[rows], self.item[rows], self.expect[rows], self.seg_end[rows] = new_stop, item, length, seg_end
        self.replay[rows] = replay
        claim_q[rows] = step + steps if self.pack else ((step + steps - 1) // T + 1) * T
        state[rows] = np.where(pos[rows] == new_stop, SHORT, LIVE)
        return np.flatnonzero(crossing & ~simple)
