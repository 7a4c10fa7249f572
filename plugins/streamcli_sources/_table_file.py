"""A Parquet or CSV table as the ``table`` source reads it: its columns as fields, its grouping, its row groups.

Parquet is read one row group at a time (only the fields' columns), through a per-process cache bounded in bytes,
so a worker holds the row groups its streams span, never the whole table. CSV has no row groups: a process that
reads a CSV table parses it whole once (pyarrow's multithreaded reader) and keeps it as one group. Each column
becomes a numpy array: numbers and bools as they are, timestamps and durations as int64, lists of one length as
``(rows, length)``; strings and other types cannot be fields.
"""

from __future__ import annotations

import functools
import importlib
import os
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

_CACHE_BYTES = 512 * 2**20


@dataclass(frozen=True)
class Spec:
    """A column as a field: its column name, per-row shape and numpy dtype."""

    column: str
    shape: tuple[int, ...]
    dtype: str


def _pa() -> Any:
    try:
        return importlib.import_module("pyarrow")  # optional (extra tables), untyped
    except ImportError:
        raise ValueError("the table source needs pyarrow: pip install 'streamcli[tables]'") from None


def is_csv(path: str) -> bool:
    return Path(path).suffix.lower() in (".csv", ".tsv") or path.lower().endswith((".csv.gz", ".csv.bz2"))


def _version(path: str) -> tuple[str, int, int]:
    st = os.stat(path)
    return path, st.st_mtime_ns, st.st_size


def read_csv(path: str) -> Any:
    """The whole CSV table (``.tsv``: tab-separated), parsed once per process and version of the file."""
    return _read_csv(_version(path))


def parquet(path: str) -> Any:
    """The Parquet file (its footer read once per process and version of the file)."""
    return _parquet(_version(path))


@functools.lru_cache(maxsize=2)
def _read_csv(version: tuple[str, int, int]) -> Any:
    path = version[0]
    _pa()
    csv: Any = importlib.import_module("pyarrow.csv")
    try:
        delimiter = "\t" if Path(path).suffix.lower() == ".tsv" else ","
        return csv.read_csv(path, parse_options=csv.ParseOptions(delimiter=delimiter))
    except (OSError, ValueError) as exc:  # pyarrow.ArrowInvalid is a ValueError
        raise ValueError(f"{path} is not a CSV table that can be read ({exc})") from None


@functools.lru_cache(maxsize=8)
def _parquet(version: tuple[str, int, int]) -> Any:
    path = version[0]
    _pa()
    pq: Any = importlib.import_module("pyarrow.parquet")
    try:
        return pq.ParquetFile(path)
    except (OSError, ValueError) as exc:
        raise ValueError(
            f"{path} is not a Parquet file that can be read ({exc}); give a .parquet or .csv table"
        ) from None


def schema(path: str) -> Any:
    """The table's arrow schema (a CSV table is read for it)."""
    return read_csv(path).schema if is_csv(path) else parquet(path).schema_arrow


def spec_of(field: Any, list_size: int | None) -> Spec | None:
    """The column as a field, or None if its type cannot be one (strings, structs, nested lists)."""
    pa = _pa()
    t = field.type
    if pa.types.is_fixed_size_list(t) or pa.types.is_list(t) or pa.types.is_large_list(t):
        inner = spec_of(pa.field(field.name, t.value_type), None)
        if inner is None or inner.shape:
            return None
        size = t.list_size if pa.types.is_fixed_size_list(t) else list_size
        return None if size is None else Spec(field.name, (int(size),), inner.dtype)
    if pa.types.is_timestamp(t) or pa.types.is_duration(t) or pa.types.is_date64(t):
        return Spec(field.name, (), "<i8")
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t):
        return Spec(field.name, (), np.dtype(t.to_pandas_dtype()).str)
    return None


def to_numpy(column: Any, spec: Spec, where: str) -> np.ndarray:
    """An arrow column (array or chunked array) as the field's numpy array; ``ValueError`` naming ``where`` for
    nulls or lists of another length."""
    pa = _pa()
    col = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if col.null_count:
        raise ValueError(
            f"{where}: column {spec.column!r} holds {col.null_count} nulls; fill them (a step has no gaps)"
        )
    if spec.shape:
        flat = col.flatten()
        if not pa.types.is_fixed_size_list(col.type):
            sizes = np.diff(np.asarray(col.offsets))
            if len(sizes) and (sizes != spec.shape[0]).any():
                bad = int(sizes[sizes != spec.shape[0]][0])
                raise ValueError(f"{where}: column {spec.column!r} holds a list of {bad} values, not {spec.shape[0]}")
        values = np.asarray(flat.to_numpy(zero_copy_only=False))[: len(col) * spec.shape[0]]
        return values.astype(spec.dtype, copy=False).reshape(len(col), *spec.shape)
    if pa.types.is_timestamp(col.type) or pa.types.is_duration(col.type) or pa.types.is_date64(col.type):
        col = col.cast(pa.int64())
    return np.asarray(col.to_numpy(zero_copy_only=False)).astype(spec.dtype, copy=False)


