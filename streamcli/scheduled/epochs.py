"""A loader's epochs: each epoch's streams for this rank and how many batches it yields, from the items' lengths.

Everything here is a pure function of the items' lengths (asked of the source once, and only when needed), the
loader's settings and the epoch number.
"""

from __future__ import annotations

from collections.abc import Callable

from streamcli.config import LoaderConfig
from streamcli.scheduled.claims import count_batches
from streamcli.scheduled.streams import Streams, all_streams, epoch_streams, rank_batches
from streamcli.source import StreamOrder


class Epochs:
    """The epochs of ``n_items`` items under ``config``; ``measure()`` asks the source for every item's length."""

    def __init__(
        self,
        config: LoaderConfig,
        n_items: int,
        measure: Callable[[], list[int | None]],
        plugin: str,
        order: StreamOrder | None = None,
    ) -> None:
        self.config, self.plugin = config, plugin
        self._measure = measure
        self._lengths: list[int | None] | None = None
        assert config.world_size is not None
        needs_lengths = bool(config.segment) or config.world_size > 1
        self.all = all_streams(self.lengths() if needs_lengths else [None] * n_items, config.segment, order)
        if config.world_size > 1 and self.all.lengths is None and config.batches_per_epoch is None:
            raise ValueError(
                f"world_size={config.world_size} needs every stream's length so that all ranks yield the same "
                f"number of batches, but source {plugin!r} does not report them all; make it report lengths (for "
                "video: scan=True) or pass batches_per_epoch=N"
            )

    def lengths(self) -> list[int | None]:
        """Every item's length, as ``length()`` reports it (None: unknown)."""
        if self._lengths is None:
            self._lengths = self._measure()
        return self._lengths

    @property
    def measured(self) -> bool:
        return self._lengths is not None

    def streams(self, epoch: int) -> Streams:
        """This rank's streams of ``epoch`` in ticket order (see ``scheduled.streams``)."""
        c = self.config
        assert c.rank is not None and c.world_size is not None
        return epoch_streams(
            self.all, seed=c.seed, epoch=epoch, shuffle=c.shuffle, rank=c.rank, world_size=c.world_size
        )

    def target(self, epoch: int) -> int | None:
        """The batches every epoch must yield: fixed by the user, or equal on every rank; None: natural end."""
        c = self.config
        if c.batches_per_epoch is not None:
            return c.batches_per_epoch
        assert c.world_size is not None
        if c.world_size == 1:
            return None
        counts = rank_batches(
            self.all,
            seed=c.seed,
            epoch=epoch,
            shuffle=c.shuffle,
            world_size=c.world_size,
            batch_size=c.batch_size,
            time_steps=c.time_steps,
            boundary=c.boundary,
            epoch_end=c.epoch_end,
        )
        return min(counts) if c.epoch_end == "drop" else max(counts)

    def batches(self, epoch: int) -> int:
        """The batches epoch ``epoch`` yields; ``TypeError`` if that needs lengths the source does not report."""
        target = self.target(epoch)
        if target is not None:
            return target
        lengths = self.lengths()
        if any(n is None for n in lengths):
            raise TypeError(
                f"len() needs every stream's length, but source {self.plugin!r} does not report them all; pass "
                "batches_per_epoch=N to fix the epoch's length, or make the source report lengths (for video: "
                "scan=True)"
            )
        c = self.config
        base = self.all if self.all.lengths is not None else all_streams(lengths, c.segment, self.all.order)
        s = epoch_streams(base, seed=c.seed, epoch=epoch, shuffle=c.shuffle)
        assert s.lengths is not None
        return count_batches(s.lengths.tolist(), c.batch_size, c.time_steps, c.boundary, c.epoch_end)
