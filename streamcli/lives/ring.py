"""Where a batch is carried: one shared-memory segment holding S batch slots plus a small control block.

The loader (main process) creates the segment (``lives.segment``: its ownership and lifetime across processes).
Workers attach by name and write their rows straight into slots, so no array is ever pickled. Layout, all 64-byte
aligned:

- the control block (``lives.control``): the shared state through which the loader and the producers
  coordinate (hand-out counter, rows, claims, tickets, the producers' counters and the items' costs);
- per slot: every field as ``(T, B, *shape)`` (or ``(B, T, *shape)`` for layout "BT"), the per-step flags,
  a summary per row (tickets taken, failed claims, holds a live original stream, valid steps), and every row's
  cursor after the batch (``scheduled.cursor``).
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import IntEnum
from multiprocessing import resource_tracker, shared_memory
from typing import Any

import numpy as np

from streamcli import signals
from streamcli.batch import FLAG_DTYPES
from streamcli.errors import SharedMemoryError
from streamcli.lives import control
from streamcli.lives.control import Control
from streamcli.lives.segment import PREFIX, Segment, back, hold_alive, populate, sweep_stale
from streamcli.scheduled import cursor as _cursor
from streamcli.source import Field


class Summary(IntEnum):
    """The columns of a slot's summary, one record per row: tickets taken in the batch, claims that found no
    stream, whether the row holds a live original stream at the batch's end, and its valid steps."""

    CLAIMS = 0
    DRY = 1
    LIVE = 2
    VALID = 3


SUMMARY = len(Summary)  # the summary's width
_PER_ROW = ("summary", "cursor")  # slot entries that are not (T, B) arrays
_ALIGN = 64
Entry = tuple[int, tuple[int, ...], str]


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
        for name, shape, dt in control.arrays(self.batch_size, self.num_slots, self.num_workers, self.num_streams):
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


