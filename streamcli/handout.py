"""Where a batch is handed out: slots given to the producers (``Control.publish``), batch k waited for, and its slot
wrapped as a ``Batch`` of zero-copy tensors, lent until its last view dies (``shared.slots``). With workers, a thread
may do this ahead of the consumer (``ReadyQueue``), only while the consumer is the slower side.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np

from streamcli.batch import FLAGS, Batch, Deferred
from streamcli.config import LoaderConfig
from streamcli.errors import LoaderUsageError
from streamcli.fills.flags import any_dry, cursors_after, live_rows
from streamcli.fills.spec import Skip
from streamcli.shared.control import Aborted
from streamcli.shared.ring import Ring
from streamcli.shared.slots import Slots
from streamcli.shared.tensors import pad_slot, pin_available
from streamcli.source import Field
from streamcli.trace import Tracer
from streamcli.workers.producers import InProcess, Workers

READY_DEPTH = 2  # batches the ``ReadyQueue`` thread prepares before the consumer asks
# Batches in a row the consumer waited for that end the thread; batches in a row found whole that start it again
# (more, so that a faster consumer's jitter does not bring it back and forth)
_SWITCH, _RESUME = 3, 8
_STOPPED = (
    "the thread preparing batches has stopped, because the loader was closed or a newer iter(loader) started "
    "another epoch; iterate the newest iter(loader), or create a new StreamLoader if this one is closed"
)
T = TypeVar("T")
_DONE = object()


@dataclass
class Ready:
    """Batch ``k`` prepared for hand-out, with what the loader's position becomes once it is handed out."""

    k: int
    batch: Batch | None  # None: all padding, not handed out
    last: bool  # the epoch ends with it
    tickets: int  # tickets taken up to the end of it
    cursors: np.ndarray | None  # every row's cursor after it (None: the epoch ended before it)
    n_live: int | None  # rows holding a live original stream after it (None: not counted, ``live_rows``)
    n_valid: int
    skips: Sequence[Skip]
    dropped: bool = False  # "drop": the epoch ended before this batch, which is not handed out


@dataclass
class Epoch:
    """What the hand-out of one epoch needs to know: where it starts and when it ends."""

    number: int
    first: int  # the batch it starts (or resumes) at
    tickets: int  # tickets taken before ``first``
    streams: int  # this rank's streams
    target: int | None  # batches it must yield (None: its natural end)
    dropped: bool  # under "drop", it has ended already (a resumed state past its end)


