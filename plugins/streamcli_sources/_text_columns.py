"""The rows of Parquet and JSON-lines files as documents: each row's text column is one stream.

Items are cheap to list and to pickle: ``(file, row group, row)`` for Parquet, ``(file, byte offset of the line)``
for JSON lines. Listing reads Parquet footers and, for JSON lines, the newline positions; no text is parsed then.
A worker reads a row group's column once and keeps the last few it read (rows of one group share the read), and a
JSON line by seeking to its offset. A row's text is read whole when its stream opens (a document is one stream).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

INSTALL = "pip install 'streamcli[tables]'"
SUFFIXES = (".parquet", ".jsonl")
DEFAULT_COLUMN = "text"

ParquetRow = tuple[str, int, int]  # (file, row group, row within the group)
JsonRow = tuple[str, int]  # (file, byte offset of the line)
Row = ParquetRow | JsonRow

_GROUPS_KEPT = 4  # row groups a worker keeps read: rows of one group opened close together share one read


def is_table(path: str | Path) -> bool:
    return Path(path).suffix in SUFFIXES


def find_tables(root: Path) -> list[str]:
    """The Parquet and JSON-lines files at ``root`` (one file, or a folder searched recursively), sorted."""
    if root.is_file():
        return [str(root)]
    return sorted(str(p) for p in root.rglob("*") if p.suffix in SUFFIXES and p.is_file())


def _parquet() -> Any:
    """``pyarrow.parquet``, or an ImportError that names the install command."""
    try:
        import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]
    except ImportError:
        raise ImportError(f"reading Parquet text needs pyarrow: {INSTALL}") from None
    return pq


def _choose(column: str | None, columns: list[str], file: str) -> str:
    """The column to read: the one named, else ``text``; a ValueError listing the file's columns otherwise."""
    want = DEFAULT_COLUMN if column is None else column
    if want not in columns:
        how = "name one with column=NAME" if column is None else "check column="
        raise ValueError(
            f"{file} has no column {want!r}; its columns are {', '.join(map(repr, columns)) or 'none'}: {how}"
        )
    return want


def parquet_rows(file: str, column: str | None) -> tuple[str, list[ParquetRow]]:
    """The column (checked to hold strings) and one item per row of ``file``, row group by row group."""
    pf = _parquet().ParquetFile(file)
    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]  # there: pyarrow.parquet imported it

    schema = pf.schema_arrow
    name = _choose(column, list(schema.names), file)
    kind = schema.field(name).type
    if not (
        pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_string_view(kind)
        or pa.types.is_null(kind)
    ):
        raise ValueError(f"{file}: column {name!r} holds {kind}, not text; name a string column with column=NAME")
    rows: list[ParquetRow] = []
    for group in range(pf.num_row_groups):
        rows.extend((file, group, r) for r in range(pf.metadata.row_group(group).num_rows))
    return name, rows


def jsonl_rows(file: str, column: str | None) -> tuple[str, list[JsonRow]]:
    """The column (checked on the first record) and one item per non-blank line of ``file``: its byte offset."""
    data = np.fromfile(file, dtype=np.uint8)
    ends = np.flatnonzero(data == 10)
    if len(data) and data[-1] != 10:
        ends = np.append(ends, len(data))
    starts = np.concatenate([[0], ends[:-1] + 1]).astype(np.int64) if len(ends) else np.zeros(0, np.int64)
    size = ends - starts
    blank = (size == 0) | ((size == 1) & (data[np.minimum(starts, max(len(data) - 1, 0))] == 13))
    starts = starts[~blank]
    if not len(starts):
        return DEFAULT_COLUMN if column is None else column, []
    first = _record(file, int(starts[0]), data[starts[0] : ends[~blank][0]].tobytes())
    name = _choose(column, list(first), file)
    if not isinstance(first[name], (str, type(None))):  # later lines are checked as they are read
        raise ValueError(
            f"{file}: column {name!r} holds {type(first[name]).__name__}, not text (first line); "
            "name a text column with column=NAME"
        )
    return name, [(file, int(s)) for s in starts.tolist()]


def _record(file: str, offset: int, line: bytes) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except ValueError as exc:
        raise ValueError(f"{file}: the line at byte {offset} is not JSON ({exc})") from None
    if not isinstance(record, dict):
        raise ValueError(f"{file}: the line at byte {offset} is a JSON {type(record).__name__}, not an object")
    return record


def row_key(row: Row) -> str:
    """The row as one string (an index's name): ``file#group:row`` or ``file#offset``."""
    return f"{row[0]}#{row[1]}:{row[2]}" if len(row) == 3 else f"{row[0]}#{row[1]}"


def row_of_key(key: str) -> Row:
    """The row ``row_key`` wrote (the file's own name may hold ``#``: the last one separates)."""
    file, _, where = key.rpartition("#")
    group, sep, row = where.partition(":")
    return (file, int(group), int(row)) if sep else (file, int(where))


def row_name(row: Row) -> str:
    """A short name for previews and errors: ``books.parquet[group 2, row 17]`` or ``books.jsonl@1024``."""
    name = Path(row[0]).name
    return f"{name}[group {row[1]}, row {row[2]}]" if len(row) == 3 else f"{name}@{row[1]}"


class RowReader:
    """Reads one row's text; keeps the last few Parquet row groups it read (in this process only: a pickled copy
    starts empty, so the source stays light)."""

    def __init__(self, column: str) -> None:
        self.column = column
        self._groups: OrderedDict[tuple[str, int], Any] = OrderedDict()

    def __getstate__(self) -> dict[str, Any]:
        return {"column": self.column}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.column = state["column"]
        self._groups = OrderedDict()

    def text(self, row: Row) -> str:
        """The row's text (a null is an empty document); ValueError naming the file and row if it is not text."""
        value = self._parquet(row) if len(row) == 3 else self._json(row)
        if value is None:
            return ""
        if not isinstance(value, str):
            raise ValueError(
                f"{row_name(row)}: column {self.column!r} holds a {type(value).__name__}, not text; "
                "name a text column with column=NAME"
            )
        return value

    def _parquet(self, row: ParquetRow) -> Any:
        file, group, r = row
        key = (file, group)
        values = self._groups.get(key)
        if values is None:
            table = _parquet().ParquetFile(file).read_row_group(group, columns=[self.column])
            values = table.column(0).combine_chunks()
            self._groups[key] = values
            while len(self._groups) > _GROUPS_KEPT:
                self._groups.popitem(last=False)
        else:
            self._groups.move_to_end(key)
        if r >= len(values):
            raise ValueError(f"{row_name(row)}: the row group has {len(values)} rows now; rebuild the index")
        return values[r].as_py()

    def _json(self, row: JsonRow) -> Any:
        file, offset = row
        with open(file, "rb") as f:
            f.seek(offset)
            line = f.readline()
        record = _record(file, offset, line)
        if self.column not in record:
            raise ValueError(f"{file}: the line at byte {offset} has no {self.column!r}; its keys are {list(record)}")
        return record[self.column]
