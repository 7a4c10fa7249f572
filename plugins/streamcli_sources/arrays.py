"""``arrays``: recordings stored as arrays (``.npy``, ``.npz``, HDF5, Zarr), one recording one stream.

A step is ``width`` rows along the arrays' first axis. Every format is read in place, by random access
(``window``): ``.npy`` files and uncompressed ``.npz`` members are memory-mapped, so the loader copies each row
of a batch straight out of the page cache; HDF5 and Zarr datasets are read in blocks of whole chunks, and
compressed ``.npz`` members are loaded once per process on first use (see ``_npy_files`` and ``_array_groups``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from streamcli.errors import IndexFileError, SourceError
from streamcli.index import Index
from streamcli.source import BaseSource, Field, Step
from streamcli.storage import urls
from streamcli_sources import _array_groups, _indexed
from streamcli_sources._array_scan import Column, describe, find_files, scan, split
from streamcli_sources._npy_files import npy_columns, npy_members, npz_columns

_BLOCK_BYTES = 2**20  # about this much of a stream per block that ``open`` yields


class ArraysSource(BaseSource):
    """Recordings as arrays: a ``.npy`` or ``.npz`` file, an HDF5 file, a Zarr store, or a folder of them
    (searched recursively, sorted). One recording is one stream: a ``.npy`` file (its field is ``data``), an
    ``.npz`` file, or each group of an HDF5 file or Zarr store whose arrays share a first axis (the root included).

    Fields per step: each of the recording's arrays that share its first axis (or those named in ``fields``), by
    its name with characters other than letters, digits and ``_`` made ``_``; a step is ``width`` rows, so a field
    is ``row_shape`` when ``width`` is 1, else ``(width, *row_shape)``. The last ``rows % width`` rows of a
    recording, too few for a whole step, are not read (``length`` counts whole steps only). The first recording
    decides the fields; every other one must hold them with the same row shape and dtype.

    Args:
        path: a ``.npy``, ``.npz``, HDF5 (``.h5``, ``.hdf5``) file, a ``.zarr`` store, or a folder of them.
        fields: the arrays to read, by name, comma-separated on the command line (``fields=acc,gyro``).
            Default: every array sharing the first recording's most common first axis.
        width: rows per step.
        glob: select files in a folder by this pattern. Default: every file of a known suffix (.npy, .npz, .h5, .hdf5,
            .hdf, .zarr).
        index: ``auto`` takes the recordings and lengths from the folder's index (``streamcli index arrays PATH``)
            when it is there, ``none`` lists the folder, or the path or URL of an index.
    """

    block_steps = True

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        fields: str | list[str] | None = None,
        width: int = 1,
        glob: str = "",
        index: str = "auto",
    ) -> None:
        if path is None:
            raise ValueError("the arrays source needs a file or a folder of recordings, e.g. arrays recordings/")
        if urls.is_remote(path):
            raise ValueError(f"arrays source: {path} is a URL; the arrays are memory-mapped, so give a local path")
        if int(width) < 1:
            raise ValueError(f"width={width} must be at least 1 row per step")
        if isinstance(fields, str):
            fields = [f.strip() for f in fields.split(",") if f.strip()]
        self.path = str(path)
        self.wanted = list(fields) if fields else None
        self.width = int(width)
        self.glob = glob
        self._items: Sequence[str] = []
        self._rows: dict[str, int] = {}
        self._columns: list[Column] = []
        self.streamcli_index = _indexed.find("arrays", self.path, index, self.index_settings())
        if self.streamcli_index is not None:
            self.use_index(self.streamcli_index)
        else:
            items, rows, self._columns = scan(find_files(Path(self.path), glob), self.wanted)
            self._items, self._rows = items, dict(zip(items, rows, strict=True))

    # --- the index -------------------------------------------------------------------------------------------

    def index_settings(self) -> dict[str, Any]:
        """The options that decide the recordings and their lengths (an index written with others is stale)."""
        fields = ",".join(self.wanted) if self.wanted else None  # as -s fields= takes it (named in a rebuild)
        return {"glob": self.glob, "width": self.width, "fields": fields}

    def index_info(self) -> dict[str, Any]:
        return {"columns": [c.to_json() for c in self._columns]}

    def use_index(self, index: Index) -> Sequence[str]:
        """The recordings of ``index``, and their fields from its ``info``: nothing is listed or read."""
        try:
            self._columns = [Column.from_json(c) for c in index.info["columns"]]
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            why = "does not record the arrays' fields; rebuild it with streamcli index"
            raise IndexFileError(f"{index.where} {why}") from exc
        self._items = index.items
        return index.items

    # --- the contract --------------------------------------------------------------------------------------

    def items(self) -> Sequence[str]:
        return self._items

    def fields(self) -> Sequence[Field]:
        w = self.width
        return [Field(c.field, c.row_shape if w == 1 else (w, *c.row_shape), c.dtype) for c in self._columns]

    def length(self, item: str) -> int:
        rows = self._rows.get(item)
        if rows is None:
            rows = len(next(iter(self._arrays(item).values())))
        return rows // self.width

    def item_name(self, item: str) -> str:
        path, group = split(item)
        return Path(path).name if group is None else f"{Path(path).name}:{group}"

    @classmethod
    def can_open(cls, arg: str) -> bool:
        """A ``.npy`` file of numbers (the events source's are structured), an ``.npz`` file, a ``.zarr`` store, or a
        folder whose first ``.npy`` file is one of numbers. Not a folder of ``.npz`` files (an export's shards are
        such a folder) nor HDF5 files (the events source reads them too): name the source for those."""
        if urls.is_remote(arg):
            return False
        p = Path(arg)
        if p.is_dir() and p.suffix != ".zarr":
            p = next((q for q in sorted(p.rglob("*.npy")) if q.is_file()), p)
        if p.is_file() and p.suffix.lower() == ".npy":
            try:
                return "data" in npy_members(str(p))
            except (ValueError, OSError):
                return False
        return (p.suffix.lower() == ".npz" and p.is_file()) or (p.suffix == ".zarr" and p.is_dir())

    def _arrays(self, item: str) -> dict[str, Any]:
        """The recording's arrays of rows, by member name, in the machine's byte order."""
        path, group = split(item)
        names = [c.member for c in self._columns]
        try:
            if group is not None:
                got: dict[str, Any] = dict(_array_groups.group_columns(path, group, names))
            elif path.lower().endswith(".npz"):
                got = npz_columns(path, names)
            else:
                got = dict(npy_columns(path))
        except KeyError as exc:
            why = "it changed since it was listed or indexed"
            raise SourceError(f"{describe(item)} has no array {exc}; {why}") from None
        lengths = {len(a) for a in got.values()}
        if len(lengths) > 1:
            raise SourceError(f"{describe(item)}: the fields' first axes differ ({sorted(lengths)} rows)")
        for name, a in got.items():  # blocks and loaded members are converted as they are read
            if isinstance(a, np.ndarray) and not a.dtype.isnative:
                got[name] = _Converted(a, a.dtype.newbyteorder("="))
        return got

    def window(self, item: str) -> dict[str, Any]:
        """Random access (``streamcli.source``): each field's steps, sliced by the loader without a copy where the
        arrays are mapped."""
        arrays = self._arrays(item)
        w = self.width
        out: dict[str, Any] = {}
        for c in self._columns:
            a = arrays[c.member]
            n = len(a) // w
            if w == 1:
                out[c.field] = a
            elif isinstance(a, np.ndarray):
                out[c.field] = a[: n * w].reshape(n, w, *a.shape[1:])
            else:
                out[c.field] = _Steps(a, n, w)
        return out

    def open(self, item: str, start: int = 0) -> Iterator[Step]:
        """Blocks of about ``_BLOCK_BYTES`` from step ``start``, read from the window."""
        win = self.window(item)
        if not win:
            return
        n = len(next(iter(win.values())))
        step_bytes = sum(f.nbytes for f in self.fields())
        block = max(1, min(4096, _BLOCK_BYTES // max(1, step_bytes)))
        for a in range(start, n, block):
            b = min(n, a + block)
            yield {k: np.asarray(v[a:b]) for k, v in win.items()}


class _Steps:
    """Rows read ``w`` at a time as steps of shape ``(w, *row_shape)`` (a lazily read array-like)."""

    def __init__(self, rows: Any, n: int, w: int) -> None:
        self.rows, self.n, self.w = rows, n, w

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, s: slice) -> np.ndarray:
        a, b, _ = s.indices(self.n)
        b = max(a, b)
        got = np.asarray(self.rows[a * self.w : b * self.w])
        return got.reshape(b - a, self.w, *got.shape[1:])


class _Converted:
    """Rows stored in the other byte order, converted slice by slice."""

    def __init__(self, rows: Any, dtype: np.dtype[Any]) -> None:
        self.rows, self.dtype = rows, dtype

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, s: slice) -> np.ndarray:
        return np.asarray(self.rows[s]).astype(self.dtype)
