"""How the loader's epochs run: which epoch an iterator starts (the next one, or a loaded state's), the generation
that supersedes an older iterator, the epoch's set-up in the control block, and the position and counters that move
past each batch handed out. ``Iteration`` closes the loader's running parts; it holds no reference to the loader, so
the loader's finalizer still runs when the loader is dropped.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from streamcli.batch import Batch
from streamcli.caller import user_stacklevel
from streamcli.config import LoaderConfig
from streamcli.errors import LoaderClosedError, StaleIteratorError
from streamcli.fills.flags import live_rows
from streamcli.handout import Epoch, HandOut, Ready
from streamcli.scheduled import cursor as _cursor
from streamcli.scheduled.cursor import RowPhase
from streamcli.scheduled.resume import Resume, World
from streamcli.scheduled.state import Position
from streamcli.scheduled.streams import Epochs, Streams
from streamcli.shared.control import epoch_rows
from streamcli.shared.ring import Ring
from streamcli.shared.tensors import import_torch
from streamcli.stats import LoaderStats, Tally
from streamcli.trace import Tracer
from streamcli.workers.producers import InProcess, Workers

log = logging.getLogger("streamcli")

# Balance left to the loader (``balance=None``) turns on when, over BALANCE_BATCHES batches after the epoch's first
# BALANCE_SKIP (worker start-up, the ring's first lap), the workers spent at least BALANCE_STEP_S a step (so a row's
# cost dwarfs what claiming rows at run time adds) and the least busy worker was busy under
# BALANCE_UNEVEN of the busiest one's time (rows cost unevenly: one worker waits on the other's rows).
BALANCE_SKIP, BALANCE_BATCHES, BALANCE_STEP_S, BALANCE_UNEVEN = 4, 16, 20e-6, 0.85


class Iteration:
    """The loader's epochs, one iterator at a time, over its ring, hand-out and producers."""

    def __init__(
        self,
        config: LoaderConfig,
        epochs: Epochs,
        ring: Ring,
        handout: HandOut,
        producers: InProcess | Workers,
        bounds: list[tuple[int, int]],
        resume: Resume,
        tally: Tally,
        finalizer: Callable[[], Any],
        adaptive: bool = False,
    ) -> None:
        self.config, self.epochs, self.ring, self.handout = config, epochs, ring, handout
        self.balanced = config.balance is True and config.world_size == 1  # rows move to idle workers (one rank)
        self.adaptive = adaptive  # a measure may turn ``balanced`` on (``_costly_and_uneven``)
        self._measure_from: tuple[int, np.ndarray, int] | None = None  # (batch, workers' busy seconds, steps)
        self._epoch_first = 0
        self.producers, self.bounds, self.resume, self.finalizer = producers, bounds, resume, finalizer
        self._position = Position.start_of(0, epochs.rows)
        # (epoch, the last batch handed out): the position past it is made when read, and with ranks on one
        # schedule only then are the other ranks' rows replayed (``_world``)
        self._handed: tuple[int, Ready] | None = None
        self._world: World | None = None
        self.epoch, self.gen, self.active, self.closed = -1, 0, False, False
        self.n_streams = len(epochs.all)  # this epoch's streams (this rank's share)
        self.tally = tally
        self.tracer: Tracer | None = None  # ``streamcli.trace``: the consumer's waits recorded, when set
        self._uncounted: Ready | None = None  # the last batch handed out, its live rows not yet counted (``stats``)

    @property
    def position(self) -> Position:
        """Where the loader stands: the global rows' cursors and tickets, every rank's alike."""
        if self._handed is not None:  # made only now that it is asked for
            (epoch, rec), self._handed = self._handed, None
            tickets, cursors = rec.tickets, rec.cursors
            assert cursors is not None
            if self._world is not None:
                tickets, cursors = self._world.at(rec.k + 1, cursors, self.epochs.offset)
            self._position = Position(epoch, rec.k + 1, tickets, cursors, self._position.skipped)
        return self._position

    @position.setter
    def position(self, pos: Position) -> None:
        self._position, self._handed = pos, None

    @property
    def next_batch(self) -> int:
        """The position's batch, read without making the position."""
        return self._position.batch if self._handed is None else self._handed[1].k + 1

    def start(self) -> Iterator[Batch]:
        """Start the next epoch (or the loaded state's), superseding any older iterator."""
        if self.closed:
            raise LoaderClosedError("this StreamLoader is closed; create a new one (or iterate inside its with block)")
        self.handout.stop_ready_queue()
        self.gen += 1
        resume = self.resume.take()
        B = self.epochs.rows
        if resume is None:
            self.epoch += 1
            self.position = Position.start_of(self.epoch, B)
        else:
            self.position = Position.of_state(resume, B, len(self.resume.items))
            self.epoch = self.position.epoch
        return self._run(self.gen, self.epoch)

    def _begin_epoch(self, gen: int, epoch: int) -> Epoch:
        """Stop whatever producers were doing, then set the shared tables for the epoch from the position (fresh,
        or a resumed state's)."""
        pos, control, handout = self.position, self.ring.control, self.handout
        own = pos.cursors[self.epochs.offset :][: self.config.batch_size]  # this rank's rows
        balanced = self.balanced and self.epochs.balanceable(epoch)
        control.stage(pos.cursors, pos.batch, epoch, balanced, self.epochs.offset)
        self._measure_from, self._epoch_first = None, pos.batch
        control.set_generation(gen)  # producers of an older generation abandon their batch
        handout.pending.clear()
        try:
            self.producers.start_epoch(gen, self.config.timeout)
        except BaseException:
            self.close()  # nothing outlives the error
            raise
        for v in self.ring.slots:  # a batch abandoned mid-write must not name its rows' writers in this epoch
            v["writer"][:] = 0
        # Only now: a producer of the old generation may still have been taking a ticket until it acknowledged.
        streams = self.epochs.streams(epoch)
        self.n_streams = len(streams)
        self._measure_streams(streams)
        table = streams.table(self.epochs.lengths())
        control.set_streams(table, pos.tickets)
        control.set_rows(*epoch_rows(own, pos.batch, self.config.time_steps, self.bounds))
        several = len(own) < len(pos.cursors)  # ranks on one schedule
        self._world = World(table, pos.cursors, pos.batch, pos.tickets, self.config) if several else None
        self.producers.begin(gen)
        control.open_epoch(gen, pos.batch)
        handout.slots.new_epoch()  # only now: no producer writes the old epoch's slots any more
        self._uncounted = None
        self.tally.streams_done = max(0, min(pos.tickets, self.n_streams) - live_rows(own))
        # Under "drop" a dry row means the epoch already ended; with a fixed length it goes on as padding.
        dropped = self.config.epoch_end == "drop" and bool((own[:, _cursor.STATE] == RowPhase.DRY).any())
        return Epoch(epoch, pos.batch, pos.tickets, self.n_streams, self.epochs.target(epoch), dropped)

    def _measure_streams(self, streams: Streams) -> None:
        """The epoch's longest stream and all its steps, where the lengths say (``LoaderStats.padding_hint``)."""
        steps = streams.lengths
        lengths = self.epochs.lengths()
        if steps is None and not self.config.segment and None not in lengths:
            steps = np.asarray(lengths, np.int64)[streams.items]  # unsegmented: a stream is its item
        if steps is not None and len(steps):
            self.tally.longest, self.tally.epoch_steps = int(steps.max()), int(steps.sum())
        else:
            self.tally.longest = self.tally.epoch_steps = None

    def _run(self, gen: int, epoch: int) -> Iterator[Batch]:
        torch = import_torch()
        self.handout.pin_ring(torch)
        handing = self._begin_epoch(gen, epoch)
        self.active = True
        run = [gen]  # this iterator's generation: a new one when the epoch goes on balanced (``_balance_now``)
        try:
            yield from self._batches_of(torch, run, handing)
            if run[0] == self.gen:  # the epoch ran to its end: the next iter() starts the next one
                self.position = Position.start_of(epoch + 1, self.epochs.rows)
        finally:
            if run[0] == self.gen:
                self.active = False

    def _batches_of(self, torch: Any, run: list[int], epoch: Epoch) -> Iterator[Batch]:
        """Hand the prepared batches to the consumer, moving the position past each."""
        handout, tally = self.handout, self.tally
        gen = run[0]
        ready = handout.batches(torch, epoch, lambda: not self.closed and gen == self.gen)
        entered = time.perf_counter()  # the consumer's wait: the whole time inside next(), our own work included
        if tally.first_next is None:
            tally.first_next = entered
        try:
            while True:
                if self.closed:
                    raise LoaderClosedError("this StreamLoader was closed while iterating; create a new one to go on")
                if gen != self.gen:
                    raise StaleIteratorError()
                if self.adaptive and not self.balanced and self._costly_and_uneven():
                    gen, ready = self._balance_now(torch, epoch.number)
                    run[0] = gen
                rec = next(ready, None)
                if rec is None or rec.dropped:  # "drop": the epoch ended before this batch
                    return
                self._hand(rec, epoch.number)
                if rec.batch is not None:
                    batch, rec.batch = rec.batch, None
                    tally.batches += 1
                    tally.steps += rec.n_valid
                    tally.bytes += tally.batch_bytes
                    now = time.perf_counter()
                    tally.waits.append(now - entered)
                    if self.tracer is not None:
                        self.tracer.complete("wait", entered, now, {"batch": rec.k, "epoch": epoch.number})
                    if tally.first_batch_s is None:
                        tally.first_batch_s = now - tally.created
                    yield batch
                    del batch
                    entered = time.perf_counter()
                if rec.last:
                    return
        except BaseException:
            if handout.ready_queue is not None and ready is handout.ready_queue and handout.ready_queue.failed:
                self.close()  # a failure in the workers: nothing outlives it
            raise
        finally:
            if handout.ready_queue is not None and ready is handout.ready_queue:
                handout.stop_ready_queue()

    def _costly_and_uneven(self) -> bool:
        """Whether the workers read costly steps unevenly over the last ``BALANCE_BATCHES`` batches (see above)."""
        k, last = self.next_batch, self._measure_from  # (not ``position``: making it per batch costs a state)
        if k < self._epoch_first + BALANCE_SKIP or (last is not None and k - last[0] < BALANCE_BATCHES):
            return False
        if not self.epochs.balanceable(self.epoch):
            return False
        if last is None and None in self.epochs.lengths():
            self.adaptive = False  # rows of unknown length are balanced from the start already
            return False
        control = self.ring.control
        self._measure_from = (k, control.busy(), sum(control.steps()))  # the start of the next window
        if last is None:
            return False
        busy, steps = self._measure_from[1] - last[1], self._measure_from[2] - last[2]
        if steps <= 0 or busy.max() <= 0:
            return False
        return bool(busy.sum() / steps >= BALANCE_STEP_S and busy.min() < BALANCE_UNEVEN * busy.max())

    def _balance_now(self, torch: Any, epoch: int) -> tuple[int, Iterator[Ready]]:
        """Go on with this epoch balanced, from the batch the consumer is at: as a resume from the loader's own
        state (batches and states are the same either way); the batches prepared ahead are written again."""
        self.handout.stop_ready_queue()
        self.balanced = True
        self.gen += 1
        gen = self.gen
        handing = self._begin_epoch(gen, epoch)
        return gen, self.handout.batches(torch, handing, lambda: not self.closed and gen == self.gen)

    def _hand(self, rec: Ready, epoch: int) -> None:
        """Move the loader's position (``state_dict``) past batch ``rec``, and report its skipped items."""
        tally, skipped = self.tally, self._position.skipped
        for skip in rec.skips:
            if skip.kind == "length":
                tally.mismatches += 1
                if tally.mismatches == 1:
                    warnings.warn(
                        f"{skip.error}; len(loader) may be wrong (counted in stats.length_mismatches)",
                        RuntimeWarning,
                        stacklevel=user_stacklevel(),
                    )
                continue
            tally.skipped += 1
            skipped.append([skip.item, skip.step])
            tally.skips.append(skip.describe())
            log.warning("skipped item %s", skip.describe())
        self._uncounted = rec  # its live rows are counted when the statistics are asked for
        if rec.last:
            self.position = Position.start_of(epoch + 1, self.epochs.rows)
        else:
            self._handed = (epoch, rec)

    def stats(self) -> LoaderStats:
        control, closed, handout, tally, c = self.ring.control, self.closed, self.handout, self.tally, self.config
        if self._uncounted is not None:
            rec, self._uncounted = self._uncounted, None
            assert rec.cursors is not None
            live = live_rows(rec.cursors) if rec.n_live is None else rec.n_live
            tally.streams_done = max(0, min(rec.tickets, self.n_streams) - live)
        elapsed = time.perf_counter() - tally.first_next if tally.first_next else 0.0
        return LoaderStats(
            batches=tally.batches,
            steps=tally.steps,
            bytes=tally.bytes,
            elapsed_s=elapsed,
            first_batch_s=tally.first_batch_s,
            waits_s=tuple(tally.waits),
            worker_busy=handout.busy_shares(closed, c.num_workers),
            worker_steps=() if closed else self.producers.steps(),
            ready_slots=0 if closed else self.producers.ready_batches(handout.k),
            num_slots=handout.slots.num_slots,
            epoch=max(self.epoch, 0),
            streams_done=tally.streams_done,
            streams_total=self.n_streams,
            skipped=tally.skipped,
            skips=tuple(tally.skips),
            copies=handout.copies,
            steps_per_batch=c.batch_size * c.time_steps,
            length_mismatches=tally.mismatches,
            batch_size=c.batch_size,
            worker_stream=() if closed else tuple(control.reading(w)[0] for w in range(len(self.bounds))),
            rows_moved=0 if closed else control.moved,
            worker_busy_s=() if closed else tuple(float(x) for x in self.producers.busy()),
            balanced=self.balanced,
            longest_stream=self.tally.longest,
            epoch_steps=self.tally.epoch_steps,
        )

    def close(self) -> None:
        """Stop the producers and free the ring. Idempotent."""
        if self.closed:
            return
        self.closed = True
        self.handout.stop_ready_queue()
        self.producers.close()
        self.finalizer()
        if self.tracer is not None:  # (the workers have ended: their part files are complete)
            self.tracer.merge()
