"""A loader's epochs: each epoch's streams and batch count, pure functions of the items' lengths (asked once, when
needed), the settings, the epoch and a loaded state's re-plan (``scheduled.replan``).

With every length known, ranks share one schedule of ``world_size * batch_size`` rows (rank ``r`` writes rows
``[r * B, (r + 1) * B)``), so the global batches are the same for every world size; otherwise each rank deals itself
a share of the streams and runs a schedule of its own ``B`` rows.
"""

from __future__ import annotations

from collections.abc import Callable

from streamcli.config import LoaderConfig
from streamcli.scheduled.claims import count_batches
from streamcli.scheduled.replan import Replan
from streamcli.scheduled.streams import Streams, all_streams, epoch_streams, rank_batches, shuffled
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
        assert config.world_size is not None and config.rank is not None
        needs_lengths = bool(config.segment) or config.world_size > 1
        self.all = all_streams(self.lengths() if needs_lengths else [None] * n_items, config.segment, order)
        if config.world_size > 1 and self.all.lengths is None and config.batches_per_epoch is None:
            raise ValueError(
                f"world_size={config.world_size} needs every stream's length so that all ranks yield the same "
                f"number of batches, but source {plugin!r} does not report them all; make it report lengths (for "
                "video: scan=True, or an index: `streamcli index`) or pass batches_per_epoch=N"
            )
        # One global schedule for all ranks (``rows`` rows, this rank's from ``offset``), or a per-rank deal.
        self.shared = config.world_size == 1 or self.all.lengths is not None
        self.rows = config.batch_size * (config.world_size if self.shared else 1)
        self.offset = config.batch_size * config.rank if self.shared else 0
        self.replan: Replan | None = None  # a loaded state's re-plan of its epoch (another global batch)

    def lengths(self) -> list[int | None]:
        """Every item's length, as ``length()`` reports it (None: unknown)."""
        if self._lengths is None:
            self._lengths = self._measure()
        return self._lengths

    @property
    def measured(self) -> bool:
        return self._lengths is not None

    @property
    def known(self) -> bool:
        """Whether every item's length is known (measured now if it was not yet)."""
        return None not in self.lengths()

    def replanned(self, epoch: int) -> Replan | None:
        """The re-plan epoch ``epoch`` follows, if any."""
        return self.replan if self.replan is not None and self.replan.epoch == epoch else None

    def balanceable(self, epoch: int) -> bool:
        """Whether rows may move between producers in ``epoch``: only on one rank's schedule, not re-planned."""
        return self.config.world_size == 1 and self.replanned(epoch) is None

    def streams(self, epoch: int) -> Streams:
        """The streams of ``epoch`` in ticket order: all of them (this rank's share when ranks deal them out)."""
        c = self.config
        assert c.rank is not None and c.world_size is not None
        if not self.shared:
            return epoch_streams(
                self.all, seed=c.seed, epoch=epoch, shuffle=c.shuffle, rank=c.rank, world_size=c.world_size
            )
        again = self.replanned(epoch)
        if again is None:
            return shuffled(self.all, c.seed, epoch, c.shuffle)
        return again.apply(shuffled(self._measured_all(), c.seed, epoch, c.shuffle), self.lengths(), c.segment)

    def _measured_all(self) -> Streams:
        """Every stream with its length (``TypeError`` if some are unknown)."""
        if self.all.lengths is not None:
            return self.all
        lengths = self.lengths()
        if any(n is None for n in lengths):
            raise TypeError(
                f"len() needs every stream's length, but source {self.plugin!r} does not report them all; pass "
                "batches_per_epoch=N to fix the epoch's length, or make the source report lengths (for video: "
                "scan=True)"
            )
        return all_streams(lengths, self.config.segment, self.all.order)

    def target(self, epoch: int) -> int | None:
        """The batches every epoch must yield: fixed by the user, or equal on every rank; None: natural end."""
        c = self.config
        if c.batches_per_epoch is not None:
            return c.batches_per_epoch
        assert c.world_size is not None
        if c.world_size == 1:
            return None
        if self.shared:  # one schedule: every rank ends with it
            return self.batches(epoch)
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

    def batches(self, epoch: int, replan: Replan | None = None) -> int:
        """The batches epoch ``epoch`` yields (``TypeError`` if that needs lengths the source does not report);
        ``replan``: a loaded state's, which its epoch will follow."""
        c = self.config
        if c.batches_per_epoch is not None or not self.shared:
            target = self.target(epoch)
            assert target is not None
            return target
        again = replan if replan is not None and replan.epoch == epoch else self.replanned(epoch)
        s = shuffled(self._measured_all(), c.seed, epoch, c.shuffle)
        if again is not None:
            s = again.apply(s, self.lengths(), c.segment)
        assert s.lengths is not None
        n = count_batches(s.lengths.tolist(), self.rows, c.time_steps, c.boundary, c.epoch_end)
        return n + (again.batch if again is not None else 0)