class HandOut:
    """Slots handed out to the producers and batches handed to the consumer, for one ring."""

    def __init__(
        self,
        ring: Ring,
        fields: tuple[Field, ...],
        config: LoaderConfig,
        producers: InProcess | Workers,
        prefetch: int,
        source_lookup: np.ndarray | None = None,
    ) -> None:
        self.ring, self.fields, self.config, self.producers = ring, fields, config, producers
        self.window = prefetch if producers.pool is not None else 1  # in-process nothing runs ahead
        self.slots = Slots(ring.reserved)
        self.names = [f.name for f in fields] + list(FLAGS)  # the arrays of a batch, in slot order
        self.pending: dict[int, list[Skip]] = {}  # batch index -> skips reported with it
        self.k = 0  # the batch being waited for or consumed
        self.k_next = 0  # the next batch to hand out
        self.waited = False  # preparing the last batch waited for the workers (read by ``ReadyQueue``)
        self.ready_queue: ReadyQueue[Ready] | None = None
        self.pin: bool | None = None
        self.pinned_ring = False
        self.copies = 0
        self.source_lookup = source_lookup  # a mix: ``batch.source`` from ``batch.stream`` (-1 on padding)
        self.busy: deque[tuple[float, np.ndarray]] = deque(maxlen=64)  # (time, the producers' busy seconds)
        self.tracer: Tracer | None = None  # ``streamcli.trace``: stalls recorded, when set

    def pin_ring(self, torch: Any) -> None:
        """Decide once whether batches are pinned; page-lock the whole ring if possible (no copy per batch)."""
        if self.pin is None:
            self.pin = pin_available(torch) if self.config.pin_memory else False
            whole = bool(self.pin) and self.back_slots(self.ring.spec.num_slots)  # page-locking touches all
            self.pinned_ring = whole and self.ring.page_lock(torch)

    def back_slots(self, n: int) -> bool:
        """Back the ring's slots up to ``n`` with memory, and let batches use them; False if shared memory has no
        room for them now."""
        if not self.ring.reserve(n):  # the ring knows what is backed already
            return False
        self.slots.grow(self.ring.reserved)
        return True

    def batches(self, torch: Any, epoch: Epoch, alive: Callable[[], bool]) -> Iterator[Ready]:
        """The epoch's batches as they become whole: in process made inside ``next()``; with workers through a
        ``ReadyQueue``."""
        ready = self._prepare(torch, epoch, alive)
        if self.producers.pool is None:
            return ready
        self.ready_queue = ReadyQueue(ready, READY_DEPTH, self.fill_window, lambda: self.waited)
        return self.ready_queue

    def stop_ready_queue(self) -> None:
        queue, self.ready_queue = self.ready_queue, None
        if queue is not None:
            queue.stop()

    def _prepare(self, torch: Any, epoch: Epoch, alive: Callable[[], bool]) -> Iterator[Ready]:
        self.k_next = k = epoch.first
        tickets, target, dropped = epoch.tickets, epoch.target, epoch.dropped
        drop = self.config.epoch_end == "drop"
        producers = self.producers
        while True:
            if not alive():
                raise Aborted
            self.k = k
            writers, unread = None, None
            if isinstance(producers, InProcess):  # a function call: nothing published, marked or waited for
                slot = self.slots.take_free()
                t0 = time.perf_counter() if self.tracer is not None else 0.0
                plan, short = producers.fill(slot)
                unread = producers.filler.unread  # (its ``stream``, ``position``, ``replayed``: when first read)
                self._note_busy(t0, k, True)
                claims, cursors = int(plan.claims.sum()), cursors_after(plan, short)
                v = self.ring.slots[slot]
            else:
                self.fill_window()
                slot, queue = self.slots.take(k), self.ready_queue
                t0 = time.perf_counter() if self.tracer is not None else 0.0
                self.waited = producers.wait(k, self.config.timeout, queue.stopping if queue is not None else None)
                self._note_busy(t0, k, self.waited)
                v = self.ring.slots[slot]
                claims, cursors = int(v["claims"].sum()), v["cursor"].copy()  # (the slot is written again)
                writer = v["writer"]
                if writer[0]:  # rows that move (``fills.balanced``): each names its producer, as worker + 1
                    writers, writer[:] = writer - 1, 0
            dry = drop and not dropped and any_dry(cursors)
            skips = self.pending.pop(k, ())  # (no list made for a batch without skips)
            n_valid = int(np.count_nonzero(v["valid"]))  # once every part is written, whoever wrote it
            if dry:
                if target is None:
                    self.slots.give_back(slot)
                    yield Ready(k, None, True, tickets, None, 0, 0, skips, dropped=True)
                    return
                dropped = True
            if dropped:  # a fixed-length epoch past its "drop" end: padding
                pad_slot(v, self.fields)
                n_valid, unread = 0, None
            tickets += claims
            n_live = None
            if tickets >= epoch.streams or (target is not None and k + 1 >= target):
                n_live = live_rows(cursors)  # (only where the epoch may end: counted when asked)
            ended = tickets >= epoch.streams and n_live == 0
            last = ended if target is None else k + 1 >= target
            batch = None
            if n_valid or target is not None:  # a fixed-length epoch hands out every batch, padding too
                batch = self.assemble(torch, slot, epoch.number, k, unread)
                if writers is not None:
                    batch.extras["writers"] = writers
            else:
                self.slots.give_back(slot)
            yield Ready(k, batch, last, tickets, cursors, n_live, n_valid, skips)
            del batch  # a batch the consumer dropped frees its slot for the next one: reused warm (``fill_window``)
            if last:
                return
            k += 1

    def _note_busy(self, t0: float, k: int, stalled: bool) -> None:
        """After batch ``k`` is whole: the consumer's stall since ``t0`` traced, the producers' busy time noted."""
        t = time.perf_counter()
        if self.tracer is not None and stalled:
            self.tracer.complete("stall", t0, t, {"batch": k})
        if not self.busy or t - self.busy[-1][0] > 0.1:
            self.busy.append((t, self.producers.busy()))

    def fill_window(self) -> None:
        """Give producers every free slot, up to the window ahead of the batch being prepared (also from the
        ``ReadyQueue`` thread while its queue is full, so producers never wait for the consumer to take one)."""
        self.k_next = self.slots.assign(self.ring.control, self.k_next, self.k + self.window)

    def assemble(self, torch: Any, slot: int, epoch: int, k: int, unread: Callable[[], None] | None = None) -> Batch:
        """Slot ``slot`` as batch ``k``: zero-copy tensors, unless the consumer holds so many batches that the
        producers would run out of slots (or batches must be pinned by copying); ``unread``: ``fills.flags.Unread``."""
        pin_copy = bool(self.pin) and not self.pinned_ring
        copy = pin_copy or self.slots.crowded()
        if unread is not None and (copy or self.source_lookup is not None):  # copied or read now: written now
            unread()
        holder = self.ring.holder(slot)
        arrays = self.ring.holder_views(holder, self.names)  # the fields, then the flags (``FLAGS`` order)
        from_numpy = torch.from_numpy
        n, layout = len(self.fields), self.config.layout
        if copy:
            arrays = [a.copy() for a in arrays]
            self.slots.give_back(slot)
            self.copies += not pin_copy
        else:
            self.slots.lend(holder, slot)
        del holder
        eager = n + 2  # the fields, ``is_first`` and ``valid``; the other flags are made when first read (``Flag``)
        tensors = [from_numpy(a) for a in (arrays if pin_copy else arrays[:eager])]
        first = arrays[n]  # ``is_first``, the first flag: the row's first step is a reset (indexed in numpy: quicker)
        reset = from_numpy(first[0] if layout == "TB" else first[:, 0])
        stream, position, replayed = arrays[eager:]
        del arrays, first
        if pin_copy:
            tensors = [t.pin_memory() for t in tensors]
            reset = tensors[n][0] if layout == "TB" else tensors[n][:, 0]  # a view of the pinned flag
            later: tuple[Any, ...] = tuple(tensors[eager:])
        else:
            later = (Deferred(stream, unread), Deferred(position, unread), Deferred(replayed, unread))
        lookup = self.source_lookup
        source = None if lookup is None else from_numpy(lookup.take(stream))
        data = dict(zip(self.names[:n], tensors[:n], strict=True))
        return Batch.assembled(data, tensors[n], reset, tensors[n + 1], later, epoch, k, layout, source)

    def busy_shares(self, closed: bool, workers: int) -> tuple[float, ...]:
        """Each producer's recent share of time busy (last three seconds)."""
        hist = self.busy
        if len(hist) >= 2:
            recent = [h for h in hist if hist[-1][0] - h[0] <= 3.0] or list(hist)
            (t0, b0), (t1, b1) = (recent[0] if len(recent) > 1 else hist[-2]), hist[-1]
            return tuple(float(x) for x in np.clip((b1 - b0) / max(t1 - t0, 1e-9), 0.0, 1.0))
        return () if closed else tuple(0.0 for _ in range(max(workers, 1)))


