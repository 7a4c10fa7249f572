"""``.npy`` and ``.npz`` files as named arrays of rows, read without loading them: headers, maps and lazy loads.

A ``.npy`` file and a stored (uncompressed, ``np.savez``) member of an ``.npz`` are memory-mapped where their data
begins, so a slice of rows is a view of the page cache. A deflated member (``np.savez_compressed``) cannot be mapped:
it is loaded whole on its first slice into a per-process cache bounded in bytes (``Loaded``), and read from there.
"""

from __future__ import annotations

import functools
import math
import mmap
import os
import re
import struct
import zipfile
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO, ClassVar

import numpy as np

_CACHE_BYTES = 512 * 2**20  # deflated members kept loaded per process


@dataclass(frozen=True)
class Member:
    """One array of a recording: its name there, its rows (first axis), the shape of a row and its dtype."""

    name: str
    rows: int
    row_shape: tuple[int, ...]
    dtype: np.dtype[Any]


@dataclass(frozen=True)
class _Header:
    shape: tuple[int, ...]
    fortran: bool
    dtype: np.dtype[Any]
    offset: int  # where the data begins in the file

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


_MAGIC = b"\x93NUMPY"
_HEAD_BYTES = 4096  # a plain header is shorter (numpy pads it to 64 or 128 bytes)
_DESCR = re.compile(r"'descr':\s*'([^']+)'")
_FORTRAN = re.compile(r"'fortran_order':\s*(True|False)")
_SHAPE = re.compile(r"'shape':\s*(\([\d\s,]*\))")


def _parse_header(raw: bytes, start: int) -> _Header | None:
    """The header at the start of ``raw`` (read at file offset ``start``), if it is a plain one (a dtype string, the
    common case) and ``raw`` holds all of it: three regular expressions, where numpy's own reader compiles the
    header as Python (``literal_eval``), which cost more than mapping the file once per stream."""
    if raw[:6] != _MAGIC or len(raw) < 12 or raw[6] not in (1, 2):
        return None
    size, at = (struct.unpack("<H", raw[8:10])[0], 10) if raw[6] == 1 else (struct.unpack("<I", raw[8:12])[0], 12)
    if len(raw) < at + size:
        return None
    text = raw[at : at + size].decode("latin1")
    descr, fortran, shape = _DESCR.search(text), _FORTRAN.search(text), _SHAPE.search(text)
    if not (descr and fortran and shape):
        return None
    try:
        dims = tuple(int(d) for d in shape.group(1).strip("()").split(",") if d.strip())
        return _Header(dims, fortran.group(1) == "True", np.dtype(descr.group(1)), start + at + size)
    except (ValueError, TypeError):
        return None


def _read_header(f: BinaryIO, where: str) -> _Header:
    """The header at the file's position (numpy's reader for one that is not plain)."""
    start = f.tell()
    head = _parse_header(f.read(_HEAD_BYTES), start)
    if head is not None:
        return head
    f.seek(start)
    return _numpy_header(f, where)


def _numpy_header(f: BinaryIO, where: str) -> _Header:
    fmt = np.lib.format
    try:
        version = fmt.read_magic(f)
        if version not in ((1, 0), (2, 0)):  # 3.0 only differs for structured dtypes, which a batch cannot hold
            raise ValueError(f"format version {version} holds a structured dtype")
        read = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        shape, fortran, dtype = read(f)
    except (ValueError, OSError, EOFError) as exc:
        raise ValueError(f"{where} is not a .npy array of numbers ({exc}); write it with numpy.save") from None
    return _Header(tuple(int(d) for d in shape), bool(fortran), np.dtype(dtype), f.tell())


def member_of(name: str, head: _Header, where: str) -> Member:
    """The header as a member; ``ValueError`` naming ``where`` for a scalar or a dtype a batch cannot hold."""
    if not head.shape:
        raise ValueError(f"{where} holds a scalar, not rows; save arrays whose first axis is time")
    if not usable(head.dtype):
        raise ValueError(f"{where} has dtype {head.dtype}, not a number or bool; a batch holds numeric arrays only")
    return Member(name, head.shape[0], head.shape[1:], head.dtype)


def usable(dtype: np.dtype[Any]) -> bool:
    """A dtype a batch can hold: numbers and bools (no objects, strings or records)."""
    return dtype.kind in "biufc" and dtype.fields is None


def npy_members(path: str) -> dict[str, Member]:
    """The one array of a ``.npy`` file, named ``data``; ``ValueError`` naming the file if it is truncated."""
    with open(path, "rb") as f:
        head = _read_header(f, path)
        size = os.fstat(f.fileno()).st_size
    if head.offset + head.nbytes > size:
        raise ValueError(
            f"{path} is truncated: its header says {head.shape} {head.dtype} ({head.nbytes} bytes) but the file holds "
            f"{max(0, size - head.offset)} bytes of data; write it again"
        )
    return {"data": member_of("data", head, path)}


