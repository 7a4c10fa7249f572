"""Who writes a row: an epoch's writer policy, chosen once when its tables are read (``choose``). A policy only says
which producer writes which part of which batch, and how it marks that part done; what a row holds is the
schedule's, so no policy changes a byte.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamcli.shared.control import Control
from streamcli.shared.tensors import split_rows


@dataclass(frozen=True)
class _Policy:
    """Producer ``w`` of ``W``, batches of ``B`` rows: by default it plans every row and writes every batch whole."""

    w: int
    W: int
    B: int

    @property
    def rows(self) -> tuple[int, int]:
        return 0, self.B

    def writes(self, k: int) -> bool:
        return True

    def done(self, control: Control, k: int) -> None:
        control.set_done(k)


@dataclass(frozen=True)
class WholeBatches(_Policy):
    """Random-access sources (``window(item)``): producer ``w`` of ``W`` fills batches ``w, w + W, ...`` whole."""

    def writes(self, k: int) -> bool:
        return k % self.W == self.w


@dataclass(frozen=True)
class RowBlocks(_Policy):
    """Iterator sources, whose streams stay in the process that reads them: producer ``w`` of ``W`` writes its block
    of rows (``split_rows``) of every batch."""

    @property
    def rows(self) -> tuple[int, int]:
        return split_rows(self.B, self.W)[self.w] if self.W > 1 else (0, self.B)

    def done(self, control: Control, k: int) -> None:
        if self.W > 1:  # batch k is whole once every row is past it (the balanced policy's mark too)
            control.set_written(slice(*self.rows), k + 1)
        else:
            control.set_done(k)


@dataclass(frozen=True)
class Balanced(_Policy):
    """Iterator sources with ``balance`` and workers: producer ``w`` writes the rows it owns, at first its ``block``,
    and a row moves to an idle producer (``fills.balanced``, which marks the rows done itself)."""

    known: bool = True

    @property
    def block(self) -> tuple[int, int]:
        return split_rows(self.B, self.W)[self.w]


Planned = WholeBatches | RowBlocks | Balanced


def choose(*, by_batch: bool, w: int, W: int, B: int, known: bool, balanced: bool, fixed: bool = False) -> Planned:
    """The policy of an epoch: ``by_batch`` for random-access sources, ``known`` when every stream's length is,
    ``balanced`` when the loader balances its rows, ``fixed`` under ``balance=False`` (rows of unknown length are
    balanced unless so; a random-access source whose lengths are not all known is read like an iterator source)."""
    if by_batch and known:
        return WholeBatches(w, W, B)
    if W > 1 and (balanced or not (known or fixed)):
        return Balanced(w, W, B, known)
    return RowBlocks(w, W, B)
