"""An epoch's claims: which tickets each row takes, and where, in key order (``(batch * T + t) * B + row``).

A stream claimed at epoch step ``s`` ends at ``s + length``; its row claims again there ("pack") or at the next
batch ("pad"). With every length known the order follows from the lengths alone; a length not known is an open
bound that reading raises, and where producers plan their own rows a claim waits for its turn (``Turns``). The
lengths are the promise: a stream that ends early pads until its planned claim, so no other row changes.
"""

from __future__ import annotations

import copy
import heapq
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from streamcli.scheduled import cursor as _cursor
from streamcli.scheduled.cursor import RowPhase

OPEN = 1 << 60  # the steps of a stream whose length is not known yet: an open bound
NO_CLAIM = 1 << 62  # ``ClaimOrder.next_key`` where no claim is left: above any key
Opener = Callable[[int, int, int], int]
"""``(b, ticket, q)``: row ``b`` reads the open stream of ``ticket`` from epoch step ``q``: -1 if it is empty, the step
of the row's next claim if it ended in the batch, else ``OPEN`` (``Schedule.open_ticket``)."""


class Turns(Protocol):
    """Claims shared with producers that plan other rows (``fills.iterators``): a claim waits for its turn, takes the
    shared tickets, and publishes the row's next key (None: no more) or, while it is open, a lower bound."""

    def ready(self, key: int) -> bool: ...

    def wait(self, b: int, key: int) -> None: ...

    def ticket(self) -> int: ...

    def publish(self, b: int, key: int | None) -> None: ...


