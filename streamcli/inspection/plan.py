"""The loader's state before batch K, from the streams' lengths alone: no step of the real source is read.

With every length known, the schedule is a function of the lengths and the settings. ``Planner`` runs the
loader's own engine over a stand-in source whose steps are one zero byte (``scheduled.resume.LengthsOnly``), as a
distributed export does, so the rule that decides every claim is exactly the real one. It keeps a state every
``MARK_EVERY`` batches, so going back costs at most that many stand-in batches, and going on from where it stands
costs only the batches in between.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from streamcli.batch import Batch
from streamcli.errors import StreamcliError
from streamcli.loader import StreamLoader
from streamcli.scheduled.resume import LengthsOnly
from streamcli.scheduled.state import seal
from streamcli.source import stream_order_of

MARK_EVERY = 64
SCHEDULE_KEYS = ("seed", "shuffle", "boundary", "epoch_end", "layout", "segment", "batches_per_epoch", "rank")
"""The settings that decide the schedule (the world size too, passed with ``rank``); workers, transforms and
balance change nothing in it."""


class RunEnded(StreamcliError, IndexError):
    """The run has fewer batches than asked for (an epoch without a batch ends it, as it ends an export)."""


def next_batch(loader: Any, it: Iterator[Batch] | None) -> tuple[Batch, Iterator[Batch]]:
    """The loader's next batch and the iterator it came from: the current epoch's, else the next epoch's.

    A state loaded at an epoch's end yields nothing for that epoch, so one empty epoch is passed over; two in a
    row end the run (``RunEnded``), as an epoch without a batch ends an export."""
    for _ in range(2):
        if it is None:
            it = iter(loader)
        batch = next(it, None)
        if batch is not None:
            return batch, it
        it = None
    raise RunEnded("the run ends here: its next epoch has no batch")


def lengths_of(loader: StreamLoader) -> list[int] | None:
    """Every stream's length, or None when the source does not report them all."""
    out = [loader.stream_length(i) for i in range(loader.num_streams)]
    return None if any(n is None for n in out) else [int(n) for n in out if n is not None]


class Planner:
    """States of ``loader`` (the real one) before any batch K of its run, counted from ``start`` (a state in the
    loader's own terms, e.g. its ``state_dict()`` right after ``load_state_dict``; None: the run's start).

    ``lengths``: every stream's length (``lengths_of``). ``state_at(k)`` is what ``loader.load_state_dict`` takes
    so that its next batch is the run's k-th."""

    def __init__(self, loader: StreamLoader, lengths: Sequence[int], start: Mapping[str, Any] | None = None) -> None:
        c = loader.config
        kw = {k: getattr(c, k) for k in SCHEDULE_KEYS}
        self.real_fingerprint = loader.state_dict()["fingerprint"]
        order = stream_order_of(loader.source)
        self.sim = StreamLoader(
            LengthsOnly(lengths, order), c.batch_size, c.time_steps, num_workers=0, world_size=c.world_size, **kw
        )
        self.sim_fingerprint = self.sim.state_dict()["fingerprint"]
        # A state is sealed over its fingerprint: one moved between the stand-in and the real loader is sealed again.
        first = self.sim.state_dict() if start is None else seal({**start, "fingerprint": self.sim_fingerprint})
        self.marks: dict[int, dict[str, Any]] = {0: first}
        self.at = -1  # batches the stand-in has handed out since ``start`` (-1: nothing loaded yet)
        self._it: Iterator[Batch] | None = None
        self.end: int | None = None  # the run's length in batches, once seen

    def state_at(self, k: int) -> dict[str, Any]:
        """The real loader's state after ``k`` batches of the run (``RunEnded`` past its end)."""
        self._stand_before(k)
        out = self._sim_state()  # (right after a load: the loaded mark itself)
        out["fingerprint"] = self.real_fingerprint
        return seal(out)

    def scan(self, first: int, end: int) -> Iterator[tuple[int, Batch]]:
        """The stand-in's batches ``first .. end-1`` (fewer at the run's end): the real batches' flags (stream,
        position, is_first, valid), with none of their data."""
        try:
            self._stand_before(first)
            while self.at < end:
                k = self.at
                yield k, self._advance(k)
        except RunEnded:
            return

    def _stand_before(self, k: int) -> None:
        if k < 0:
            raise ValueError(f"batch {k} must be 0 or more")
        if self.end is not None and k >= self.end:
            raise RunEnded(f"batch {k} is past the run's end: it has {self.end} batches")
        mark = max(m for m in self.marks if m <= k)
        if not mark <= self.at <= k:
            self.sim.load_state_dict(self.marks[mark])
            self.at, self._it = mark, None
        while self.at < k:
            self._advance(k)

    def _advance(self, k: int) -> Batch:
        try:
            batch, self._it = next_batch(self.sim, self._it)
        except RunEnded:
            self.end, self.at, self._it = self.at, -1, None
            raise RunEnded(f"batch {k} is past the run's end: it has {self.end} batches") from None
        self.at += 1
        if self.at % MARK_EVERY == 0:
            self.marks.setdefault(self.at, self._sim_state())
        return batch

    def _sim_state(self) -> dict[str, Any]:
        return dict(self.sim.state_dict())

    def close(self) -> None:
        self.sim.close()
