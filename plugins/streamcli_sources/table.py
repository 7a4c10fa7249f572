"""``table``: the rows of a Parquet or CSV table grouped into streams, one stream per value of a column.

The grouping is computed once, from the ``stream_by`` and ``order_by`` columns alone: the keys are dictionary-encoded
(in order of first appearance) and the rows sorted by (key, ``order_by``) with one stable ``lexsort``. A table whose
rows are already in that order (each stream's rows together and in order, as tables are usually written) needs no
permutation: a stream is a range of rows. ``streamcli index table PATH -s stream_by=... -s order_by=...`` keeps the
streams, their lengths and, for a table not in that order, the permutation (``index_arrays``), so a loader and each
of its workers start without reading the table; rows are read by row group (``_table_file.Groups``).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from streamcli.errors import IndexFileError
from streamcli.index import Index
from streamcli.source import BaseSource, Field, Step
from streamcli.storage import urls
from streamcli_sources import _indexed
from streamcli_sources._field_names import identifiers, pick
from streamcli_sources._table_file import Groups, Spec, column_numpy, first_list_size, is_csv, schema, spec_of

_BLOCK_ROWS = 4096


class TableSource(BaseSource):
    """A Parquet or CSV table (``.parquet``, ``.csv``, ``.tsv``) whose rows make streams: the rows of one value of
    ``stream_by``, in ``order_by`` order (ties and no ``order_by``: file order), are one stream, one row a step.
    Streams come in order of their key's first row in the file.

    Fields per step: every other column (or those in ``columns``), by its name with characters other than
    letters, digits and ``_`` made ``_``: numbers and bools with their dtype, timestamps and durations as int64,
    lists of one length as ``(length,)``. Columns of other types (strings, say) are left out and listed in
    ``skipped_columns``, with a warning; named in ``columns``, they are an error. A null in a field is an error naming
    the column.

    Args:
        path: a Parquet or CSV table.
        stream_by: the column whose values name the streams (an episode, a sensor, a patient).
        order_by: the column that orders a stream's rows (a timestamp, a frame index). Default: the file's order.
        columns: the columns to read as fields, comma-separated on the command line. Default: every column but
            ``stream_by`` whose type can be a field.
        index: ``auto`` takes the streams and lengths from ``PATH.streamcli-index.npz`` (``streamcli index table
            PATH``) when it is there, ``none`` groups the table, or the path of an index.
    """

    block_steps = True

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        stream_by: str = "",
        order_by: str = "",
        columns: str | list[str] | None = None,
        index: str = "auto",
    ) -> None:
        if path is None:
            raise ValueError("the table source needs a Parquet or CSV file, e.g. table log.parquet -s stream_by=device")
        if urls.is_remote(path):
            raise ValueError(f"table source: {path} is a URL; give a local path")
        if not Path(path).is_file():
            raise ValueError(f"table source: {str(path)!r} is not a file; give a Parquet or CSV table")
        if isinstance(columns, str):
            columns = [c.strip() for c in columns.split(",") if c.strip()]
        self.path, self.stream_by, self.order_by = str(path), stream_by, order_by
        self.wanted = list(columns) if columns else None
        self.skipped_columns: list[str] = []
        self._specs, self._names = self._fields_of(schema(self.path)) if not is_csv(self.path) else ([], [])
        self._order: np.ndarray | None = None  # table rows in stream order; None: a stream is a range of rows
        self._regroup = False  # an index without the row order of a table not in stream order: group where read
        self._where: dict[str, int] | None = None  # stream key -> its number
        self._offsets: np.ndarray | None = None  # each stream's first row in stream order
        self._items: list[str] = []
        self._lengths: list[int] = []
        self.streamcli_index = _indexed.find("table", self.path, index, self.index_settings())
        if self.streamcli_index is not None:
            self.use_index(self.streamcli_index)
        else:
            if is_csv(self.path):
                self._specs, self._names = self._fields_of(schema(self.path))
            keys, lengths, self._order = self._group()
            self._items, self._lengths = keys, lengths

    def _fields_of(self, arrow_schema: Any) -> tuple[list[Spec], list[str]]:
        names = list(arrow_schema.names)
        if not self.stream_by:
            raise ValueError(f"{self.path}: name the column that says which stream a row is in with stream_by=; "
                             f"its columns: {', '.join(names)}")  # fmt: skip
        for option in ("stream_by", "order_by"):
            column = getattr(self, option)
            if column and column not in names:
                raise ValueError(f"{self.path} has no column {column!r} ({option}); its columns: {', '.join(names)}")
        chosen = (
            pick(self.wanted, names, self.path, "column") if self.wanted else [n for n in names if n != self.stream_by]
        )
        specs = []
        for name in chosen:
            field = arrow_schema.field(name)
            spec = spec_of(field, self._list_size(name))
            if spec is None:
                if self.wanted:
                    raise ValueError(f"{self.path}: column {name!r} is {field.type}, which cannot be a field "
                                     "(numbers, bools, timestamps and lists of one length can)")  # fmt: skip
                self.skipped_columns.append(name)
                continue
            specs.append(spec)
        if not specs:
            raise ValueError(f"{self.path} has no column that can be a field (numbers, bools, timestamps, lists)")
        if self.skipped_columns:
            kinds = ", ".join(f"{n} ({arrow_schema.field(n).type})" for n in self.skipped_columns)
            warnings.warn(
                f"table: {self.path}: columns {kinds} cannot be fields and are left out; name the columns to read "
                "with columns= to leave them out without this warning",
                stacklevel=3,
            )
        return specs, identifiers([s.column for s in specs], self.path)

    def _list_size(self, name: str) -> int | None:
        try:
            return first_list_size(self.path, name)
        except (TypeError, IndexError, ValueError):
            return None

    def _group(self) -> tuple[list[str], list[int], np.ndarray | None]:
        """The streams' keys (in order of first appearance), their lengths and the row order (None: identity)."""
        keys = column_numpy(self.path, self.stream_by)
        uniq, first, codes = np.unique(keys, return_index=True, return_inverse=True)
        rank = np.empty(len(uniq), np.int64)
        rank[np.argsort(first, kind="stable")] = np.arange(len(uniq))
        codes = rank[codes.reshape(-1)]
        by = (column_numpy(self.path, self.order_by), codes) if self.order_by else (codes,)
        order = np.lexsort(by).astype(np.int64)
        lengths = np.bincount(codes, minlength=len(uniq)).tolist()
        names = [str(k) for k in uniq[np.argsort(first, kind="stable")].tolist()]
        if len(set(names)) < len(names):
            raise ValueError(f"{self.path}: two values of {self.stream_by!r} read the same as text; use another column")
        return names, lengths, None if (order == np.arange(len(order))).all() else order

    # --- the index ---------------------------------------------------------------------------------------------

    def index_settings(self) -> dict[str, Any]:
        columns = ",".join(self.wanted) if self.wanted else None  # as -s columns= takes it (named in a rebuild)
        return {"stream_by": self.stream_by, "order_by": self.order_by, "columns": columns}

    def index_info(self) -> dict[str, Any]:
        specs = [[s.column, list(s.shape), s.dtype] for s in self._specs]
        return {"specs": specs, "in_order": self._order is None, "skipped": self.skipped_columns}

    def index_arrays(self) -> dict[str, np.ndarray]:
        """The row order of a table not in stream order, kept by the index so that no reader groups it again."""
        return {} if self._order is None else {"order": self._order}

    def use_index(self, index: Index) -> Sequence[str]:
        """The streams, lengths and row order of ``index``; a table not in stream order whose index lacks the order
        (an older streamcli wrote it) is grouped again where it is read."""
        try:
            self._specs = [Spec(str(c), tuple(int(d) for d in s), str(t)) for c, s, t in index.info["specs"]]
            in_order = bool(index.info["in_order"])
            self.skipped_columns = list(index.info.get("skipped", []))
        except (KeyError, TypeError, ValueError) as exc:
            raise IndexFileError(f"{index.where} does not record the table's fields; rebuild it") from exc
        order = index.arrays.get("order")
        if order is not None and len(order) != int(index.lengths.sum()):
            raise IndexFileError(f"{index.where} orders {len(order)} rows for {int(index.lengths.sum())}; rebuild it")
        self._order, self._regroup = order, not in_order and order is None
        self._names = identifiers([s.column for s in self._specs], self.path)
        self._items, self._lengths = list(index.items), index.lengths.tolist()
        return self._items

    # --- the contract --------------------------------------------------------------------------------------

    def items(self) -> Sequence[str]:
        return self._items

    def fields(self) -> Sequence[Field]:
        return [Field(n, s.shape, s.dtype) for n, s in zip(self._names, self._specs, strict=True)]

    def length(self, item: str) -> int:
        return int(self._lengths[self._stream(item)])

    def _stream(self, item: str) -> int:
        found = self._where
        if found is None:
            found = self._where = {k: i for i, k in enumerate(self._items)}
        if item not in found:
            raise KeyError(f"{self.path} has no stream {item!r} in column {self.stream_by!r}")
        return found[item]

    def _rows(self, item: str, a: int, b: int) -> np.ndarray:
        """The table rows of steps ``a .. b-1`` of ``item``."""
        k = self._stream(item)
        offsets = self._offsets
        if offsets is None:
            offsets = self._offsets = np.concatenate([[0], np.cumsum(self._lengths)]).astype(np.int64)
        if self._regroup and self._order is None:
            _, _, self._order = self._group()
            self._regroup = False
        start = int(offsets[k])
        if self._order is None:
            return np.arange(start + a, start + b, dtype=np.int64)
        return self._order[start + a : start + b]

    def window(self, item: str) -> dict[str, Any]:
        """Random access (``streamcli.source``): each field's steps, read from the row groups when sliced."""
        rows = _StreamRows(self, item)
        return {n: _Column(rows, s.column) for n, s in zip(self._names, self._specs, strict=True)}

    def open(self, item: str, start: int = 0) -> Iterator[Step]:
        reader = Groups(self.path, self._specs)
        n = self.length(item)
        for a in range(start, n, _BLOCK_ROWS):
            got = reader.rows(self._rows(item, a, min(n, a + _BLOCK_ROWS)))
            yield {name: got[s.column] for name, s in zip(self._names, self._specs, strict=True)}

    def item_name(self, item: str) -> str:
        return f"{self.stream_by}={item}"

    @classmethod
    def can_open(cls, arg: str) -> bool:
        return False  # stream_by has no default: the table source is always named


class _StreamRows:
    """One stream's rows, read by slices: the last slice read is kept, so the fields of one (position, T) window
    cost one gather."""

    def __init__(self, source: TableSource, item: str) -> None:
        self.source, self.item = source, item
        self.n = source.length(item)
        self.reader = Groups(source.path, source._specs)
        self.last: tuple[int, int, dict[str, np.ndarray]] | None = None

    def get(self, a: int, b: int) -> dict[str, np.ndarray]:
        if self.last is None or self.last[:2] != (a, b):
            self.last = (a, b, self.reader.rows(self.source._rows(self.item, a, b)))
        return self.last[2]


class _Column:
    def __init__(self, rows: _StreamRows, column: str) -> None:
        self.rows, self.column = rows, column

    def __len__(self) -> int:
        return self.rows.n

    def __getitem__(self, s: slice) -> np.ndarray:
        a, b, _ = s.indices(self.rows.n)
        return self.rows.get(a, max(a, b))[self.column]