class _Failure:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


class ReadyQueue(Generic[T]):
    """The consumer's ``next()`` over ``items``. While the consumer is the slower side a thread advances ``items`` up
    to ``depth`` ahead (calling ``idle()`` while the queue is full: freed slots go to the workers) and ``next()`` takes
    one off a deque without a lock. While the consumer waits anyway (``_SWITCH`` in a row), the thread ends and
    ``next()`` advances ``items`` itself: no hand-over, no second wake-up a batch taken from a worker's core. After
    ``_RESUME`` in a row that were whole before it asked (``waited()``), a thread starts again."""

    def __init__(
        self,
        items: Iterator[T],
        depth: int = 2,
        idle: Callable[[], None] = lambda: None,
        waited: Callable[[], bool] = lambda: False,
    ) -> None:
        self._items, self._depth, self._idle, self._waited = items, depth, idle, waited
        self._queue: deque[object] = deque()
        self._cv = threading.Condition()  # only to sleep while the queue is empty (consumer) or full (thread)
        self._stop = False  # the consumer has gone: the thread ends, and its waits for a batch raise ``Aborted``
        self.parked = False  # the consumer advances ``items`` itself (once the thread, asked to end, has ended)
        self._over = False  # ``items`` is exhausted, failed or aborted
        self._streak = 0  # items in a row that argue for switching
        self.failed = False  # advancing ``items`` raised: the consumer got (or will get) the exception
        self._thread: threading.Thread | None = None
        self._start()

    def _start(self) -> None:
        self.parked = False
        self._thread = threading.Thread(target=self._run, name="streamcli-ready", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not (self.parked or self._stop or self._over):
            item = self._advance()
            if item is None or not self._put(item):
                return

    def _advance(self, catch: type[BaseException] = BaseException) -> object | None:
        """The next item, ``_DONE`` or a ``_Failure`` (of a ``catch``); None if the loader aborted."""
        try:
            return next(self._items)
        except StopIteration:
            self._over = True
            return _DONE
        except Aborted:  # stopped while waiting for a batch
            self._over = True
            return None
        except catch as exc:  # every failure reaches the consumer
            self._over = True
            return _Failure(exc)
        except BaseException:
            self._over = True
            raise

    def _put(self, item: object) -> bool:
        wait = 5e-4
        while not self._stop:
            with self._cv:
                if len(self._queue) < self._depth:
                    self._queue.append(item)
                    self._cv.notify_all()
                    return True
                self._cv.wait(wait)  # woken when the consumer takes one
            self._idle()
            wait = min(2 * wait, 0.02)  # a consumer that pauses (to evaluate, say) costs next to nothing
        return False

    def stopping(self) -> bool:
        """Whether the consumer has gone (a wait for a batch then raises ``Aborted``)."""
        return self._stop

    def __iter__(self) -> ReadyQueue[T]:
        return self

    def __next__(self) -> T:
        item = self._make() if self.parked else self._take()
        if item is _DONE:
            self._queue.appendleft(_DONE)  # stay exhausted
            raise StopIteration
        if isinstance(item, _Failure):
            self.failed = True
            raise item.exc
        return item  # type: ignore[return-value]

    def _take(self) -> object:
        """The next item off the queue, waited for if need be."""
        waited = False
        while not self._queue:
            with self._cv:
                if not self._queue:
                    if self._stop or self._thread is None or not self._thread.is_alive():
                        raise LoaderUsageError(_STOPPED)
                    self._cv.wait(0.1)  # woken when the thread adds one
                    waited = True
        item = self._queue.popleft()  # (only this thread takes)
        if len(self._queue) == self._depth - 1:  # it was full: the thread may be waiting for room
            with self._cv:
                self._cv.notify_all()
        self._streak = self._streak + 1 if waited else 0
        if self._streak >= _SWITCH and item is not _DONE:
            self._streak, self.parked = 0, True  # the thread queues the item it is making, then ends
        return item

    def _make(self) -> object:
        """Parked: advance ``items`` here, once the thread has ended; start it again once the producers are ahead."""
        if self._thread is not None:
            self._thread.join()  # (its last item is queued, or it failed)
            self._thread = None
        if self._queue:  # queued by the thread before it ended
            return self._queue.popleft()
        if self._over:
            raise LoaderUsageError(_STOPPED)
        item = self._advance(Exception)  # a KeyboardInterrupt is the consumer's own: raised as it is
        if item is None:
            raise LoaderUsageError(_STOPPED)
        self._streak = 0 if self._waited() else self._streak + 1
        if self._streak >= _RESUME and not self._over:
            self._streak = 0
            self._start()
        return item

    def stop(self) -> None:
        """End the thread and close the iterator it was running; safe to call twice."""
        self._stop = True
        with self._cv:
            self._queue.clear()
            self._cv.notify_all()  # unblock a put
        thread = self._thread
        if thread is not None:
            thread.join(timeout=5.0)
        if thread is None or not thread.is_alive():
            close = getattr(self._items, "close", None)
            if callable(close):
                with contextlib.suppress(Exception):
                    close()
