"""The control block's epoch tables, written by the loader as an epoch is set up and read by the producers: the
generation (a new epoch, or closing, makes producers drop what they are doing), the row cursors and streams the
epoch starts from, the tickets, and the hand-out counter (batch k may be written once ``handed > k``).
"""

from __future__ import annotations

import numpy as np

from streamcli.shared.control.layout import Arrays


class EpochTables(Arrays):
    """The generation, the epoch's set-up and the hand-out counter."""

    @property
    def generation(self) -> int:
        return self._ctl.generation

    def set_generation(self, gen: int) -> None:
        self._ctl.generation = gen

    def stage(
        self, cursors: np.ndarray, first_batch: int, epoch: int = 0, balanced: bool = False, offset: int = 0
    ) -> None:
        """The row cursors the next epoch starts from (the global batch's rows where ranks share one schedule, this
        rank's from ``offset``), the batch it starts at, its number, and whether its rows are balanced between producers
        (``fills.writers.Balanced``) even where every length is known."""
        self._start[: len(cursors)] = cursors
        ctl = self._ctl
        ctl.first_batch, ctl.epoch, ctl.balanced = first_batch, epoch, balanced
        ctl.start_rows, ctl.row_offset = len(cursors), offset

    @property
    def schedule_rows(self) -> tuple[int, int]:
        """(the schedule's rows, this rank's first row among them), as staged for the epoch."""
        return self._ctl.start_rows, self._ctl.row_offset

    @property
    def balanced(self) -> bool:
        return bool(self._ctl.balanced)

    def set_streams(self, table: np.ndarray, tickets: int) -> None:
        """The epoch's streams in ticket order and the tickets already taken."""
        self._order[: len(table)] = table
        self._ctl.num_streams = len(table)
        self._ctl.tickets = tickets

    def set_rows(self, owner: np.ndarray, claim: np.ndarray, written: np.ndarray, held: np.ndarray) -> None:
        rows = self._rows
        rows.owner[:], rows.claim[:], rows.written[:], self._held[:] = owner, claim, written, held
        self._ctl.given = 0
        self._done[:] = 0
        self._wdone[:] = 0
        self._ctl.move_row = -1

    def open_epoch(self, gen: int, first_batch: int) -> None:
        """The tables of generation ``gen`` are written: producers may start (nothing is handed out yet)."""
        self._ctl.handed = first_batch
        self._ctl.ready = gen

    def publish(self, k: int, slot: int) -> None:
        """Batch ``k`` goes into ``slot``: producers may fill it from now on."""
        self._slot_of[k % len(self._slot_of)] = slot
        self._ctl.handed = k + 1  # after the slot: a producer that sees the count sees the slot

    @property
    def handed(self) -> int:
        return self._ctl.handed

    def slot_of(self, k: int) -> int:
        return int(self._slot_of[k % len(self._slot_of)])

    def tables_ready(self, gen: int) -> bool:
        """Whether the epoch tables of generation ``gen`` are written (a producer may start on them)."""
        return self._ctl.ready == gen

    @property
    def epoch(self) -> int:
        """The epoch being produced (``stage``): a transform's ``ctx.epoch``."""
        return self._ctl.epoch

    @property
    def first_batch(self) -> int:
        return self._ctl.first_batch

    def cursors(self, lo: int, hi: int) -> np.ndarray:
        return self._start[lo:hi]

    @property
    def num_streams(self) -> int:
        return self._ctl.num_streams

    @property
    def tickets(self) -> int:
        """Tickets taken: those before the epoch's start until producers take more (unplanned claims)."""
        return self._ctl.tickets

    def order_table(self) -> np.ndarray:
        """The epoch's streams in ticket order (a copy): (item, first step, open-ended, promised length)."""
        return self._order[: self._ctl.num_streams].copy()

    def take_ticket(self) -> int:
        """The next ticket (hold the lock): the epoch's tickets are handed out in canonical order."""
        ticket = self._ctl.tickets
        self._ctl.tickets = ticket + 1
        return ticket

    def stream(self, ticket: int) -> tuple[int, int, bool, int]:
        """(item, first step, open-ended, promised length or -1) of the stream ticket ``ticket`` names."""
        item, start, open_ended, length = self._order[ticket % self._ctl.num_streams].tolist()
        return item, start, bool(open_ended), length

    def promised_length(self, item: int) -> int:
        """The length that ``length()`` promised for ``item`` (any of its streams says it), or -1."""
        order = self._order[: self._ctl.num_streams]
        at = np.flatnonzero(order[:, 0] == item)
        return int(order[at[0], 3]) if len(at) else -1
