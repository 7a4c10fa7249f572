"""Where a batch is carried: one shared-memory segment (``shared.segment``) holding a small control block
(``shared.control``) and S batch slots laid out by ``sizing.RingSpec``, made and owned by the loader; workers
attach by name and write their rows straight into the slots."""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import secrets
from collections.abc import Callable, Sequence
from multiprocessing import resource_tracker, shared_memory
from typing import Any

import numpy as np

from streamcli import signals
from streamcli.errors import SharedMemoryError
from streamcli.shared import control
from streamcli.shared.control import Control
from streamcli.shared.segment import PREFIX, Segment, back, hold_alive, populate, sweep_stale
from streamcli.shared.sizing import PER_ROW, RingSpec, check_room, space_message


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
        self._slot_type = ctypes.c_ubyte * self._stride  # made once: making an array type costs more than a holder
        self._record_dtypes: dict[tuple[str, ...], np.dtype[Any]] = {}  # the slot as one record (holder_views)
        buf = shm.buf
        self.control = Control(*(_view(buf, *e) for e in ctl_e.values()))  # in ``control.arrays`` order
        # Slot views in physical layout, and the same memory seen time-major (T, B) for producers.
        self.slots: list[dict[str, np.ndarray]] = []
        self.tb_slots: list[dict[str, np.ndarray]] = []
        for s in range(spec.num_slots):
            base = self._slot0 + s * self._stride
            views = {name: _view(buf, base + o, shape, dt) for name, (o, shape, dt) in slot_e.items()}
            self.slots.append(views)
            if spec.layout == "TB":
                self.tb_slots.append(views)
            else:
                self.tb_slots.append({k: v if k in PER_ROW else v.swapaxes(0, 1) for k, v in views.items()})

    @classmethod
    def create(cls, spec_args: dict[str, Any], reserve: int | None = None) -> Ring:
        """Create the segment, its control block and first ``reserve`` slots (all by default) backed with memory;
        ``SharedMemoryError`` before anything is made if they do not fit. A signal meanwhile leaves nothing."""
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
                raise SharedMemoryError(space_message(spec, n))
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
        """Back slots up to ``n`` with memory (the owner only); False, changing nothing, if there is no room now."""
        if n <= self.reserved:
            return True
        start = self._slot0 + self.reserved * self._stride
        if not back(self.shm, start, (n - self.reserved) * self._stride):
            return False
        self.reserved = n
        return True

    @classmethod
    def attach(cls, spec: RingSpec) -> Ring:
        """Borrow the loader's segment (a worker) and map all of it now, unless the loader closes meanwhile. Spawned
        workers share the loader's resource tracker: attaching re-registers the same name, a no-op."""
        shm = Segment(name=spec.name)
        hold_alive(shm)  # while a worker lives the segment is in use, even if its loader is gone
        ring = cls(spec, shm, owner=False)
        populate(shm, None, lambda: ring.control.generation == control.CLOSING)
        return ring

    def holder(self, slot: int) -> Any:
        """A fresh buffer object over one slot, which the arrays made from it keep alive (``shared.slots``)."""
        base = self._slot0 + slot * self._stride
        return self._slot_type.from_buffer(self.shm.buf, base)  # type: ignore[arg-type]

    def holder_views(self, holder: Any, names: Sequence[str]) -> list[np.ndarray]:
        """Arrays over ``holder``, in the order of ``names``, read as the fields of one record: one buffer export in
        all, rather than one per array."""
        key = tuple(names)
        dtype = self._record_dtypes.get(key)
        if dtype is None:
            e = self._slot_entries
            dtype = np.dtype(
                {
                    "names": list(key),
                    "formats": [(np.dtype(e[n][2]), e[n][1]) for n in key],
                    "offsets": [e[n][0] for n in key],
                    "itemsize": self._stride,
                }
            )
            self._record_dtypes[key] = dtype
        record = np.frombuffer(holder, dtype).reshape(())  # 0-d: a field is the array itself, one view each
        return [record[n] for n in key]

    def page_lock(self, torch: Any) -> bool:
        """Register the whole segment with CUDA as page-locked memory, so every batch is a pinned view; False
        (changing nothing) if CUDA refuses."""
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
        """Unmap (left to the garbage collector while the consumer holds views); the owner also unlinks. Idempotent."""
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
