"""Where a batch is carried: one shared-memory segment holding S batch slots plus a small control block.

The loader (main process) creates the segment and is its only owner: it alone unlinks it. Workers attach by
name and write their rows straight into slots, so no array is ever pickled. Layout, all 64-byte aligned:

- control: ``ctl`` int64[10] (generation, tickets handed out, the epoch's first batch, its number of streams,
  batches handed out, the generation whose tables are ready, the batch the loader is blocked on, rows given up
  mid-stream and not yet taken, rows moved mid-stream in all, whether the items' costs are uneven),
  ``slot_of`` int64[S] (the slot of batch k, at ``k % S``), ``rows`` int64[B, 3] (per row: its producer, or -1
  while it waits for a claim, or -2-w while producer w has given it up mid-stream; the canonical key of its next
  possible claim; the batches it has completed), ``held`` int64[B, 4] (the cursor of a row without a producer),
  ``wstat`` float64[W, 8] (per producer: busy seconds, steps, stream and position it is reading, idle, messages
  sent, what its rows cost per batch, pieces of work done early for heavy streams),
  ``order`` int64[N, 4] (this epoch's streams in ticket order, as (item, first step, open-ended, promised
  length): a segment is a stream of its own, see ``engine.epoch``), ``start`` int64[B, 4] (the row cursors an
  epoch starts from: fresh, or those of a resumed state), ``cost`` float64[I] (per item, the seconds per step
  producers measured reading it, 0 until then; kept across epochs);
- per slot: every field as ``(T, B, *shape)`` (or ``(B, T, *shape)`` for layout "BT"), the per-step flags,
  a summary per row (tickets taken, failed claims, holds a live original stream, valid steps), and every row's
  cursor after the batch (``engine.cursor``).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import math
import os
import secrets
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing import shared_memory
from typing import Any

import numpy as np

from streamcli.batch import FLAG_DTYPES
from streamcli.engine import cursor as _cursor
from streamcli.errors import SharedMemoryError
from streamcli.source import Field

_GEN, _TICKETS, _FIRST_BATCH, _NUM_STREAMS, _HANDED, _READY, _AWAITED, _GIVEN, _MOVED, _UNEVEN = range(10)  # ctl
_BUSY, _STEPS, _CUR_STREAM, _CUR_POS, _IDLE, _SENT, _LOAD, _HEAVY = range(8)  # columns of wstat
OWNER, CLAIM, WRITTEN = 0, 1, 2  # columns of rows
NO_OWNER = -1  # a row waiting for its next claim: any producer may take it
NEVER = 1 << 62  # the claim key of a row that will not claim again this epoch
_SMALL = 64  # up to this many rows, a per-row scan is cheaper as a Python list than as a numpy call
CLAIMS, DRY, LIVE, VALID = 0, 1, 2, 3  # columns of a slot's summary: one record per row
SUMMARY = 4  # the summary's width
_PER_ROW = ("summary", "cursor")  # slot entries that are not (T, B) arrays
_ALIGN = 64
PREFIX = "streamcli_"  # segment names: streamcli_<creator pid>_<random>
Entry = tuple[int, tuple[int, ...], str]


def _given_by(w: int) -> int:
    """The owner value of a live row producer ``w`` gave up mid-stream: any other producer may go on with it."""
    return -2 - w


@dataclass(frozen=True)
class RingSpec:
    """Everything needed to compute the layout; picklable, sent to workers."""

    name: str
    fields: tuple[Field, ...]
    batch_size: int
    time_steps: int
    num_slots: int
    num_workers: int  # >= 1 (the in-process producer counts as one)
    num_streams: int  # capacity of the order table: the most streams an epoch can have
    layout: str  # "TB" or "BT"
    num_items: int = 1  # the source's items: the size of the cost table

    def entries(self) -> tuple[dict[str, Entry], dict[str, Entry], int, int]:
        """(control entries, per-slot entries, first slot's offset, slot stride); entry = (offset, shape, dtype),
        with per-slot offsets relative to the slot's start."""
        off = 0

        def take(nbytes: int) -> int:
            nonlocal off
            start = off
            off += -(-max(nbytes, 1) // _ALIGN) * _ALIGN
            return start

        ctl: dict[str, Entry] = {}
        for name, shape, dt in (
            ("ctl", (10,), "<i8"),
            ("slot_of", (self.num_slots,), "<i8"),
            ("rows", (self.batch_size, 3), "<i8"),
            ("held", (self.batch_size, _cursor.WIDTH), "<i8"),
            ("wstat", (self.num_workers, 8), "<f8"),
            ("order", (self.num_streams, 4), "<i8"),
            ("start", (self.batch_size, _cursor.WIDTH), "<i8"),
            ("cost", (max(self.num_items, 1),), "<f8"),
        ):
            ctl[name] = (take(int(np.prod(shape)) * np.dtype(dt).itemsize), shape, dt)
        slot0 = off
        T, B = self.time_steps, self.batch_size
        tb = (T, B) if self.layout == "TB" else (B, T)
        slot: dict[str, Entry] = {}
        for f in self.fields:
            slot[f.name] = (take(T * B * f.nbytes) - slot0, (*tb, *f.shape), f.dtype)
        for name, dt in FLAG_DTYPES.items():
            slot[name] = (take(T * B * np.dtype(dt).itemsize) - slot0, tb, dt)
        slot["summary"] = (take(B * SUMMARY * 8) - slot0, (B, SUMMARY), "<i8")
        slot["cursor"] = (take(B * _cursor.WIDTH * 8) - slot0, (B, _cursor.WIDTH), "<i8")
        return ctl, slot, slot0, off - slot0

    @property
    def nbytes(self) -> int:
        _, _, slot0, stride = self.entries()
        return slot0 + stride * self.num_slots


def _view(buf: Any, offset: int, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    count = math.prod(shape)
    return np.frombuffer(buf, dtype=dtype, count=count, offset=offset).reshape(shape)


class Control:
    """The ring's control block, and the only code that knows its layout: the loader and the producers call
    these methods, never index it.

    Rows are not tied to producers. A row whose stream ends is released (owner -1, its cursor in ``held``) and
    whichever producer is free takes it for the next claim: that is how work moves to idle workers. Tickets
    stay in canonical order through one rule: a claim at key K is made only when K is the smallest ``claim``
    of all rows, i.e. when every row has decided (by reading ahead) that it takes no ticket before K. With
    planned claims (``engine.claims``: every length known) each waiting row's key and tickets are fixed in
    advance, and any row whose key is handed out may claim. Values
    in ``claim`` and ``written`` only grow within an epoch, and each row has one writer at a time (its owner,
    changed only under the lock), so readers need no lock: a stale read only makes them wait longer.
    """

    def __init__(self, ctl: np.ndarray, slot_of: np.ndarray, rows: np.ndarray, held: np.ndarray,
                 wstat: np.ndarray, order: np.ndarray, start: np.ndarray, cost: np.ndarray):  # fmt: skip
        self._ctl, self._slot_of, self._rows, self._held = ctl, slot_of, rows, held
        self._wstat, self._order, self._start, self._cost = wstat, order, start, cost
        self._owner, self._claim, self._written = rows[:, OWNER], rows[:, CLAIM], rows[:, WRITTEN]

    def clear(self) -> None:
        for a in (self._ctl, self._slot_of, self._rows, self._held, self._wstat, self._order, self._start,
                  self._cost):  # fmt: skip
            a[...] = 0
        self._wstat[:, _CUR_STREAM] = -1  # nothing read yet
        self._ctl[_READY] = -1
        self._ctl[_AWAITED] = -1

    def release(self) -> None:
        """Drop the views (the segment is about to be unmapped)."""
        empty = np.zeros(0)
        self._ctl = self._slot_of = self._rows = self._held = self._wstat = self._order = self._start = empty
        self._cost = empty
        self._owner = self._claim = self._written = empty

    # -- generation: a new epoch (or closing) makes producers drop what they are doing
    @property
    def generation(self) -> int:
        return int(self._ctl[_GEN])

    def set_generation(self, gen: int) -> None:
        self._ctl[_GEN] = gen

    # -- an epoch's set-up, written by the loader
    def stage(self, cursors: np.ndarray, first_batch: int) -> None:
        """The row cursors the next epoch starts from, and the batch it starts at."""
        self._start[:] = cursors
        self._ctl[_FIRST_BATCH] = first_batch

    def set_streams(self, table: np.ndarray, tickets: int) -> None:
        """The epoch's streams in ticket order and the tickets already taken."""
        self._order[: len(table)] = table
        self._ctl[_NUM_STREAMS] = len(table)
        self._ctl[_TICKETS] = tickets

    def set_rows(self, owner: np.ndarray, claim: np.ndarray, written: np.ndarray, held: np.ndarray) -> None:
        self._owner[:], self._claim[:], self._written[:], self._held[:] = owner, claim, written, held
        self._ctl[_GIVEN] = 0

    def open_epoch(self, gen: int, first_batch: int) -> None:
        """The tables of generation ``gen`` are written: producers may start (nothing is handed out yet)."""
        self._ctl[_HANDED] = first_batch
        self._ctl[_READY] = gen

    # -- the hand-out counter: batch k may be written once ``handed > k``
    def hand_out(self, k: int, slot: int) -> None:
        self._slot_of[k % len(self._slot_of)] = slot
        self._ctl[_HANDED] = k + 1  # after the slot: a producer that sees the count sees the slot

    @property
    def handed(self) -> int:
        return int(self._ctl[_HANDED])

    def slot_of(self, k: int) -> int:
        return int(self._slot_of[k % len(self._slot_of)])

    def ready(self, gen: int) -> bool:
        return int(self._ctl[_READY]) == gen

    # -- read by producers
    @property
    def first_batch(self) -> int:
        return int(self._ctl[_FIRST_BATCH])

    def cursors(self, lo: int, hi: int) -> np.ndarray:
        return self._start[lo:hi]

    @property
    def num_streams(self) -> int:
        return int(self._ctl[_NUM_STREAMS])

    @property
    def tickets(self) -> int:
        """Tickets taken: those before the epoch's start until producers take more (unplanned claims)."""
        return int(self._ctl[_TICKETS])

    def order_table(self) -> np.ndarray:
        """The epoch's streams in ticket order (a copy): (item, first step, open-ended, promised length)."""
        return self._order[: int(self._ctl[_NUM_STREAMS])].copy()

    def take_ticket(self) -> int:
        """The next ticket (hold the lock): the epoch's tickets are handed out in canonical order."""
        ticket = int(self._ctl[_TICKETS])
        self._ctl[_TICKETS] = ticket + 1
        return ticket

    def stream(self, ticket: int) -> tuple[int, int, bool, int]:
        """(item, first step, open-ended, promised length or -1) of the stream ticket ``ticket`` names."""
        item, start, open_ended, length = self._order[ticket % int(self._ctl[_NUM_STREAMS])].tolist()
        return item, start, bool(open_ended), length

    # -- rows
    def next_claim(self) -> tuple[int, int]:
        """(row, key) of the earliest undecided claim of all rows; the row may be owned or waiting."""
        b = int(np.argmin(self._claim))
        return b, int(self._claim[b])

    def next_waiting(self) -> tuple[int, int]:
        """(row, key) of the earliest claim of the rows waiting for one; key ``NEVER`` if none waits."""
        owner = self._owner
        if len(owner) <= _SMALL and NO_OWNER not in owner.tolist():  # the usual case, 20 times faster
            return 0, NEVER
        keys = np.where(owner == NO_OWNER, self._claim, NEVER)
        b = int(np.argmin(keys))
        return b, int(keys[b])

    def waiting_below(self, key: int) -> list[tuple[int, int]]:
        """(key, row) of every row waiting for a claim at a key below ``key``, earliest first. Other producers
        may take or release rows meanwhile, so an entry can be stale by the time it is used (``take_row`` says)."""
        claim = self._claim.copy()  # one read: the two columns change under us
        rows = np.flatnonzero((self._owner == NO_OWNER) & (claim < key))
        return sorted(zip(claim[rows].tolist(), rows.tolist(), strict=True))

    def note_cost(self, item: int, per_step: float) -> None:
        """What reading ``item`` costs, in seconds per step, as one producer measured it last."""
        self._cost[item] = per_step

    def item_cost(self, item: int) -> float:
        """Seconds per step of ``item`` as last measured (0.0: never read by any producer of this loader)."""
        return float(self._cost[item])

    def uneven(self, factor: float) -> bool:
        """Whether some item measured costs at least ``factor`` times as much per step as the median item."""
        known = self._cost[self._cost > 0]
        return bool(len(known) > 1 and known.max() >= factor * np.median(known))

    @property
    def costs_uneven(self) -> bool:
        """What the loader last found ``uneven``: producers weigh costs only then (``engine.heavy``)."""
        return bool(self._ctl[_UNEVEN])

    def set_costs_uneven(self, uneven: bool) -> None:
        self._ctl[_UNEVEN] = uneven

    def waiting(self, b: int) -> bool:
        return int(self._owner[b]) == NO_OWNER

    def take_row(self, b: int, w: int, key: int, planned: bool = False) -> np.ndarray | None:
        """Make producer ``w`` the owner of waiting row ``b`` if its claim at ``key`` is still the earliest of
        all, or with ``planned`` claims still due (hold the lock); returns the row's held cursor, or None if
        another producer was first."""
        if int(self._owner[b]) != NO_OWNER or int(self._claim[b]) != key:
            return None
        if not planned and int(self._claim.min()) != key:
            return None
        self._owner[b] = w
        held: np.ndarray = self._held[b].copy()
        return held

    def release_row(self, b: int, claim: int, written: int, cursor: tuple[int, int, int, int]) -> None:
        """Give row ``b`` up until its next claim at key ``claim`` (the owner calls this)."""
        self._held[b] = cursor
        self._written[b] = written
        self._claim[b] = claim
        self._owner[b] = NO_OWNER  # last: a producer that sees the row free sees its cursor and claim

    def give_row(self, b: int, w: int, cursor: tuple[int, int, int, int]) -> None:
        """Producer ``w`` gives live row ``b`` up mid-stream, at a batch boundary (its completed batches say which),
        for an idle producer to go on with (hold the lock). Its claim key stays as announced: the row takes no
        ticket, it only changes hands."""
        self._held[b] = cursor
        self._owner[b] = _given_by(w)  # not NO_OWNER: the row is not waiting for a claim
        self._ctl[_GIVEN] += 1
        self._ctl[_MOVED] += 1

    @property
    def given(self) -> int:
        """Rows given up mid-stream that no producer has taken yet (a cheap check before ``take_given``)."""
        return int(self._ctl[_GIVEN])

    @property
    def moved(self) -> int:
        """Rows moved between producers mid-stream since the loader started."""
        return int(self._ctl[_MOVED])

    def take_given(self, w: int, top: int, own: bool) -> tuple[int, np.ndarray] | None:
        """Make producer ``w`` the owner of the earliest row given up mid-stream whose next batch is below
        ``top`` (hold the lock): (row, its cursor), or None. Rows ``w`` gave up itself only if ``own``: a giver
        takes one back only when it has nothing else to do, never before the idle producer can."""
        owner = self._owner
        given = owner <= _given_by(0)
        if not own:
            given &= owner != _given_by(w)
        rows = np.flatnonzero(given & (self._written < top))
        if not len(rows):
            return None
        b = int(rows[np.argmin(self._written[rows])])
        self._owner[b] = w
        self._ctl[_GIVEN] -= 1
        held: np.ndarray = self._held[b].copy()
        return b, held

    def written_of(self, b: int) -> int:
        return int(self._written[b])

    def promised_length(self, item: int, start: int) -> int:
        """The length that ``length()`` promised for the stream of ``item`` starting at ``start``, or -1."""
        order = self._order[: int(self._ctl[_NUM_STREAMS])]
        at = np.flatnonzero((order[:, 0] == item) & (order[:, 1] == start))
        return int(order[at[0], 3]) if len(at) else -1

    def idle_elsewhere(self, w: int) -> bool:
        """Whether a producer other than ``w`` has nothing to do."""
        idle = self._wstat[:, _IDLE]
        return bool(idle.sum() - idle[w] > 0)

    def set_claim(self, b: int, key: int) -> None:
        self._claim[b] = key

    def set_written(self, rows: int | slice | list[int], batches: int) -> None:
        self._written[rows] = batches

    def await_batch(self, k: int) -> None:
        """The loader is about to block until batch ``k`` is whole (-1: it is not blocked)."""
        self._ctl[_AWAITED] = k

    def wake_due(self) -> bool:
        """Whether the batch the loader is blocked on is whole; the first producer to see it clears the mark and
        wakes the loader (a second wake-up is harmless)."""
        k = int(self._ctl[_AWAITED])
        if k < 0 or self.written_min() <= k:
            return False
        self._ctl[_AWAITED] = -1
        return True

    def written_min(self) -> int:
        """Batches that every row has completed: batch k is whole once this exceeds k."""
        written = self._written
        return min(written.tolist()) if len(written) <= _SMALL else int(np.minimum.reduce(written))

    # -- per-producer counters
    def report(self, w: int, busy: float, steps: int, stream: int, pos: int) -> None:
        """A producer's counters after a piece of work: busy seconds and steps (added), where it is reading."""
        stat = self._wstat[w]
        stat[_BUSY] += busy
        stat[_STEPS] += steps
        stat[_CUR_STREAM], stat[_CUR_POS] = stream, pos

    def set_idle(self, w: int, idle: bool) -> None:
        self._wstat[w, _IDLE] = idle

    def set_load(self, w: int, load: float) -> None:
        """Producer ``w``'s load: the seconds per batch its rows cost it."""
        self._wstat[w, _LOAD] = load

    def lighter_elsewhere(self, w: int) -> bool:
        """Whether another producer is idle or carries less load than ``w`` (then claims are left to it)."""
        stat = self._wstat
        idle, loads = stat[:, _IDLE], stat[:, _LOAD]
        return bool(idle.sum() - idle[w] > 0 or loads.min() < loads[w])

    def sent(self, w: int) -> int:
        """Messages producer ``w`` has sent over its pipe (it counts each just before sending it)."""
        return int(self._wstat[w, _SENT])

    def count_sent(self, w: int) -> None:
        self._wstat[w, _SENT] += 1

    def count_heavy(self, w: int) -> None:
        """Producer ``w`` did a piece of work out of the usual order for a heavy stream (``engine.heavy``)."""
        self._wstat[w, _HEAVY] += 1

    @property
    def heavy_first(self) -> int:
        return int(self._wstat[:, _HEAVY].sum())

    # -- read by the loader
    def busy(self) -> np.ndarray:
        return self._wstat[:, _BUSY].copy()

    def steps(self) -> tuple[int, ...]:
        return tuple(int(x) for x in self._wstat[:, _STEPS])

    def reading(self, w: int) -> tuple[int, int]:
        """(stream, position) producer ``w`` was reading last; stream -1 before any."""
        stat = self._wstat[w]
        return int(stat[_CUR_STREAM]), int(stat[_CUR_POS])


class Ring:
    """Numpy views over the segment. ``Ring.create`` owns it; ``Ring.attach`` (workers) only borrows it."""

    def __init__(self, spec: RingSpec, shm: shared_memory.SharedMemory, owner: bool) -> None:
        self.spec, self.shm, self.owner = spec, shm, owner
        self._unlock: Callable[[], Any] | None = None  # undoes page_lock()
        ctl_e, slot_e, self._slot0, self._stride = spec.entries()
        self._slot_entries = slot_e
        self._record_dtypes: dict[tuple[str, ...], np.dtype[Any]] = {}  # the slot as one record (holder_views)
        buf = shm.buf
        names = ("ctl", "slot_of", "rows", "held", "wstat", "order", "start", "cost")
        self.control = Control(*(_view(buf, *ctl_e[n]) for n in names))
        # Slot views in physical layout, and the same memory seen time-major for producers.
        self.slots: list[dict[str, np.ndarray]] = []
        self.tb_slots: list[dict[str, np.ndarray]] = []
        for s in range(spec.num_slots):
            base = self._slot0 + s * self._stride
            views = {name: _view(buf, base + o, shape, dt) for name, (o, shape, dt) in slot_e.items()}
            self.slots.append(views)
            if spec.layout == "TB":
                self.tb_slots.append(views)
            else:
                self.tb_slots.append({k: v if k in _PER_ROW else v.swapaxes(0, 1) for k, v in views.items()})

    @classmethod
    def create(cls, spec_args: dict[str, Any]) -> Ring:
        sweep_stale()
        name = f"{PREFIX}{os.getpid()}_{secrets.token_hex(4)}"
        spec = RingSpec(name=name, **spec_args)
        if spec.nbytes > _shm_free():
            raise SharedMemoryError(_space_message(spec))
        shm = _Segment(name=name, create=True, size=spec.nbytes)
        try:
            _reserve(shm, spec)
        except BaseException:
            shm.close()
            shm.unlink()
            raise
        ring = cls(spec, shm, owner=True)
        ring.control.clear()
        return ring

    @classmethod
    def attach(cls, spec: RingSpec) -> Ring:
        # Spawned workers share the loader's resource tracker, so attaching re-registers the same name (a
        # no-op); the tracker still unlinks the segment if the whole process tree dies without cleaning up.
        return cls(spec, _Segment(name=spec.name), owner=False)

    def holder(self, slot: int) -> Any:
        """A fresh buffer object over one slot. Arrays made from it keep it alive; when the last of them is
        garbage-collected, a weak reference to it tells the loader the slot can be reused."""
        base = self._slot0 + slot * self._stride
        return (ctypes.c_ubyte * self._stride).from_buffer(self.shm.buf, base)  # type: ignore[arg-type]

    def holder_views(self, holder: Any, names: Sequence[str]) -> dict[str, np.ndarray]:
        """Arrays over ``holder``; each keeps it alive. The slot is read once as one record of a structured dtype
        whose fields are the arrays: one buffer export in all, rather than one per array (half the time)."""
        key = tuple(names)
        dtype = self._record_dtypes.get(key)
        if dtype is None:
            e = self._slot_entries
            dtype = np.dtype({"names": list(key), "formats": [(np.dtype(e[n][2]), e[n][1]) for n in key],
                              "offsets": [e[n][0] for n in key], "itemsize": self._stride})  # fmt: skip
            self._record_dtypes[key] = dtype
        record = np.frombuffer(holder, dtype)
        return {n: record[n][0] for n in key}

    def page_lock(self, torch: Any) -> bool:
        """Register the whole segment with CUDA as page-locked memory, so every batch is a pinned view.

        Returns False (and changes nothing) if CUDA refuses; the loader then pins each batch by copying.
        """
        try:
            buf = (ctypes.c_ubyte * self.spec.nbytes).from_buffer(self.shm.buf)  # type: ignore[arg-type]
            addr = ctypes.addressof(buf)
            del buf
            err = torch.cuda.cudart().cudaHostRegister(addr, self.spec.nbytes, 0)
        except Exception:
            return False
        if int(getattr(err, "value", err)) != 0:
            return False
        self._unlock = lambda: torch.cuda.cudart().cudaHostUnregister(addr)
        return True

    def close(self) -> None:
        """Unmap; the owner also unlinks. Safe to call twice. If the consumer still holds views into a slot,
        unmapping is left to the garbage collector, but the name is unlinked so nothing leaks."""
        unlock, self._unlock = self._unlock, None
        if unlock is not None:
            with contextlib.suppress(Exception):
                unlock()
        self.control.release()
        self.slots, self.tb_slots = [], []
        if self.owner:
            with contextlib.suppress(FileNotFoundError):
                self.shm.unlink()
            self.owner = False
        self.shm.close()


class SegmentLock:
    """An exclusive lock on the segment's own file (``flock``): the kernel drops it when a holder dies, and it
    leaves nothing behind, unlike a named semaphore. Picklable; each process opens its own descriptor."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "_fd": None}

    def __enter__(self) -> None:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR)
        fcntl.flock(self._fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        assert self._fd is not None
        fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def sweep_stale(root: str = "/dev/shm") -> list[str]:
    """Unlink segments whose creating process no longer exists; returns their names.

    A loader whose whole process group is killed at once (a closed terminal's SIGHUP reaches Python's resource
    tracker too) cannot clean up, so the next loader does. Names carry the creator's pid; a live pid, even a
    reused one, is left alone.
    """
    try:
        names = [n for n in os.listdir(root) if n.startswith(PREFIX)]
    except OSError:
        return []
    swept = []
    for name in names:
        try:
            pid = int(name[len(PREFIX) :].split("_")[0])
            os.kill(pid, 0)
        except ValueError:
            continue
        except ProcessLookupError:
            try:
                os.unlink(os.path.join(root, name))
                swept.append(name)
            except OSError:
                pass
        except PermissionError:
            continue  # alive, someone else's
    return swept


def _reserve(shm: shared_memory.SharedMemory, spec: RingSpec) -> None:
    """Back the whole segment with memory now. A shared-memory file is sparse: without this, a full ``/dev/shm``
    (64 MiB in a default Docker container) shows up later as a SIGBUS in whichever process first writes a page
    that cannot be had, a crash with no message. Here it is one clear error before any worker starts."""
    fd = getattr(shm, "_fd", -1)
    if fd < 0 or not hasattr(os, "posix_fallocate"):
        return  # not a POSIX file (or no fallocate): nothing to reserve
    try:
        os.posix_fallocate(fd, 0, spec.nbytes)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.ENOMEM):
            return  # fallocate unsupported here (EOPNOTSUPP, EINVAL): the segment stays sparse, as before
        raise SharedMemoryError(_space_message(spec)) from None


PREFETCH_MIN, PREFETCH_MAX, PREFETCH_BUDGET = 4, 16, 256 * 2**20
DEEP_MAX = 64  # the deepest default window, for streams of uneven cost


def default_prefetch(
    fields: Sequence[Field], batch_size: int, time_steps: int, layout: str, workers: int, extra: int = 4,
    most: int = PREFETCH_MAX,
) -> int:  # fmt: skip
    """Batches workers may write ahead by default: as many slots as fit in ``PREFETCH_BUDGET`` and in a quarter of
    the free shared memory, with the loader's ``extra`` slots beyond the window, between 4 and ``most`` (16); 4
    in-process, where nothing runs ahead. The window matters when streams cost unevenly: rows of cheap streams
    fill later batches while an expensive one finishes this one."""
    if not workers:
        return PREFETCH_MIN
    spec = RingSpec(name="", fields=tuple(fields), batch_size=batch_size, time_steps=time_steps, num_slots=1,
                    num_workers=workers, num_streams=1, layout=layout)  # fmt: skip
    fit = int(min(PREFETCH_BUDGET, _shm_free() / 4) // spec.entries()[3])
    return max(PREFETCH_MIN, min(most, fit - extra))


def _shm_free(root: str = "/dev/shm") -> float:
    """Bytes free for shared memory (infinite where there is no ``/dev/shm`` to ask, as on macOS)."""
    try:
        return shutil.disk_usage(root).free
    except OSError:
        return math.inf


def _space_message(spec: RingSpec) -> str:
    stride = spec.entries()[3]
    free = _shm_free()
    there = f"/dev/shm has {free / 2**20:.0f} MiB free" if free < math.inf else "there is not that much free"
    return (
        f"the loader needs {spec.nbytes / 2**20:.0f} MiB of shared memory ({spec.num_slots} batch slots of "
        f"{stride / 2**20:.1f} MiB) but {there}; lower prefetch=, batch_size or time_steps, or give the machine "
        "more (docker run --shm-size=2g)"
    )


class _Segment(shared_memory.SharedMemory):
    def close(self) -> None:
        try:
            super().close()
        except BufferError:
            pass  # the consumer still holds views into a slot; the mapping is freed with the last of them
