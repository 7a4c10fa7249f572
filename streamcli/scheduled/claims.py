"""An epoch's claims planned from the streams' lengths: which tickets each row takes, and where.

Tickets go out in canonical key order (``(batch * T + t) * B + row``): a stream claimed at epoch step ``s`` ends
at ``s + length`` and its row claims again there ("pack") or at the next batch ("pad"). When every stream's
length is known, that order follows from the lengths alone: ``count_batches`` replays it to count an epoch's
batches, and every producer replays it batch by batch (``scheduled.schedule``), waiting on no one. A length not
known is found as the stream is read (``scheduled.open_rows``): the row's next key is unknown (open) until then,
and where several producers plan their own rows, a claim waits for its turn (``Turns``, ``fills.turns``).

The lengths are the promise: a stream that ends before its promised length, or fails under ``on_error="skip"``,
leaves its row padding until its planned next claim (``RowPhase.SHORT``), and one that runs on is cut at it. So
with honest lengths the batches are exactly those of the unplanned order, and a lying source changes no other
row's batches.
"""

from __future__ import annotations

import copy
import heapq
from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol

import numpy as np

from streamcli.scheduled import cursor as _cursor
from streamcli.scheduled.cursor import RowPhase

OPEN = 1 << 60
"""The steps of a stream whose length is not known yet: a lower bound that its reader raises as it reads, and
the ``stop`` of a row reading it (``scheduled.schedule``), until its end is found."""
NO_CLAIM = 1 << 62
"""``ClaimOrder.next_key`` where no claim is left: above any key."""
Opener = Callable[[int, int, int], int]
"""Opens the stream of a ticket whose length is unknown on row ``b`` at epoch step ``q``, ``(b, ticket, q)``,
and reads it as far as the batch goes (``scheduled.open_rows``): -1 if it is empty, the epoch step of the row's
next claim if it ended in the batch, else ``OPEN``."""


