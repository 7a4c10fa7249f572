"""A named int64 in shared memory (``Int64``) and the block that holds such values (``Values``).

Separate from ``layout``, which names the control block's values: this module knows no names, only how a
value by name reads and writes one int64 of a shared array, so that code says ``values.handed = k + 1`` rather
than indexing ``ctl`` with a column constant.
"""

from __future__ import annotations

from typing import overload

import numpy as np


class Values:
    """A block of int64 values in shared memory, each read and written by name through an ``Int64`` of the
    subclass. Reading gives a Python int (a memoryview's item: no numpy scalar on the hot path)."""

    __slots__ = ("_items",)
    SIZE = 0  # the values a subclass names: the length of its array

    def __init__(self, array: np.ndarray) -> None:
        if array.shape != (self.SIZE,) or array.dtype != np.int64:
            raise ValueError(f"{type(self).__name__} needs int64[{self.SIZE}], not {array.dtype}{list(array.shape)}")
        # "q" is int64 on every platform; the view shares the array's memory (and keeps it alive).
        self._items = array.data.cast("B").cast("q")


class Int64:
    """One value of a ``Values`` block, at ``index``: ``block.name`` reads it, ``block.name = v`` writes it (one
    aligned 8-byte store, as numpy's). An increment (``+=``) reads and then writes: hold the lock where two
    processes may increment the same value."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    @overload
    def __get__(self, block: None, owner: type[Values]) -> Int64: ...
    @overload
    def __get__(self, block: Values, owner: type[Values]) -> int: ...
    def __get__(self, block: Values | None, owner: type[Values]) -> int | Int64:
        if block is None:
            return self
        value: int = block._items[self.index]
        return value

    def __set__(self, block: Values, value: int) -> None:
        block._items[self.index] = value