class Ring:
    """Numpy views over the segment. ``Ring.create`` owns it; ``Ring.attach`` (workers) only borrows it."""

    def __init__(self, spec: RingSpec, shm: shared_memory.SharedMemory, owner: bool) -> None:
        self.spec, self.shm, self.owner = spec, shm, owner
        self.reserved = spec.num_slots  # slots backed by memory: the owner may back fewer at first (``reserve``)
        self._unlock: Callable[[], Any] | None = None  # undoes page_lock()
        ctl_e, slot_e, self._slot0, self._stride = spec.entries()
        self._slot_entries = slot_e
        self._record_dtypes: dict[tuple[str, ...], np.dtype[Any]] = {}  # the slot as one record (holder_views)
        buf = shm.buf
        self.control = Control(*(_view(buf, *e) for e in ctl_e.values()))  # in ``control.arrays`` order
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
    def create(cls, spec_args: dict[str, Any], reserve: int | None = None) -> Ring:
        """Create the segment and back its control block and first ``reserve`` slots (all by default) with
        memory now; ``Ring.reserve`` backs more of them later. ``SharedMemoryError`` (before anything is made)
        if they do not fit. A signal while the memory is backed and mapped is raised here, with nothing left."""
        sweep_stale()
        name = f"{PREFIX}{os.getpid()}_{secrets.token_hex(4)}"
        spec = RingSpec(name=name, **spec_args)
        n = spec.num_slots if reserve is None else min(reserve, spec.num_slots)
        check_room(spec, n)
        _, _, slot0, stride = spec.entries()
        # The tracker first: starting it unblocks SIGINT and SIGTERM whatever the caller blocked, so a signal there
        # must come before the segment exists, not in the middle of making it.
        resource_tracker.ensure_running()
        shm: Segment | None = None
        try:
            with signals.held():
                shm = Segment(name=name, create=True, size=spec.nbytes)
            hold_alive(shm)
            if not back(shm, 0, slot0 + n * stride):
                raise SharedMemoryError(_space_message(spec, n))
            populate(shm, slot0 + n * stride)
            ring = cls(spec, shm, owner=True)
        except BaseException:
            if shm is not None:
                shm.close()
                shm.unlink()
            raise
        ring.reserved = n
        ring.control.clear()
        return ring

    def reserve(self, n: int) -> bool:
        """Back slots up to ``n`` with memory (the owner only), so that writing them cannot SIGBUS. Returns False,
        changing nothing, if shared memory has no room for them now."""
        if n <= self.reserved:
            return True
        start = self._slot0 + self.reserved * self._stride
        if not back(self.shm, start, (n - self.reserved) * self._stride):
            return False
        self.reserved = n
        return True

    @classmethod
    def attach(cls, spec: RingSpec) -> Ring:
        """Borrow the loader's segment (a worker) and map all of it now (``segment.populate``); the mapping stops
        early if the loader closes meanwhile (a large ring takes a while), which the control block then says."""
        # Spawned workers share the loader's resource tracker, so attaching re-registers the same name (a
        # no-op); the tracker still unlinks the segment if the whole process tree dies without cleaning up.
        shm = Segment(name=spec.name)
        hold_alive(shm)  # while a worker lives the segment is in use, even if its loader is gone
        ring = cls(spec, shm, owner=False)
        populate(shm, None, lambda: ring.control.generation == control.CLOSING)
        return ring

    def holder(self, slot: int) -> Any:
        """A fresh buffer object over one slot. Arrays made from it keep it alive; when the last of them is
        garbage-collected, a weak reference to it tells the loader the slot can be reused."""
        base = self._slot0 + slot * self._stride
        return (ctypes.c_ubyte * self._stride).from_buffer(self.shm.buf, base)  # type: ignore[arg-type]

    def holder_views(self, holder: Any, names: Sequence[str]) -> list[np.ndarray]:
        """Arrays over ``holder``, in the order of ``names``; each keeps it alive. The slot is read once as one
        record of a structured dtype whose fields are the arrays: one buffer export in all, rather than one per
        array (half the time)."""
        key = tuple(names)
        dtype = self._record_dtypes.get(key)
        if dtype is None:
            e = self._slot_entries
            dtype = np.dtype({"names": list(key), "formats": [(np.dtype(e[n][2]), e[n][1]) for n in key],
                              "offsets": [e[n][0] for n in key], "itemsize": self._stride})  # fmt: skip
            self._record_dtypes[key] = dtype
        record = np.frombuffer(holder, dtype)
        return [record[n][0] for n in key]

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


PREFETCH_MIN, PREFETCH_MAX = 4, 16
_CACHE_DEFAULT = 32 * 2**20  # where the last-level cache cannot be read