def npy_columns(path: str) -> dict[str, np.ndarray]:
    """The ``.npy`` file's array memory-mapped (an ndarray over the map, cheaper to slice than a memmap). Read through
    a raw descriptor: a window is opened once per stream, and a Python file object costs more than the map."""
    fd = os.open(path, os.O_RDONLY)
    try:
        head = _parse_header(os.pread(fd, _HEAD_BYTES, 0), 0)
        if head is None:
            with open(path, "rb") as f:
                head = _read_header(f, path)
        return {"data": _mapped(fd, head, path)}
    finally:
        os.close(fd)


def _mapped(fd: int, head: _Header, where: str) -> np.ndarray:
    """The array at ``head.offset`` in the open file ``fd``, mapped (the map outlives the descriptor)."""
    if head.nbytes == 0:
        return np.zeros(head.shape, head.dtype)
    try:
        buf = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        flat = np.frombuffer(buf, head.dtype, count=head.nbytes // head.dtype.itemsize, offset=head.offset)
    except ValueError as exc:  # the file holds less than its header says
        raise ValueError(f"{where} is truncated: its header says {head.shape} {head.dtype} ({exc})") from None
    return flat.reshape(head.shape, order="F" if head.fortran else "C")


def _npz_headers(path: str) -> dict[str, tuple[_Header, zipfile.ZipInfo]]:
    """Each ``NAME.npy`` member's header, with its entry; a stored member's ``offset`` is where its data begins in
    the ``.npz`` file itself."""
    out: dict[str, tuple[_Header, zipfile.ZipInfo]] = {}
    try:
        with zipfile.ZipFile(path) as z, open(path, "rb") as raw:
            for info in z.infolist():
                if not info.filename.endswith(".npy"):
                    continue
                name = info.filename[: -len(".npy")]
                where = f"{path} (array {name!r})"
                if info.compress_type == zipfile.ZIP_STORED:
                    raw.seek(info.header_offset + 26)
                    n, m = struct.unpack("<HH", raw.read(4))
                    raw.seek(info.header_offset + 30 + n + m)
                    start = raw.tell()
                    head = _read_header(raw, where)
                    if head.offset - start + head.nbytes > info.file_size:
                        raise ValueError(f"{where} is truncated: its header says {head.shape} {head.dtype}")
                else:
                    with z.open(info) as f:
                        head = _read_header(f, where)  # type: ignore[arg-type]
                out[name] = (head, info)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ValueError(f"{path} is not a whole .npz file ({exc}); write it again with numpy.savez") from None
    return out


def npz_members(path: str) -> dict[str, Member]:
    """The ``.npz`` file's arrays (those a batch can hold: numeric, at least one axis), by name."""
    out = {}
    for name, (head, _) in _npz_headers(path).items():
        if head.shape and usable(head.dtype):
            out[name] = Member(name, head.shape[0], head.shape[1:], head.dtype)
    return out


def npz_columns(path: str, names: list[str]) -> dict[str, Any]:
    """The ``names`` members of an ``.npz``: stored ones mapped, deflated ones loaded lazily (``Loaded``)."""
    heads = _npz_headers(path)
    out: dict[str, Any] = {}
    for name in names:
        head, info = heads[name]
        if info.compress_type == zipfile.ZIP_STORED:
            with open(path, "rb") as f:
                out[name] = _mapped(f.fileno(), head, f"{path} (array {name!r})")
        else:
            st = os.stat(path)  # a file written again since is loaded again
            key = (path, name, st.st_mtime_ns, st.st_size)
            out[name] = Loaded(key, head.shape[0], functools.partial(_load_member, path, name))
    return out


def _load_member(path: str, name: str) -> np.ndarray:
    with np.load(path, allow_pickle=False) as z:
        got = np.asarray(z[name])
    return got if got.dtype.isnative else got.astype(got.dtype.newbyteorder("="))


class Loaded:
    """An array loaded whole on its first slice, kept in a per-process cache bounded in bytes (the oldest loaded
    go first) and loaded again if it was dropped: a window of it costs no memory until read."""

    _cache: ClassVar[OrderedDict[tuple[str, str, int, int], np.ndarray]] = OrderedDict()
    _bytes: ClassVar[int] = 0

    def __init__(self, key: tuple[str, str, int, int], rows: int, load: Callable[[], np.ndarray]) -> None:
        self.key, self.rows, self.load = key, rows, load

    def __len__(self) -> int:
        return self.rows

    def array(self) -> np.ndarray:
        cache = Loaded._cache
        got = cache.get(self.key)
        if got is None:
            got = cache[self.key] = self.load()
            Loaded._bytes += got.nbytes
            while Loaded._bytes > _CACHE_BYTES and len(cache) > 1:
                _, old = cache.popitem(last=False)
                Loaded._bytes -= old.nbytes
        else:
            cache.move_to_end(self.key)
        return got

    def __getitem__(self, s: slice) -> np.ndarray:
        return self.array()[s]
