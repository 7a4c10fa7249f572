"""Loader statistics: counted as batches are handed out (``Tally``) and exposed as an immutable snapshot for the
CLI (the library never prints)."""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass

import numpy as np

SKIPS_KEPT = 100  # descriptions of skipped items kept for ``LoaderStats.skips``; the count goes on


@dataclass(frozen=True)
class LoaderStats:
    """A snapshot of a loader's counters since it was created.

    ``waits_s`` holds the consumer's wait for each of the most recent batches: the whole time spent inside
    ``next()``, the loader's own work included, oldest first. ``worker_busy`` is each worker's busy fraction
    (time producing steps over wall time) over the last few seconds; with ``num_workers=0`` it has one entry
    for the main process; ``worker_busy_s`` the seconds each has spent producing since the loader started (two
    snapshots give the busy share of any window). ``worker_stream`` is the stream (item index) each worker is
    reading now, -1 for none; empty when the loader does not report it.
    """

    batches: int
    steps: int  # valid steps delivered
    bytes: int  # data bytes delivered (fields and flags)
    elapsed_s: float  # since the first ``next()``
    first_batch_s: float | None  # from the first ``next()`` call to the first batch
    waits_s: tuple[float, ...]
    worker_busy: tuple[float, ...]
    worker_steps: tuple[int, ...]
    ready_slots: int  # filled slots waiting for the consumer
    num_slots: int
    epoch: int
    streams_done: int  # streams finished in this epoch
    streams_total: int
    skipped: int  # items skipped under on_error="skip"
    copies: int  # batches handed out as copies because too many slots were held
    steps_per_batch: int = 0  # B x T: the room a batch has, so steps / (batches x this) is the useful share
    length_mismatches: int = 0  # streams whose length differed from what the source's length() said
    batch_size: int = 0
    worker_stream: tuple[int, ...] = ()  # the stream each producer is reading now (-1: idle)
    rows_moved: int = 0  # rows given mid-stream by a producer every batch waited for to an idle one
    worker_busy_s: tuple[float, ...] = ()  # each producer's seconds of work since the loader started
    balanced: bool = False  # ``balance`` is on: given, the source's ``costly_steps``, or measured (``iteration``)
    longest_stream: int | None = None  # steps of this epoch's longest stream (None: lengths unknown)
    epoch_steps: int | None = None  # steps of all of this epoch's streams (None: lengths unknown)
    # What the latest skipped items were, oldest first (at most ``SKIPS_KEPT``): name, stream, file, step, why.
    skips: tuple[str, ...] = ()

    @property
    def useful_share(self) -> float:
        """The share of delivered steps that are real data (not padding), 0-1; NaN before the first batch."""
        room = self.batches * self.steps_per_batch
        return self.steps / room if room else float("nan")

    def padding_hint(self) -> str | None:
        """One line naming why most steps are padding and what to do, when real data is under half of them."""
        return padding_hint(
            self.useful_share, self.streams_total, self.batch_size, self.longest_stream, self.epoch_steps
        )

    @property
    def batches_per_s(self) -> float:
        return self.batches / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.bytes / 1e6 / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def wait_percentile(self, q: float) -> float:
        """The ``q``-th percentile (0-100) of recent consumer waits, in seconds."""
        return float(np.percentile(self.waits_s, q)) if self.waits_s else 0.0


def padding_hint(
    share: float, streams: int, batch_size: int, longest: int | None = None, total: int | None = None
) -> str | None:
    """When under half of the steps are real data (``share``), one line naming the cause and the fix.

    With the epoch's stream lengths (``longest``, ``total``) the cause is told apart: were every stream as long
    as the others, ``streams`` rows' worth would fill ``streams / (B x ceil(streams / B))`` of the batches; the
    longest stream alone keeps the epoch going for at least ``longest`` steps, so no more than ``total / (B x
    longest)`` is real data. When that bound is the lower one the lengths are uneven, and fewer rows would not
    help: cutting the long streams would."""
    if not share < 0.5:  # also NaN
        return None
    if batch_size and streams and longest and total:
        count_bound = streams / (batch_size * math.ceil(streams / batch_size))
        length_bound = total / (batch_size * longest)
        if length_bound < count_bound:
            mean = total / streams
            cut = max(1, math.ceil(total / (2 * batch_size)))  # every row gets about two pieces
            cause = (
                f"uneven stream lengths: the longest has {longest} steps, {longest / mean:.0f}x the mean of "
                f"{mean:.0f}, and its row runs on while the others idle"
            )
            fix = (
                f"cut items into shorter streams with --segment N (e.g. --segment {cut}), or fill idle rows with "
                "--epoch-end restream"
            )
            return f"only {share:.0%} of the steps are real data: {cause}; {fix}"
    if batch_size and streams < 2 * batch_size:
        cause = f"only {streams} streams for {batch_size} rows"
        fix = "use a smaller batch size (-b), or --segment N to cut items into more streams"
    else:
        cause = "rows idle while a few long streams run on at the end of the epoch"
        fix = "cut items with --segment N, or fill idle rows with --epoch-end restream"
    return f"only {share:.0%} of the steps are real data: {cause}; {fix}"


class Tally:
    """The counters behind ``LoaderStats``, since the loader was created."""

    def __init__(self, batch_bytes: int) -> None:
        self.created = time.perf_counter()
        self.first_next: float | None = None  # the first ``next()``
        self.first_batch_s: float | None = None
        self.waits: deque[float] = deque(maxlen=1000)
        self.batches = self.steps = self.bytes = self.skipped = self.mismatches = self.streams_done = 0
        self.skips: deque[str] = deque(maxlen=SKIPS_KEPT)
        self.longest: int | None = None  # this epoch's longest stream, and all its streams' steps (None: unknown)
        self.epoch_steps: int | None = None
        self.batch_bytes = batch_bytes
