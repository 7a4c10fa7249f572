"""A ring's layout (``RingSpec``) and how large it may be: the memory it may take, the check before it is made, and
its default depth. Plain arithmetic on a picklable spec and questions to the machine (sysfs, ``/dev/shm``,
``/proc/meminfo``, the cgroup): a worker computes the same offsets, and the loader checks a ring's size before it
imports torch or makes anything."""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from streamcli.batch import FLAG_DTYPES
from streamcli.config import LoaderConfig
from streamcli.errors import SharedMemoryError
from streamcli.scheduled import cursor
from streamcli.shared import control
from streamcli.source import Field

# Slot entries that are not (T, B) arrays: a row's tickets taken, its cursor after the batch, and who wrote it.
PER_ROW = ("claims", "cursor", "writer")
Entry = tuple[int, tuple[int, ...], str]  # (offset, shape, dtype)


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
    global_rows: int = 0  # the rows of the global batch where ranks share one schedule (0: ``batch_size``)

    def entries(self) -> tuple[dict[str, Entry], dict[str, Entry], int, int]:
        """(control entries, per-slot entries relative to the slot's start, first slot's offset, slot stride),
        every entry 64-byte aligned."""
        off = 0

        def take(nbytes: int) -> int:
            nonlocal off
            start = off
            off += -(-max(nbytes, 1) // 64) * 64
            return start

        ctl = {
            name: (take(math.prod(shape) * np.dtype(dt).itemsize), shape, dt)
            for name, shape, dt in control.arrays(
                self.batch_size, self.num_slots, self.num_workers, self.num_streams, self.global_rows
            )
        }
        slot0 = off
        T, B = self.time_steps, self.batch_size
        tb = (T, B) if self.layout == "TB" else (B, T)
        slot: dict[str, Entry] = {}
        for f in self.fields:
            slot[f.name] = (take(T * B * f.nbytes) - slot0, (*tb, *f.shape), f.dtype)
        for name, dt in FLAG_DTYPES.items():
            slot[name] = (take(T * B * np.dtype(dt).itemsize) - slot0, tb, dt)
        slot["claims"] = (take(B * 8) - slot0, (B,), "<i8")
        slot["cursor"] = (take(B * cursor.WIDTH * 8) - slot0, (B, cursor.WIDTH), "<i8")
        slot["writer"] = (take(B * 2) - slot0, (B,), "<i2")  # under balance: the producer that wrote each row
        return ctl, slot, slot0, off - slot0

    @property
    def nbytes(self) -> int:
        _, _, slot0, stride = self.entries()
        return slot0 + stride * self.num_slots


PREFETCH_MIN, PREFETCH_MAX = 4, 16
_CACHE_DEFAULT = 32 * 2**20  # where the last-level cache cannot be read


def default_prefetch(
    fields: Sequence[Field],
    batch_size: int,
    time_steps: int,
    layout: str,
    workers: int,
    extra: int = 4,
) -> int:
    """Batches workers may write ahead by default: as many slots as fit, with the loader's ``extra`` beyond the
    window, in the CPU's last-level cache and a quarter of the free shared memory, between 4 and 16; 4 in process.
    A ring that fits in the cache keeps the producers' copies out of main memory."""
    if not workers:
        return PREFETCH_MIN
    stride = RingSpec("", tuple(fields), batch_size, time_steps, 1, workers, 1, layout).entries()[3]
    fit = int(min(cache_bytes(), room()[0] / 4) // stride)
    return max(PREFETCH_MIN, min(PREFETCH_MAX, fit - extra))


def loader_ring(
    fields: Sequence[Field], config: LoaderConfig, prefetch: int | None, extra: int, num_items: int
) -> tuple[int, dict[str, Any]]:
    """A loader's prefetch (``prefetch``, else ``default_prefetch``) and its ring's arguments but the name and the
    streams' count (``num_items`` stands in for it in the check: it only sizes the control block, and the ring
    checks itself again). ``SharedMemoryError`` at once if that ring does not fit."""
    workers = config.num_workers
    if prefetch is None:
        prefetch = default_prefetch(fields, config.batch_size, config.time_steps, config.layout, workers, extra)
    args: dict[str, Any] = dict(
        fields=tuple(fields),
        batch_size=config.batch_size,
        time_steps=config.time_steps,
        num_slots=prefetch + extra,
        num_workers=max(workers, 1),
        layout=config.layout,
        global_rows=config.batch_size * (config.world_size or 1),
    )
    check_room(RingSpec(name="", num_streams=num_items, **args))
    return prefetch, args


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
    """Bytes of memory this process may still take: ``MemAvailable``, or less within a cgroup (v2) with a limit."""
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
    """The most bytes a ring may take, and why: the free shared memory, and half of the memory available (pages of
    ``/dev/shm`` are memory: a typo in ``time_steps`` must not take the machine)."""
    shm = _shm_free()
    half = memory_available() / 2
    if half < shm:
        return half, f"half of the {2 * half / 2**20:.0f} MiB of memory available is {half / 2**20:.0f} MiB"
    if shm < math.inf:
        return shm, f"/dev/shm has {shm / 2**20:.0f} MiB free"
    return shm, "there is not that much free"


def check_room(spec: RingSpec, slots: int | None = None) -> None:
    """``SharedMemoryError`` naming the sizes and the fix if ``slots`` slots of ``spec`` (all by default) and its
    control block do not fit (``room``)."""
    n = spec.num_slots if slots is None else slots
    _, _, slot0, stride = spec.entries()
    if slot0 + n * stride > room()[0]:
        raise SharedMemoryError(space_message(spec, n))


def space_message(spec: RingSpec, slots: int) -> str:
    _, _, slot0, stride = spec.entries()
    need = slot0 + slots * stride
    limit, there = room()
    lo, hi = 0, spec.time_steps - 1  # the largest time_steps below the spec's whose ring fits (0: none does)
    while lo < hi:  # the ring's size grows with time_steps
        mid = (lo + hi + 1) // 2
        _, _, start, size = replace(spec, time_steps=mid).entries()
        lo, hi = (mid, hi) if start + slots * size <= limit else (lo, mid - 1)
    hint = f" (time_steps={lo} fits)" if lo else ""
    more = "give the machine more (docker run --shm-size=2g)" if need > _shm_free() else "free memory for it"
    return (
        f"the loader needs {need / 2**20:.0f} MiB of shared memory ({slots} batch slots of {stride / 2**20:.1f} MiB: "
        f"batch_size={spec.batch_size} x time_steps={spec.time_steps} steps) but {there}; lower prefetch=, "
        f"batch_size or time_steps{hint}, or {more}"
    )
