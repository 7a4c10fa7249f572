"""Which slot holds which batch, and when a slot may be written again: a slot lent until its last view dies.

A batch's arrays are made from one fresh buffer object (``Ring.holder``) that they keep alive; a weak reference to
it returns the slot once the last of them has died, so a held batch is never overwritten. Only the loader's threads
use this, one at a time."""

from __future__ import annotations

import weakref
from collections import deque
from typing import Any

from streamcli.shared.control import Control


class Slots:
    """The ring's slots backed with memory (more later: ``grow``): free, handed out by batch index, or lent."""

    def __init__(self, num_slots: int) -> None:
        self.num_slots = num_slots
        self._free = list(range(num_slots))  # a stack: the slot freed last is still in the CPU's caches
        self._made: dict[int, int] = {}  # batch index -> the slot it is being made in
        self._lent: dict[int, tuple[weakref.ref[Any], int]] = {}  # id(weakref) -> (weakref, its slot)
        # A dropped batch's holder dies and its weakref lands here: the callback is a deque's append, C code
        # alone, so no exception (a Ctrl-C, say) can be raised and lost inside it.
        self._released: deque[weakref.ref[Any]] = deque()

    def assign(self, control: Control, k: int, stop: int) -> int:
        """Give batches ``k, k+1, ...`` below ``stop`` a free slot each, as long as there are free slots, and
        publish them to the producers; returns the next batch still to hand out."""
        self._reclaim()
        while self._free and k < stop:
            slot = self._free.pop()
            self._made[k] = slot
            control.publish(k, slot)
            k += 1
        return k

    def take_free(self) -> int:
        """A free slot, for a batch made at once (in process: nothing is published)."""
        self._reclaim()
        return self._free.pop()

    def take(self, k: int) -> int:
        """The slot batch ``k`` was made in (it is whole): the caller lends it or gives it back."""
        return self._made.pop(k)

    def give_back(self, slot: int) -> None:
        """A slot whose batch is not lent (skipped, copied, or dropped as the epoch ended) is free again."""
        self._free.append(slot)

    def lend(self, holder: Any, slot: int) -> None:
        """The consumer gets arrays over ``holder``: the slot stays out until ``holder`` dies."""
        ref = weakref.ref(holder, self._released.append)
        self._lent[id(ref)] = (ref, slot)

    def crowded(self) -> bool:
        """Whether the next batch should be a copy: lending it too would leave the producers fewer than two slots."""
        return len(self._lent) >= self.num_slots - 2

    def grow(self, num_slots: int) -> None:
        """Slots up to ``num_slots`` are backed with memory now: the new ones join the free ones."""
        self._free[:0] = range(self.num_slots, num_slots)  # under the others: used once those are out
        self.num_slots = max(self.num_slots, num_slots)

    def new_epoch(self) -> None:
        """Every slot not lent to the consumer is free again (call once no producer writes the old epoch)."""
        self._made.clear()
        self._reclaim()
        lent = {slot for _, slot in self._lent.values()}
        self._free += [s for s in range(self.num_slots) if s not in self._free and s not in lent]

    def _reclaim(self) -> None:
        while self._released:
            self._free.append(self._lent.pop(id(self._released.popleft()))[1])
