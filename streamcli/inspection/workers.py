"""Which producer made each row of a batch: from the loader's options, or, where rows move, from the batch.

The loader's writer policy (``streamcli.fills.writers``) decides it, and it follows from the options:

- no workers: the consumer's own process made every row (``"main"``);
- a random-access source (``window``) with every length known: worker ``index % W`` fills batch ``index`` (its
  place in its epoch) whole;
- an iterator source with a fixed block of rows per worker: worker ``w`` writes rows ``split_rows(B, W)[w]``;
- ``balance`` on (given, the source's ``costly_steps``, turned on by the loader's measure, or streams of unknown
  length that are not told ``balance=False``): a row moves to whichever worker is idle, which only the engine
  knows: the batch records it (``batch.extras["writers"]``), and a batch that does not is ``"moves"``.

An export does not keep its loader's workers: none is known there.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamcli.batch import Batch
from streamcli.loader import StreamLoader
from streamcli.shared.tensors import split_rows
from streamcli.source import has_window

MAIN = "main"
MOVES = "moves"
Worker = int | str
"""A row's producer: a worker's number, ``MAIN`` (in-process) or ``MOVES`` (``balance``, not recorded)."""


@dataclass(frozen=True)
class RowWorkers:
    """The writer policy of a loader, as far as it shows which producer made a row (see the module's text)."""

    workers: int
    batch_size: int
    whole_batches: bool  # a random-access source with every length known: batch by batch
    balance: bool | None  # the loader's option: True, False, or None (left to the loader)
    lengths_known: bool

    @classmethod
    def of(cls, loader: StreamLoader, lengths_known: bool) -> RowWorkers:
        c = loader.config
        return cls(
            workers=loader.num_workers,
            batch_size=loader.batch_size,
            whole_batches=has_window(loader.source) and lengths_known,
            balance=c.balance if c.world_size == 1 else False,  # on several ranks a worker keeps its block
            lengths_known=lengths_known,
        )

    def moves(self, balanced_now: bool) -> bool:
        """Whether rows move between workers: ``balanced_now`` is the loader's ``stats.balanced`` (balance given,
        or turned on by its measure); streams of unknown length move unless ``balance=False``."""
        if self.workers < 2 or self.whole_batches:
            return False
        return balanced_now or self.balance is True or (not self.lengths_known and self.balance is not False)

    def worker(self, batch: Batch, row: int, balanced_now: bool = False) -> Worker:
        """The producer that made row ``row`` of ``batch``."""
        if self.workers == 0:
            return MAIN
        if self.moves(balanced_now):
            writers = getattr(batch, "extras", {}).get("writers")
            return MOVES if writers is None else int(writers[row])
        if self.whole_batches:
            return batch.index % self.workers
        return next(w for w, (lo, hi) in enumerate(split_rows(self.batch_size, self.workers)) if lo <= row < hi)