class Turns(Protocol):
    """Claims shared with producers that read other rows (``fills.turns``): a row's claim waits for its turn
    (its key is the smallest that any row may claim at), takes the epoch's shared tickets, and publishes the
    row's next key (None: it claims no more), or a lower bound of it while its stream's length is not known."""

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
    """Where the stream a row is reading at ``pos`` (at least one step in) ends in its item, as promised."""
    if not segment:
        return item_length
    return min(((pos - 1) // segment + 1) * segment if pos else segment, item_length)


class Tickets:
    """The tickets of a producer that plans every row's claims itself: a counter (``Turns`` is the other source,
    shared between producers)."""

    def __init__(self, taken: int) -> None:
        self.taken = taken

    def ticket(self) -> int:
        self.taken += 1
        return self.taken - 1


class Claim(NamedTuple):
    """What a row takes at one key: tickets ``first .. first + n - 1`` (all but the last are empty; the last is
    the row's stream, or makes it dry), and that stream's steps (-1: not known, ``scheduled.open_rows``)."""

    first: int
    n: int
    dry: bool
    steps: int = 0


class ClaimOrder:
    """The order of an epoch's claims (which tickets each row takes, at which key), from its start or a resumed
    position, advanced as far as it is asked.

    ``steps[j]`` is the promised steps of the stream ticket ``j`` names (``j % len(steps)`` for replays; -1 where
    its length is unknown: the claim opens it to learn it, ``advance``); ``due`` the (key, row) of every row's
    next claim whose key is known; ``tickets`` the tickets already taken. A row reading a stream of unknown
    length has no key until its end is found (``close``). The tickets come from a counter (``Tickets``), or from
    ``turns`` where other producers claim for the other rows."""

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
        self._tickets: Tickets | Turns = turns if turns is not None else Tickets(tickets)
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
        """The order from the ring's tables: ``order`` (item, first step, open-ended, the item's promised length)
        and the row cursors ``start`` at batch ``first``; with ``turns``, of the rows this producer plans
        (``owned``, a mask; None: all)."""
        B, q0 = len(start), first * T
        items, begin, length = order[:, 0], order[:, 1], order[:, 3]
        item_length = np.zeros(int(items.max()) + 1 if len(items) else 0, np.int64)
        item_length[items] = length
        # (a stream continued mid-segment after a re-plan, ``scheduled.replan``, ends where its segment does)
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
        """The length ``length()`` promised for ``item`` (a row that reopens its stream checks it)."""
        return int(self._item_length[item])

    @staticmethod
    def applies(order: np.ndarray, start: np.ndarray) -> bool:
        """Whether every stream's length is known (and no row follows an open-ended item's segments)."""
        if not len(order):
            return False
        known = bool((order[:, 3] >= 0).all() and not order[:, 2].any())
        return known and not (start[:, _cursor.STATE] == RowPhase.FOLLOW).any()

    def close(self, b: int, claim_step: int) -> None:
        """Row ``b``'s stream of unknown length has ended: its next claim, at epoch step ``claim_step``, is known."""
        heapq.heappush(self._heap, (claim_step * self.B + b, b))
        if self.turns is not None:
            self.turns.publish(b, claim_step * self.B + b)

    def drop(self, b: int) -> None:
        """Row ``b`` goes to another producer (``fills.handover``): its next claim is no longer this order's."""
        self._heap = [(key, r) for key, r in self._heap if r != b]
        heapq.heapify(self._heap)

    def read_through(self, b: int, step: int) -> None:
        """Row ``b``'s stream of unknown length goes on past the batch that holds epoch step ``step`` (the step
        after it exists): tell the other producers the earliest its next claim may be."""
        if self.turns is not None:
            after = (step // self.T + 1) * self.T  # the next batch's first step: its stream has it
            self.turns.publish(b, (after + 1 if self.pack else after + self.T) * self.B + b)

    def steps_of(self, ticket: int) -> int:
        """The promised steps of the stream that ``ticket`` names."""
        return int(self._steps[ticket % self.n])

    def ready(self, key: int) -> bool:
        """Whether a claim at ``key`` may be made now (its turn has come; always, without other producers)."""
        return self.turns is None or self.turns.ready(key)

    def pending(self) -> bool:
        """Whether any row will claim again."""
        return bool(self._heap)

    def next_key(self) -> int:
        """The key of the earliest claim still to make (``NO_CLAIM`` if none is)."""
        return self._heap[0][0] if self._heap else NO_CLAIM

    def next_ready(self) -> bool:
        """Whether the earliest claim still to make may be made now."""
        return bool(self._heap) and self.ready(self._heap[0][0])

    def rows_before(self, limit: int) -> list[int]:
        """The rows with a claim still to make at a key below ``limit``, in row order."""
        return sorted({b for key, b in self._heap if key < limit})

    @property
    def taken(self) -> int:
        """The tickets taken so far (by this order: not known here where the tickets are shared)."""
        assert isinstance(self._tickets, Tickets), "the tickets are shared: the control block counts them"
        return self._tickets.taken

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

    def advance(self, opener: Opener | None = None) -> tuple[int, int, Claim]:
        """Make the earliest claim of the schedule, (key, row, what it takes), on lengths: those promised, and
        those that ``opener`` finds by reading. Empty streams are taken at the same key; a row whose tickets run
        out is dry (or, with ``restream``, replays them). With other producers the claim waits for its turn and
        takes the shared tickets (consecutive: no other row may claim until this one publishes its next key)."""
        key, b = heapq.heappop(self._heap)
        turns, n = self.turns, self.n
        if turns is not None:
            turns.wait(b, key)
        take = self._tickets.ticket
        first, count, empty_replays = -1, 0, 0
        while True:
            ticket = take()
            first, count = ticket if first < 0 else first, count + 1
            replay = ticket >= n
            if replay and (not self.restream or n == 0 or empty_replays >= n):
                if turns is not None:
                    turns.publish(b, None)
                return key, b, Claim(first, count, True)
            steps = int(self._steps[ticket % n])
            if steps < 0:  # unknown: the opener reads it, and says where the row claims next
                assert opener is not None, "a stream of unknown length is claimed without a reader"
                nxt = opener(b, ticket, key // self.B)
                if nxt >= 0:
                    if nxt < OPEN:
                        self.close(b, nxt)
                    else:  # (an open stream's row has no key until its end is found: ``close``)
                        self.read_through(b, key // self.B)
                    return key, b, Claim(first, count, False, -1)
                steps = 0
            if steps:
                break
            empty_replays += replay
        self.close(b, next_claim_step(key // self.B, steps, self.T, self.pack))
        return key, b, Claim(first, count, False, steps)

    def claim_until(self, limit: int, got: list[tuple[int, ...]]) -> None:
        """Make every claim below key ``limit``, each appended to ``got`` as (row, step, first ticket, count, dry,
        steps): ``advance`` in one loop, for the usual order (its own tickets, every length known)."""
        assert self.turns is None and isinstance(self._tickets, Tickets)
        heap, steps, n, B, T, pack, restream = self._heap, self._steps, self.n, self.B, self.T, self.pack, self.restream
        pop, push, taken = heapq.heappop, heapq.heappush, self._tickets.taken
        while heap and heap[0][0] < limit:
            key, b = pop(heap)
            step, first, empty_replays = key // B, taken, 0
            while True:
                ticket, taken = taken, taken + 1
                if ticket >= n and (not restream or n == 0 or empty_replays >= n):
                    got.append((b, step, first, taken - first, True, 0))
                    break
                m = int(steps[ticket % n])
                assert m >= 0, "a stream of unknown length is claimed without a reader"
                if m:
                    push(heap, ((step + m if pack else ((step + m - 1) // T + 1) * T) * B + b, b))
                    got.append((b, step, first, taken - first, False, m))
                    break
                empty_replays += ticket >= n
        self._tickets.taken = taken


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
