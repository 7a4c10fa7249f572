"""An epoch's claims planned from the streams' promised lengths: which tickets each row takes, and where.

Tickets go out in canonical key order (``fills.claimed.produce``). When every stream's length is known, that order
follows from the lengths alone: a stream claimed at epoch step ``s`` ends at ``s + length`` and its row claims
again there ("pack") or at the next batch ("pad"); ``count_batches`` replays the same schedule to count an epoch's
batches, and every producer replays it batch by batch (``scheduled.schedule``): no claim waits on another
row's stream, and no producer on another.

The lengths are the promise: a stream that ends before its promised length, or fails under ``on_error="skip"``,
leaves its row padding until its planned next claim (``RowState.SHORT``), and one that runs on is cut at it. So
with honest lengths the batches are exactly those of the unplanned order, and a lying source changes no other
row's batches.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from streamcli.scheduled import cursor as _cursor
from streamcli.scheduled.cursor import RowState


def next_claim_step(step: int, steps: int, T: int, pack: bool) -> int:
    """The epoch step of a row's next claim when a stream of ``steps`` steps starts there at ``step``."""
    if steps <= 0:
        return step
    last = step + steps - 1
    return last + 1 if pack else (last // T + 1) * T


def stream_end(pos: int, item_length: int, segment: int) -> int:
    """Where the stream a row is reading at ``pos`` (at least one step in) ends in its item, as promised."""
    if not segment:
        return item_length
    return min(((pos - 1) // segment + 1) * segment if pos else segment, item_length)


class Claim(NamedTuple):
    """What a row takes at one key: tickets ``first .. first + n - 1`` (all but the last are promised empty;
    the last is the row's stream, or makes it dry)."""

    first: int
    n: int
    dry: bool


class ClaimOrder:
    """The order of an epoch's claims (which tickets each row takes, at which key), from its start or a resumed
    position, advanced as far as it is asked.

    ``steps[j]`` is the promised steps of the stream ticket ``j`` names (``j % len(steps)`` for replays); ``due``
    the (key, row) of every row's next claim; ``tickets`` the tickets already taken."""

    def __init__(
        self,
        steps: Sequence[int] | np.ndarray,
        due: Sequence[tuple[int, int]],
        tickets: int,
        *,
        B: int,
        T: int,
        pack: bool,
        restream: bool,
    ) -> None:
        self.B, self.T, self.pack, self.restream = B, T, pack, restream
        self._steps = np.asarray(steps, np.int64)  # an array, not a list: an epoch may hold 10^5 streams and more
        self.n = len(self._steps)
        self._ticket = tickets
        self._heap = list(due)
        heapq.heapify(self._heap)
        self._item_length = np.zeros(0, np.int64)  # promised length per item, for rows that reopen (``of_ring``)

    @classmethod
    def of_ring(
        cls,
        order: np.ndarray,
        start: np.ndarray,
        first: int,
        tickets: int,
        *,
        T: int,
        pack: bool,
        segment: int,
        restream: bool,
    ) -> ClaimOrder:
        """The order from the ring's tables: ``order`` (item, first step, open-ended, the item's promised length)
        and the row cursors ``start`` at batch ``first``."""
        B, q0 = len(start), first * T
        items, begin, length = order[:, 0], order[:, 1], order[:, 3]
        item_length = np.zeros(int(items.max()) + 1 if len(items) else 0, np.int64)
        item_length[items] = length
        # (a stream continued mid-segment after a re-plan, ``scheduled.replan``, ends where its segment does)
        end = np.minimum((begin // segment + 1) * segment, length) if segment else length
        due = []
        for b, (item, pos, state, _) in enumerate(start.tolist()):
            if state == RowState.IDLE:
                due.append((q0 * B + b, b))
            elif state in (RowState.LIVE, RowState.SHORT):
                left = stream_end(pos, int(item_length[item]), segment) - pos
                due.append((next_claim_step(q0, left, T, pack) * B + b, b))
        claims = cls(np.maximum(end - begin, 0), due, tickets, B=B, T=T, pack=pack, restream=restream)
        claims._item_length = item_length
        return claims

    def item_length(self, item: int) -> int:
        """The length ``length()`` promised for ``item`` (a row that reopens its stream checks it)."""
        return int(self._item_length[item])

    @staticmethod
    def applies(order: np.ndarray, start: np.ndarray) -> bool:
        """Whether every stream's length is known (and no row follows an open-ended item's segments)."""
        if not len(order):
            return False
        known = bool((order[:, 3] >= 0).all() and not order[:, 2].any())
        return known and not (start[:, _cursor.STATE] == RowState.FOLLOW).any()

    def steps_of(self, ticket: int) -> int:
        """The promised steps of the stream that ``ticket`` names."""
        return int(self._steps[ticket % self.n])

    def pending(self) -> bool:
        """Whether any row will claim again."""
        return bool(self._heap)

    def advance(self) -> tuple[int, int, Claim]:
        """Make the earliest claim of the schedule, (key, row, what it takes): the rule of ``write._claim``,
        on lengths alone. Empty streams are taken at the same key; a row whose tickets run out is dry (or, with
        ``restream``, replays them)."""
        key, b = heapq.heappop(self._heap)
        first, empty_replays = self._ticket, 0
        while True:
            ticket = self._ticket
            self._ticket += 1
            replay = ticket >= self.n
            if replay and (not self.restream or self.n == 0 or empty_replays >= self.n):
                return key, b, Claim(first, self._ticket - first, True)
            steps = int(self._steps[ticket % self.n])
            if steps:
                break
            empty_replays += replay
        nxt = next_claim_step(key // self.B, steps, self.T, self.pack)
        heapq.heappush(self._heap, (nxt * self.B + b, b))
        return key, b, Claim(first, self._ticket - first, False)


def count_batches(lengths: Sequence[int], batch_size: int, time_steps: int, boundary: str, epoch_end: str) -> int:
    """Batches yielded in an epoch whose streams, in ticket order, have these lengths."""
    B, T, n = batch_size, time_steps, len(lengths)
    if not any(lengths):
        return 0
    # Replays never extend the epoch: order the claims without them, then "restream" runs until the last ticket's batch.
    claims = ClaimOrder(lengths, [(b, b) for b in range(B)], 0, B=B, T=T, pack=boundary == "pack", restream=False)
    last_step = -1  # epoch step of the last original step
    last_ticket_batch = 0  # batch in which ticket n-1 was taken
    first_dry_batch: int | None = None
    while claims.pending():
        key, _, claim = claims.advance()
        batch = key // (T * B)
        if claim.first <= n - 1 < claim.first + claim.n:
            last_ticket_batch = batch
        if claim.dry:
            if first_dry_batch is None:
                first_dry_batch = batch
            continue
        last_step = max(last_step, key // B + claims.steps_of(claim.first + claim.n - 1) - 1)
    batches = last_step // T + 1
    if epoch_end == "restream":
        return max(batches, last_ticket_batch + 1)
    if epoch_end == "drop":
        assert first_dry_batch is not None
        return min(batches, first_dry_batch)
    return batches
