"""Where everything sits in the ring's segment: ``RingSpec`` computes the layout.

Separate from ``ring`` because the layout is plain arithmetic on a picklable spec: the worker computes the same
offsets from it, and ``sizing`` sizes a ring from it before any segment exists. All entries are 64-byte aligned.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from streamcli.batch import FLAG_DTYPES
from streamcli.scheduled import cursor as _cursor
from streamcli.shared import control
from streamcli.source import Field

# Slot entries that are not (T, B) arrays: a row's tickets taken, its cursor after the batch, and who wrote it.
PER_ROW = ("claims", "cursor", "writer")
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
    global_rows: int = 0  # the rows of the global batch where ranks share one schedule (0: ``batch_size``)

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
        for name, shape, dt in control.arrays(
            self.batch_size, self.num_slots, self.num_workers, self.num_streams, self.global_rows
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
        slot["claims"] = (take(B * 8) - slot0, (B,), "<i8")
        slot["cursor"] = (take(B * _cursor.WIDTH * 8) - slot0, (B, _cursor.WIDTH), "<i8")
        slot["writer"] = (take(B * 2) - slot0, (B,), "<i2")  # under balance: the producer that wrote each row
        return ctl, slot, slot0, off - slot0

    @property
    def nbytes(self) -> int:
        _, _, slot0, stride = self.entries()
        return slot0 + stride * self.num_slots