def next_claim_step(step: int, steps: int, T: int, pack: bool) -> int:
    """The epoch step of a row's next claim when a stream of ``steps`` steps starts there at ``step``."""
    if steps <= 0:
        return step
    last = step + steps - 1
    return last + 1 if pack else (last // T + 1) * T


def stream_end(pos: int, item_length: int, segment: int) -> int:
    """Where the stream a row reads at ``pos`` (at least one step in) ends in its item, as promised."""
    if not segment:
        return item_length
    return min(((pos - 1) // segment + 1) * segment if pos else segment, item_length)


class ClaimOrder:
    """The order of an epoch's claims, advanced as far as it is asked (``claim_until``). ``steps[j]``: the promised
    steps of ticket ``j``'s stream (``j % n`` for replays; -1: an open bound); the heap: (key, row) of every row's
    next claim whose key is known. The tickets are counted here (``taken``) or shared (``turns``)."""

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
        turns: Turns | None = None,
    ) -> None:
        self.B, self.T, self.pack, self.restream = B, T, pack, restream
        self.turns = turns  # other producers plan the other rows: ``due`` holds this one's rows only
        self._steps = np.asarray(steps, np.int64)  # an array, not a list: an epoch may hold 10^5 streams and more
        self.n = len(self._steps)
        self.taken = tickets  # (this order's own count: where the tickets are shared, the control block counts them)
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
        turns: Turns | None = None,
        owned: np.ndarray | None = None,
    ) -> ClaimOrder:
        """The order from the ring's ``order`` table and the row cursors ``start`` at batch ``first``; with ``turns``,
        of the rows ``owned`` (a mask; None: all)."""
        B, q0 = len(start), first * T
        items, begin, length = order[:, 0], order[:, 1], order[:, 3]
        item_length = np.zeros(int(items.max()) + 1 if len(items) else 0, np.int64)
        item_length[items] = length
        # (a stream continued mid-segment after a re-plan, ``streams.Replan``, ends where its segment does)
        end = np.minimum((begin // segment + 1) * segment, length) if segment else length
        due = []
        for b, (item, pos, state, _) in enumerate(start.tolist()):
            if state == RowPhase.IDLE:
                due.append((q0 * B + b, b))
            elif state in (RowPhase.LIVE, RowPhase.SHORT) and item_length[item] >= 0:  # (else open: no key yet)
                left = stream_end(pos, int(item_length[item]), segment) - pos
                due.append((next_claim_step(q0, left, T, pack) * B + b, b))
        steps = np.where(length < 0, -1, np.maximum(end - begin, 0))
        if turns is not None:
            due = [(key, b) for key, b in due if owned is None or owned[b]]
            for key, b in due:
                turns.publish(b, key)  # (exact: the control block holds a lower bound until now)
        claims = cls(steps, due, tickets, B=B, T=T, pack=pack, restream=restream, turns=turns)
        claims._item_length = item_length
        return claims

    def item_length(self, item: int) -> int:
        """The length ``length()`` promised for ``item``."""
        return int(self._item_length[item])

    @staticmethod
    def applies(order: np.ndarray, start: np.ndarray) -> bool:
        """Whether every stream's length is known (and no row follows an open-ended item's segments)."""
        if not len(order):
            return False
        known = bool((order[:, 3] >= 0).all() and not order[:, 2].any())
        return known and not (start[:, _cursor.STATE] == RowPhase.FOLLOW).any()

    def close(self, b: int, claim_step: int) -> None:
        """Row ``b``'s open stream has ended: its next claim is at epoch step ``claim_step``."""
        heapq.heappush(self._heap, (claim_step * self.B + b, b))
        if self.turns is not None:
            self.turns.publish(b, claim_step * self.B + b)

    def drop(self, b: int) -> None:
        """Row ``b`` goes to another producer: its next claim is no longer this order's."""
        self._heap = [(key, r) for key, r in self._heap if r != b]
        heapq.heapify(self._heap)

    def read_through(self, b: int, step: int) -> None:
        """Row ``b``'s open stream goes on past the batch of epoch step ``step``: publish its earliest next claim."""
        if self.turns is not None:
            after = (step // self.T + 1) * self.T  # the next batch's first step: its stream has it
            self.turns.publish(b, (after + 1 if self.pack else after + self.T) * self.B + b)

    def pending(self) -> bool:
        """Whether any row will claim again."""
        return bool(self._heap)

    def next_key(self) -> int:
        """The key of the earliest claim still to make (``NO_CLAIM`` if none is)."""
        return self._heap[0][0] if self._heap else NO_CLAIM

    def rows_before(self, limit: int) -> list[int]:
        """The rows with a claim still to make at a key below ``limit``, in row order."""
        return sorted({b for key, b in self._heap if key < limit})

    def split(self, rows: np.ndarray) -> ClaimOrder:
        """The claims of ``rows`` (a mask) leave this order for a new one, which shares its tickets."""
        other = copy.copy(self)
        other._heap = [e for e in self._heap if rows[e[1]]]
        self._heap = [e for e in self._heap if not rows[e[1]]]
        heapq.heapify(other._heap)
        heapq.heapify(self._heap)
        return other

    def merge(self, other: ClaimOrder) -> None:
        """Take over the claims of ``other`` (of other rows, sharing this order's tickets)."""
        for entry in other._heap:
            heapq.heappush(self._heap, entry)

    def claim_until(
        self,
        limit: int,
        got: list[tuple[int, ...]],
        opener: Opener | None = None,
        wait: bool = True,
        rows: tuple[int, int] = (0, NO_CLAIM),
    ) -> bool:
        """Make the claims below key ``limit`` in key order, appending those of the ``rows`` lo .. hi - 1 to ``got`` as
        (row - lo, epoch step, first ticket, count, dry, steps; -1: an open bound that ``opener`` reads). Empty
        streams are passed at the same key; a row whose tickets run out is dry (or, with ``restream``, replays them).
        With ``turns`` a claim waits for its turn; without ``wait``, stop before one whose turn has not come (False)."""
        heap, steps, n, B, T, pack, turns = self._heap, self._steps, self.n, self.B, self.T, self.pack, self.turns
        pop, push, taken, restream, (lo, hi) = heapq.heappop, heapq.heappush, self.taken, self.restream, rows
        while heap and heap[0][0] < limit:
            if turns is not None and not wait and not turns.ready(heap[0][0]):
                return False
            key, b = pop(heap)
            if turns is not None:
                turns.wait(b, key)
            step, first, empty_replays, nxt = key // B, -1, 0, 0
            while True:
                if turns is None:
                    ticket, taken = taken, taken + 1
                else:
                    ticket = turns.ticket()
                first = ticket if first < 0 else first
                if ticket >= n and (not restream or n == 0 or empty_replays >= n):
                    m = -2  # dry
                    break
                m = int(steps[ticket % n])
                if m < 0:  # an open bound: the opener reads it, and says where the row claims next
                    assert opener is not None, "a stream of unknown length is claimed without a reader"
                    nxt = opener(b, ticket, step)
                    if nxt >= 0:
                        break
                    m = 0
                if m:
                    nxt = step + m if pack else ((step + m - 1) // T + 1) * T
                    break
                empty_replays += ticket >= n
            if m == -2:
                if turns is not None:
                    turns.publish(b, None)
            elif nxt >= OPEN:  # (an open bound's row has no key until its end is found: ``close``)
                self.read_through(b, step)
            elif turns is None:
                push(heap, (nxt * B + b, b))
            else:
                self.close(b, nxt)
            if lo <= b < hi:
                got.append((b - lo, step, first, ticket - first + 1, m == -2, max(m, -1)))
        self.taken = taken
        return True


def count_batches(lengths: Sequence[int], batch_size: int, time_steps: int, boundary: str, epoch_end: str) -> int:
    """Batches yielded in an epoch whose streams, in ticket order, have these lengths."""
    B, T, n = batch_size, time_steps, len(lengths)
    if not any(lengths):
        return 0
    # Replays never extend the epoch: claims without them; "restream" runs until the last ticket's batch.
    claims = ClaimOrder(lengths, [(b, b) for b in range(B)], 0, B=B, T=T, pack=boundary == "pack", restream=False)
    last_step = -1  # epoch step of the last original step
    last_ticket_batch = 0  # batch in which ticket n-1 was taken
    first_dry_batch: int | None = None
    got: list[tuple[int, ...]] = []
    while claims.pending():  # (64 batches' claims at a time)
        got.clear()
        claims.claim_until(claims.next_key() + 64 * T * B, got)
        for _, step, first, count, dry, steps in got:
            batch = step // T
            if first <= n - 1 < first + count:
                last_ticket_batch = batch
            if dry:
                first_dry_batch = batch if first_dry_batch is None else first_dry_batch
            else:
                last_step = max(last_step, step + steps - 1)
    batches = last_step // T + 1
    if epoch_end == "restream":
        return max(batches, last_ticket_batch + 1)
    if epoch_end == "drop":
        assert first_dry_batch is not None
        return min(batches, first_dry_batch)
    return batches