def default_prefetch(
    fields: Sequence[Field], batch_size: int, time_steps: int, layout: str, workers: int, extra: int = 4,
    most: int = PREFETCH_MAX, budget: int | None = None,
) -> int:  # fmt: skip
    """Batches workers may write ahead by default: as many slots as fit in ``budget`` (the CPU's last-level cache)
    and in a quarter of the free shared memory, with the loader's ``extra`` slots beyond the window, between 4 and
    ``most`` (16); 4 in-process, where nothing runs ahead. Every slot is written once a lap: a ring that fits in
    the cache keeps the producers' copies out of main memory, and a deeper window than that only pays while
    streams cost unevenly (rows of cheap streams fill later batches while an expensive one finishes this one)."""
    if not workers:
        return PREFETCH_MIN
    spec = RingSpec(name="", fields=tuple(fields), batch_size=batch_size, time_steps=time_steps, num_slots=1,
                    num_workers=workers, num_streams=1, layout=layout)  # fmt: skip
    fit = int(min(cache_bytes() if budget is None else budget, room()[0] / 4) // spec.entries()[3])
    return max(PREFETCH_MIN, min(most, fit - extra))


def cache_bytes(root: str = "/sys/devices/system/cpu/cpu0/cache") -> int:
    """The size of this CPU's last-level cache (Linux sysfs), or 32 MiB where it cannot be read."""
    best: tuple[int, int] | None = None
    try:
        for index in os.listdir(root):
            if index.startswith("index"):
                with open(os.path.join(root, index, "level")) as f, open(os.path.join(root, index, "size")) as g:
                    level, size = int(f.read()), g.read().strip()
                n = int(size[:-1]) * {"K": 2**10, "M": 2**20, "G": 2**30}[size[-1]] if size[-1] in "KMG" else int(size)
                best = max(best or (level, n), (level, n))
    except (OSError, ValueError, KeyError):
        return _CACHE_DEFAULT
    return best[1] if best else _CACHE_DEFAULT


def _shm_free(root: str = "/dev/shm") -> float:
    """Bytes free for shared memory (infinite where there is no ``/dev/shm`` to ask, as on macOS)."""
    try:
        st = os.statvfs(root)
    except OSError:
        return math.inf
    return float(st.f_bavail * st.f_frsize)


def memory_available(meminfo: str = "/proc/meminfo", cgroup: str = "/sys/fs/cgroup") -> float:
    """Bytes of memory this process may still take: the kernel's ``MemAvailable``, and within a cgroup (v2) with
    a limit, what is left of it; infinite where neither can be read."""
    best = math.inf
    with contextlib.suppress(OSError, ValueError):
        with open(meminfo) as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    best = int(line.split()[1]) * 1024.0
                    break
    with contextlib.suppress(OSError, ValueError):
        with open(os.path.join(cgroup, "memory.max")) as f:
            limit = f.read().strip()
        if limit != "max":
            with open(os.path.join(cgroup, "memory.current")) as f:
                best = min(best, float(int(limit) - int(f.read().strip())))
    return best


def room() -> tuple[float, str]:
    """The most bytes a ring may take, and where the limit comes from: the free shared memory, and half of the
    memory available, as pages of ``/dev/shm`` are memory: a ring of more would leave the consumer, its model and
    every other process too little (a typo in ``time_steps`` must not take the machine)."""
    shm = _shm_free()
    half = memory_available() / 2
    if half < shm:
        return half, f"half of the {2 * half / 2**20:.0f} MiB of memory available is {half / 2**20:.0f} MiB"
    if shm < math.inf:
        return shm, f"/dev/shm has {shm / 2**20:.0f} MiB free"
    return shm, "there is not that much free"


def check_room(spec: RingSpec, slots: int | None = None) -> None:
    """``SharedMemoryError`` naming the sizes and the fix if ``slots`` slots of ``spec`` (all by default) and its
    control block do not fit (``room``): asked before anything is allocated."""
    n = spec.num_slots if slots is None else slots
    _, _, slot0, stride = spec.entries()
    if slot0 + n * stride > room()[0]:
        raise SharedMemoryError(_space_message(spec, n))


def _space_message(spec: RingSpec, slots: int) -> str:
    _, _, slot0, stride = spec.entries()
    need = slot0 + slots * stride
    limit, there = room()
    fits = _fitting_time_steps(spec, slots, limit)
    hint = f" (time_steps={fits} fits)" if fits else ""
    more = "give the machine more (docker run --shm-size=2g)" if need > _shm_free() else "free memory for it"
    return (
        f"the loader needs {need / 2**20:.0f} MiB of shared memory ({slots} batch slots of {stride / 2**20:.1f} MiB: "
        f"batch_size={spec.batch_size} x time_steps={spec.time_steps} steps) but {there}; lower prefetch=, "
        f"batch_size or time_steps{hint}, or {more}"
    )


def _fitting_time_steps(spec: RingSpec, slots: int, limit: float) -> int:
    """The largest ``time_steps`` below the spec's whose ring fits in ``limit`` bytes (0: none does)."""
    lo, hi = 0, spec.time_steps - 1
    while lo < hi:  # the ring's size grows with time_steps
        mid = (lo + hi + 1) // 2
        _, _, slot0, stride = replace(spec, time_steps=mid).entries()
        lo, hi = (mid, hi) if slot0 + slots * stride <= limit else (lo, mid - 1)
    return lo
