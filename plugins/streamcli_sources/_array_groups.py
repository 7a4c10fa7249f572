"""HDF5 files and Zarr stores as groups of arrays, read in blocks of whole chunks.

Each group (the root included) whose own arrays hold rows is a candidate recording; which of its arrays are fields
is the ``arrays`` source's decision. A dataset is read ``Blocks`` at a time: a block is a run of whole chunks (rows
aligned to the dataset's chunking, about ``_BLOCK_BYTES``), so a slice of ``T`` rows decompresses each chunk once
however many batches read it. Blocks are kept in one per-process cache bounded in bytes; file handles are opened
by each window that reads them and closed with it (never pickled: the source holds paths only).
"""

from __future__ import annotations

import functools
import importlib
import math
import os
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import numpy as np

from streamcli_sources._npy_files import Member, usable

_BLOCK_BYTES = 256 * 2**10
_CACHE_BYTES = 256 * 2**20


def is_zarr(path: str) -> bool:
    return path.rstrip("/").endswith(".zarr")


def version(path: str) -> tuple[str, int, int]:
    """The file as it is now: a file written again since has its blocks read again."""
    st = os.stat(path)
    return path, st.st_mtime_ns, st.st_size


def _open(path: str) -> Any:
    try:
        if is_zarr(path):
            zarr: Any = importlib.import_module("zarr")  # optional (extra zarr)
            return zarr.open_group(path, mode="r")
        h5py: Any = importlib.import_module("h5py")  # optional (extra events), untyped
        return h5py.File(path, "r")
    except ImportError as exc:
        extra = "zarr" if is_zarr(path) else "events"
        raise ValueError(f"{path}: reading it needs {exc.name}: pip install 'streamcli[{extra}]'") from None
    except (OSError, ValueError, KeyError) as exc:
        kind = "a Zarr store" if is_zarr(path) else "an HDF5 file"
        raise ValueError(f"{path} is not {kind} that can be read ({exc})") from None


def _walk(group: Any, path: str) -> Iterator[tuple[str, Any, list[tuple[str, Any]]]]:
    """(group path, group, its own arrays) for the group and every group under it, sorted by name."""
    arrays, groups = [], []
    if hasattr(group, "array_keys"):  # zarr 2 and 3
        arrays = [(k, group[k]) for k in sorted(group.array_keys())]
        groups = [(k, group[k]) for k in sorted(group.group_keys())]
    else:  # h5py
        h5py: Any = importlib.import_module("h5py")
        for k in sorted(group.keys()):
            obj = group.get(k)
            if isinstance(obj, h5py.Dataset):
                arrays.append((k, obj))
            elif isinstance(obj, h5py.Group):
                groups.append((k, obj))
    yield path, group, arrays
    for k, sub in groups:
        yield from _walk(sub, f"{path.rstrip('/')}/{k}")


def groups(path: str) -> list[tuple[str, dict[str, Member]]]:
    """Each group holding arrays of rows (numeric, at least one axis), with those arrays by name."""
    out = []
    root = _open(path)  # closed after the listing: a handle kept here would outlive changes to the file
    try:
        for gpath, _, arrays in _walk(root, "/"):
            members = {
                k: Member(k, int(a.shape[0]), tuple(int(d) for d in a.shape[1:]), np.dtype(a.dtype))
                for k, a in arrays
                if len(a.shape) and usable(np.dtype(a.dtype))
            }
            if members:
                out.append((gpath, members))
    finally:
        close = getattr(root, "close", None)
        if callable(close):
            close()
    return out


def group_columns(path: str, gpath: str, names: list[str]) -> dict[str, Blocks]:
    """The ``names`` arrays of group ``gpath``, each read in blocks of whole chunks."""
    key = version(path)
    group = _open(path)  # open while a window of it is (HDF5 refuses to write a file this process holds open)
    if gpath != "/":
        group = group[gpath.lstrip("/")]
    out = {}
    for name in names:
        a = group[name]
        row_bytes = max(1, math.prod(a.shape[1:]) * np.dtype(a.dtype).itemsize)
        chunk = int(a.chunks[0]) if getattr(a, "chunks", None) else 1
        rows = chunk * max(1, -(-_BLOCK_BYTES // (chunk * row_bytes)))
        out[name] = Blocks((*key, gpath, name), int(a.shape[0]), rows, functools.partial(_read, a))
    return out


def _read(array: Any, start: int, stop: int) -> np.ndarray:
    got = np.asarray(array[start:stop])
    return got if got.dtype.isnative else got.astype(got.dtype.newbyteorder("="))


class Blocks:
    """A dataset's rows as an array-like (``len``, ``[a:b]``), read ``rows`` at a time through the cache."""

    _cache: ClassVar[OrderedDict[tuple[Any, ...], np.ndarray]] = OrderedDict()
    _bytes: ClassVar[int] = 0

    def __init__(self, key: tuple[Any, ...], n: int, rows: int, read: Callable[[int, int], np.ndarray]) -> None:
        self.key, self.n, self.rows, self.read = key, n, rows, read

    def __len__(self) -> int:
        return self.n

    def _block(self, k: int) -> np.ndarray:
        cache, key = Blocks._cache, (*self.key, k)
        got = cache.get(key)
        if got is None:
            got = cache[key] = self.read(k * self.rows, min(self.n, (k + 1) * self.rows))
            Blocks._bytes += got.nbytes
            while Blocks._bytes > _CACHE_BYTES and len(cache) > 1:
                _, old = cache.popitem(last=False)
                Blocks._bytes -= old.nbytes
        else:
            cache.move_to_end(key)
        return got

    def __getitem__(self, s: slice) -> np.ndarray:
        a, b, _ = s.indices(self.n)
        b = max(a, b)
        r = self.rows
        first, last = a // r, max(a, b - 1) // r
        if first == last:
            return self._block(first)[a - first * r : b - first * r]
        parts = [self._block(k)[max(a, k * r) - k * r : min(b, (k + 1) * r) - k * r] for k in range(first, last + 1)]
        return np.concatenate(parts)
