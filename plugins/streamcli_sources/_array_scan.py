"""Which recordings a path holds and which of their arrays are the fields: the ``arrays`` source's listing.

A recording is a ``.npy`` file (one array, ``data``), an ``.npz`` file, or a group of an HDF5 file or a Zarr store.
Its arrays that share one first axis are its fields: those named in ``fields=``, else those sharing the first
axis most of its arrays have (ties: the first array's), the others ignored. The first recording decides the fields;
every other one must hold them with the same row shape and dtype. A group holding none of them is no recording (a
file's metadata group, say); a file holding none of them is an error.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from streamcli_sources import _array_groups
from streamcli_sources._field_names import identifiers, pick
from streamcli_sources._npy_files import Member, npy_members, npz_members

SEP = "::"  # between a file and a group in an item: ``runs.h5::/run_003``
FILE_SUFFIXES = (".npy", ".npz", ".h5", ".hdf5", ".hdf")


@dataclass(frozen=True)
class Column:
    """A field: its name in batches, the array's name in each recording, and one row's shape and dtype."""

    field: str
    member: str
    row_shape: tuple[int, ...]
    dtype: str  # in the machine's byte order (recordings stored in the other are converted as they are read)

    def to_json(self) -> list[Any]:
        return [self.field, self.member, list(self.row_shape), self.dtype]

    @classmethod
    def from_json(cls, raw: Sequence[Any]) -> Column:
        return cls(str(raw[0]), str(raw[1]), tuple(int(d) for d in raw[2]), str(raw[3]))


def split(item: str) -> tuple[str, str | None]:
    """An item as (file, group path), the group None for ``.npy`` and ``.npz`` files."""
    path, sep, group = item.rpartition(SEP)
    return (path, group) if sep else (item, None)


def find_files(root: Path, glob: str) -> list[str]:
    """The files (and ``.zarr`` stores) at ``root``, sorted; none inside a Zarr store."""
    if root.is_file() or (root.is_dir() and _array_groups.is_zarr(str(root))):
        return [str(root)]
    if not root.is_dir():
        raise FileNotFoundError(f"arrays source: {str(root)!r} is neither a file nor a folder")
    if glob:
        found = [p for p in root.rglob(glob) if p.is_file() or _array_groups.is_zarr(str(p))]
    else:
        suffixes = (*FILE_SUFFIXES, ".zarr")
        found = [p for p in root.rglob("*") if p.suffix.lower() in suffixes and (p.is_file() or p.suffix == ".zarr")]
    found = [p for p in found if not any(_array_groups.is_zarr(str(q)) for q in p.parents)]
    if not found:
        what = f"glob={glob!r}" if glob else "*.npy, *.npz, *.h5, *.hdf5 or *.zarr"
        raise ValueError(f"no file matches {what} under {str(root)!r}; point at a folder of recordings")
    return sorted(map(str, found))


def recordings(path: str) -> list[tuple[str, dict[str, Member]]]:
    """The recordings of one file, as (item, arrays by name)."""
    suffix = Path(path).suffix.lower()
    if suffix == ".npy":
        return [(path, npy_members(path))]
    if suffix == ".npz":
        return [(path, npz_members(path))]
    return [(f"{path}{SEP}{g}", members) for g, members in _array_groups.groups(path)]


def choose(members: dict[str, Member], wanted: Sequence[str] | None, where: str) -> list[Column]:
    """The fields of the first recording: the arrays ``wanted`` names, else those sharing the common first axis."""
    if not members:
        raise ValueError(f"{where} holds no numeric array of rows")
    if wanted:
        names = pick(wanted, list(members), where)
    else:
        counts = Counter(m.rows for m in members.values())
        top = max(counts.values())
        rows = next(m.rows for m in members.values() if counts[m.rows] == top)
        names = [k for k, m in members.items() if m.rows == rows]
    fields = identifiers(names, where)
    return [Column(f, k, members[k].row_shape, native(members[k].dtype)) for f, k in zip(fields, names, strict=True)]


def native(dtype: np.dtype[Any]) -> str:
    """The dtype in the machine's byte order, as a string."""
    return dtype.newbyteorder("=").str


def rows_of(members: dict[str, Member], columns: Sequence[Column], where: str) -> int:
    """The recording's rows; ``ValueError`` naming ``where`` unless it holds every field with its shape and dtype,
    all with one first axis."""
    rows: dict[str, int] = {}
    for c in columns:
        m = members.get(c.member)
        if m is None:
            raise ValueError(
                f"{where} has no array {c.member!r} (the first recording's field {c.field!r}); it has: "
                f"{', '.join(members) or 'none'}; pick the arrays every recording has with fields="
            )
        if m.row_shape != c.row_shape or native(m.dtype) != c.dtype:
            raise ValueError(
                f"{where}: array {c.member!r} is {m.dtype.name}{list(m.row_shape)} a row, but the first recording's "
                f"is {np.dtype(c.dtype).name}{list(c.row_shape)}; every recording's rows must have one shape and dtype"
            )
        rows[c.member] = m.rows
    if len(set(rows.values())) > 1:
        axes = ", ".join(f"{k} {n}" for k, n in rows.items())
        raise ValueError(
            f"{where}: the fields' first axes differ ({axes} rows); a recording's fields must have one row per "
            "step each, so pick arrays of one length with fields="
        )
    return next(iter(rows.values()), 0)


def scan(files: Sequence[str], wanted: Sequence[str] | None) -> tuple[list[str], list[int], list[Column]]:
    """Every recording of ``files`` holding the fields, with its rows, and the fields."""
    items: list[str] = []
    rows: list[int] = []
    columns: list[Column] | None = None
    for path in files:
        found = recordings(path)
        for item, members in found:
            where = describe(item)
            if columns is None:
                columns = choose(members, wanted, where)
            if split(item)[1] is not None and not any(c.member in members for c in columns):
                continue  # a group holding none of the fields: no recording
            rows.append(rows_of(members, columns, where))
            items.append(item)
    if columns is None or not items:
        raise ValueError(f"no recording of numeric arrays in {', '.join(files[:3])}{' ...' if len(files) > 3 else ''}")
    return items, rows, columns


def describe(item: str) -> str:
    """The item as error messages name it: the file, and the group in it."""
    path, group = split(item)
    return path if group is None else f"{path} (group {group})"