def first_list_size(path: str, name: str) -> int | None:
    """The length of the first row's list in list column ``name`` (every row's is checked where it is read)."""
    table = read_csv(path) if is_csv(path) else parquet(path).read_row_group(0, columns=[name])
    col = table.column(name)
    first = col[0].as_py() if len(col) else None
    return len(first) if isinstance(first, list) else None


def column_numpy(path: str, name: str) -> np.ndarray:
    """One whole column (the grouping's keys or order), as numpy; strings as an object array."""
    pa = _pa()
    table = read_csv(path) if is_csv(path) else parquet(path).read(columns=[name])
    col = table.column(name).combine_chunks()
    if col.null_count:
        raise ValueError(f"{path}: column {name!r} holds {col.null_count} nulls; every row needs a value")
    if pa.types.is_timestamp(col.type) or pa.types.is_duration(col.type) or pa.types.is_date64(col.type):
        col = col.cast(pa.int64())
    return np.asarray(col.to_numpy(zero_copy_only=False))


class Groups:
    """The table's rows by group: where each group starts, and each group read as the fields' arrays (cached per
    process, bounded in bytes; the oldest read go first)."""

    _cache: ClassVar[OrderedDict[tuple[str, int, int, int], dict[str, np.ndarray]]] = OrderedDict()
    _bytes: ClassVar[int] = 0

    def __init__(self, path: str, specs: Sequence[Spec]) -> None:
        self.path, self.specs = path, list(specs)
        self.version = _version(path)  # a file written again since has its row groups read again
        if is_csv(path):
            self.starts = np.zeros(1, np.int64)
        else:
            meta = parquet(path).metadata
            sizes = [meta.row_group(k).num_rows for k in range(meta.num_row_groups)]
            self.starts = (
                np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64) if sizes else np.zeros(0, np.int64)
            )

    def group(self, k: int) -> dict[str, np.ndarray]:
        key = (*self.version, k)
        got = Groups._cache.get(key)
        if got is not None:
            Groups._cache.move_to_end(key)
            return got
        names = [s.column for s in self.specs]
        if is_csv(self.path):
            table = read_csv(self.path).select(names)
        else:
            table = parquet(self.path).read_row_group(k, columns=names)
        where = f"{self.path} (row group {k})" if not is_csv(self.path) else self.path
        got = {s.column: to_numpy(table.column(s.column), s, where) for s in self.specs}
        Groups._cache[key] = got
        Groups._bytes += sum(a.nbytes for a in got.values())
        while Groups._bytes > _CACHE_BYTES and len(Groups._cache) > 1:
            _, old = Groups._cache.popitem(last=False)
            Groups._bytes -= sum(a.nbytes for a in old.values())
        return got

    def rows(self, ids: np.ndarray) -> dict[str, np.ndarray]:
        """The fields at table rows ``ids`` (in that order), gathered from the row groups they fall in."""
        if not len(ids):
            return {s.column: np.zeros((0, *s.shape), s.dtype) for s in self.specs}
        gs = np.searchsorted(self.starts, ids, side="right") - 1
        first, last = int(gs[0]), int(gs[-1])
        if first == last and (gs == first).all():  # one row group: the common case
            local = ids - self.starts[first]
            g = self.group(first)
            lo = int(local[0])
            if int(local[-1]) - lo == len(local) - 1 and (len(local) < 3 or (np.diff(local) == 1).all()):
                return {c: a[lo : lo + len(local)] for c, a in g.items()}
            return {c: a[local] for c, a in g.items()}
        out = {s.column: np.empty((len(ids), *s.shape), s.dtype) for s in self.specs}
        for k in np.unique(gs).tolist():
            sel = gs == k
            g = self.group(k)
            local = ids[sel] - self.starts[k]
            for c, a in g.items():
                out[c][sel] = a[local]
        return out
