"""Claims shared between producers that each plan their own rows (``scheduled.claims.Turns``): where a stream of
unknown length is read by the one producer that owns its row, each row publishes the key of its next possible claim
(exact, or a lower bound while its stream is open), and a claim is made only when its key is the smallest of all,
taking the epoch's shared tickets: the tickets, hence the batches, come in the order the lengths give. A producer
reads its open rows through a batch (publishing their bounds past it) before it waits for any claim of it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import numpy as np

from streamcli.shared.control import NEVER, Aborted, Control

_NAP_S = 1e-4  # the longest nap of a producer waiting for its turn: how late it sees that its turn has come


class ProducerTurns:
    """Producer ``w``'s side of the shared claims, in generation ``gen`` (a new one aborts a wait); ``idle()`` and
    ``busy()`` tell the other producers when it waits and when its turn has come."""

    def __init__(
        self,
        control: Control,
        lock: AbstractContextManager[Any],
        gen: int,
        mark: np.ndarray,
        idle: Callable[[], None] = lambda: None,
        busy: Callable[[], None] = lambda: None,
    ) -> None:
        self.control, self.lock, self.gen, self.mark = control, lock, gen, mark
        self.idle, self.busy = idle, busy

    def ready(self, key: int) -> bool:
        """Whether a claim at ``key`` is the earliest any row may make."""
        return self.control.earliest_claim() >= key

    def wait(self, b: int, key: int) -> None:
        """Until row ``b``'s claim at ``key`` is the earliest any row may make."""
        control, spins = self.control, 0
        if self.ready(key):
            return
        self.idle()
        while control.earliest_claim() < key:
            if control.generation != self.gen:
                raise Aborted
            self.mark[0] = -1  # reading nothing meanwhile: a timeout or a death now is not this source's
            spins += 1
            time.sleep(min(_NAP_S, 2e-6 * spins))
        self.busy()

    def ticket(self) -> int:
        with self.lock:  # the lock orders the ticket counter between processes
            return self.control.take_ticket()

    def publish(self, b: int, key: int | None) -> None:
        self.control.set_claim(b, NEVER if key is None else key)
