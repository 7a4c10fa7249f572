"""``text``: each text file, each string given, or each row of a Parquet or JSON-lines file's text column, streamed
as fixed-width chunks of bytes per step, or of token ids with ``tokenizer=``.

Files may be objects at a URL (``s3://bucket/books/``): listed remotely and read by byte ranges, block by block.
Rows of tables (``_text_columns``) and tokenized text (``_tokenize``) are read a document at a time in the workers.

Works in bytes, so any encoding passes through untouched. A UTF-8 byte-order mark is dropped by default
(``keep_bom=True`` keeps it) and CRLF line endings are kept unless ``newlines="lf"``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np

from streamcli import index as _index
from streamcli.source import BaseSource, Field, Step
from streamcli.storage import urls

from . import _text_columns as columns
from . import _tokenize as tokenize
from ._text_window import ByteCounts, PaddedSteps

if TYPE_CHECKING:
    from streamcli.storage.remote import Remote

_BOM = b"\xef\xbb\xbf"


_BLOCK = 256  # steps per block


class TextSource(BaseSource):
    """Text files (a file, a folder searched recursively, or a list of paths), literal strings, or the rows of
    Parquet and JSON-lines files, as bytes or as token ids.

    Fields per step: ``text`` uint8[width], the bytes (zero-padded on a stream's last step), and
    ``nbytes`` int32, how many of them are real. With ``tokenizer=``: ``tokens`` int64[width], the ids
    (zero-padded on a stream's last step), and, if ``width`` > 1, ``ntokens`` int32, how many of them are real.

    A ``.parquet`` or ``.jsonl`` file (or a folder of them, and no ``.txt``) gives one stream per row, the text of
    its ``column``. Their lengths are unknown (read as the streams end) unless an index gives them:
    ``streamcli index text PATH --out PATH.index.npz`` (with the same ``-s column=`` and ``-s tokenizer=``).

    Args:
        arg: a text file, a folder (searched recursively), their URL, a Parquet or JSON-lines file or folder, or a
            list of paths or strings.
        width: bytes (or token ids, with ``tokenizer``) per step.
        glob: select files in a folder by this pattern.
        strings: read the argument as the text itself, not as a path.
        keep_bom: keep a UTF-8 byte-order mark at a file's start (dropped by default).
        newlines: ``keep`` line endings as they are, or ``lf`` to turn CRLF into LF.
        index: ``auto`` takes the items and lengths from the folder's index (``streamcli index text PATH``) when
            it is there, ``none`` lists the folder, or the path or URL of an index.
        column: the text column of Parquet or JSON-lines rows (pip install 'streamcli[tables]' for Parquet).
            Default: text.
        tokenizer: a tokenizers JSON file (tokenizer.json): steps of token ids, encoded without special tokens
            (pip install 'streamcli[tokenize]'). Default: none (bytes).
    """

    def __init__(
        self,
        arg: str | os.PathLike[str] | Sequence[str] | None = None,
        *,
        width: int = 16,
        glob: str = "*.txt",
        strings: bool = False,
        keep_bom: bool = False,
        newlines: str = "keep",
        index: str = "auto",
        column: str | None = None,
        tokenizer: str | None = None,
    ) -> None:
        if arg is None:
            raise ValueError("the text source needs a file, a folder or a list of strings, e.g. text books/")
        if int(width) < 1:
            raise ValueError(f"width={width} must be at least 1 byte per step")
        if newlines not in ("keep", "lf"):
            raise ValueError(f"newlines={newlines!r} must be 'keep' or 'lf'")
        self.width = int(width)
        self.keep_bom = bool(keep_bom)
        self.newlines = newlines
        self.column: str | None = column or None
        self.tokenizer: str | None = str(tokenizer) if tokenizer else None
        self._reader: columns.RowReader | None = None  # rows of tables: their text column's reader
        self._lengths: dict[Any, int] = {}  # from the index, where the source cannot tell them unread
        if self.tokenizer is not None:
            tokenize.load(self.tokenizer)  # a bad file is refused now, not in every worker
            self.window = None  # type: ignore[method-assign,assignment]  # a document's ids are known once encoded
        self._literal = bool(strings) or (not isinstance(arg, (str, os.PathLike)))
        if self._literal and isinstance(arg, (str, os.PathLike)):
            arg = [str(arg)]
        if self._literal:
            self._items: Sequence[Any] = [str(s) for s in arg]  # type: ignore[union-attr]
            return
        self.glob = glob
        assert isinstance(arg, (str, os.PathLike))
        tables = self._tables(arg)
        if tables:
            self.column = self.column or columns.DEFAULT_COLUMN  # before the index's settings are compared
        elif column:
            raise ValueError(f"column={column!r} names a column of Parquet or JSON-lines rows; {arg} holds none")
        # An index lists nothing: the items (and the loader's lengths) come from it, checked against the settings.
        self.streamcli_index = _index.find(str(arg), index)
        if self.streamcli_index is not None:
            given = f" -s tokenizer={tokenizer}" if tokenizer is not None else ""  # the file, not its digest
            self.streamcli_index.check("text", self.index_settings(), f"streamcli index text {arg}{given}")
        if tables:
            self.window = None  # type: ignore[method-assign,assignment]
            if self.streamcli_index is not None:
                self.use_index(self.streamcli_index)
            else:
                self._items = self._list_rows(tables, column or None)
        elif urls.is_remote(arg):
            idx = self.streamcli_index
            self._items = _find_remote(str(arg), glob) if idx is None else idx.items
            self.window = None  # type: ignore[method-assign,assignment]  # objects are read by byte ranges: open()
        elif self.streamcli_index is not None:
            self._items = self.streamcli_index.items
            if self.tokenizer is not None:
                self.use_index(self.streamcli_index)
        else:
            self._items = _find_files(Path(urls.local_path(arg)), glob)

    def _tables(self, arg: str | os.PathLike[str]) -> list[str]:
        """The Parquet and JSON-lines files at ``arg``, if it names some (and, a folder, no text files)."""
        if urls.is_remote(arg):
            return []
        root = Path(urls.local_path(arg))
        if root.is_file():
            return [str(root)] if columns.is_table(root) else []
        if not self.column and (not root.is_dir() or any(root.rglob(self.glob))):
            return []
        return columns.find_tables(root) if root.is_dir() else []

    def _list_rows(self, tables: list[str], column: str | None) -> list[Any]:
        """Every row of ``tables``, each file's column checked (``column=None``: the default one)."""
        rows: list[Any] = []
        for file in tables:
            read = columns.parquet_rows if file.endswith(".parquet") else columns.jsonl_rows
            rows.extend(read(file, column)[1])
        self._reader = columns.RowReader(str(self.column))
        return rows

    def index_settings(self) -> dict[str, Any]:
        """The options that decide the items and their lengths (an index written with others is stale)."""
        out = {"glob": self.glob, "width": self.width, "keep_bom": self.keep_bom, "newlines": self.newlines}
        if self.column is not None:
            out["column"] = self.column
        if self.tokenizer is not None:
            out["tokenizer"] = tokenize.digest(self.tokenizer)
        return out

    def index_key(self, item: Any) -> str:
        return columns.row_key(item) if self._reader is not None else str(item)

    def use_index(self, index: _index.Index) -> Sequence[Any]:
        """The items and lengths of ``index`` (rows of tables come back as their tuples)."""
        if self.column is not None and self._reader is None:
            self._reader = columns.RowReader(self.column)
        keys = list(index.items)
        items = [columns.row_of_key(k) for k in keys] if self._reader is not None else keys
        self._lengths = {i: n for i, n in zip(items, index.lengths.tolist(), strict=True) if n >= 0}
        self._items = items
        return items

    def index_length(self, item: Any) -> int | None:
        """The exact number of steps, reading (and tokenizing) the document: what ``streamcli index`` records."""
        if self._reader is None and self.tokenizer is None:
            return self.length(item)
        return -(-len(self._values(item)) // self.width)

    block_steps = True

    def items(self) -> Sequence[Any]:
        return self._items

    def fields(self) -> Sequence[Field]:
        if self.tokenizer is not None:
            tokens = Field("tokens", (self.width,), "int64")  # as the tokens source's steps
            return (tokens,) if self.width == 1 else (tokens, Field("ntokens", (), "int32"))
        return (Field("text", (self.width,), "uint8", display="text:nbytes"), Field("nbytes", (), "int32"))

    def _values(self, item: Any) -> np.ndarray:
        """A row's or a tokenized document's values: its bytes (uint8) or its ids (int64)."""
        if self._reader is not None:
            text = self._reader.text(item)
            if self.tokenizer is None:
                return np.frombuffer(text.encode("utf-8", "surrogatepass"), np.uint8)
        else:
            try:
                text = self._bytes(item).decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ValueError(f"{self.item_name(item)} is not UTF-8 ({exc}): it cannot be tokenized") from None
        assert self.tokenizer is not None
        return tokenize.encode(self.tokenizer, text)

    def _bytes(self, item: str) -> bytes:
        if self._literal:
            data = item.encode("utf-8")
        elif urls.is_remote(item):
            remote, name = _remote_parts(item)
            data = remote.read(name)
        else:
            data = Path(item).read_bytes()
        if not self.keep_bom and data.startswith(_BOM):
            data = data[len(_BOM) :]
        if self.newlines == "lf":
            data = data.replace(b"\r\n", b"\n")
        return data

    def length(self, item: Any) -> int | None:
        if self._reader is not None or self.tokenizer is not None:
            return self._lengths.get(item)  # unknown until read, unless indexed
        if self._literal or self.newlines == "lf":
            n = len(self._bytes(item))
        else:
            with self._file(item) as f:
                n = f.seek(0, os.SEEK_END)
                f.seek(0)
                n -= len(_BOM) if (not self.keep_bom and f.read(3) == _BOM) else 0
        return -(-n // self.width)

    def open(self, item: Any, start: int = 0) -> Iterator[Step]:
        """Blocks of up to ``_BLOCK`` steps (``block_steps``): one numpy reshape per block, not per step.

        A file read as it is (``newlines="keep"``) is read block by block from ``start``: a segment or a resume
        deep into a large file reads none of what comes before it. A row, or a document to tokenize, is read
        whole (tokens depend on the text around them)."""
        if self._reader is not None or self.tokenizer is not None:
            names = ("tokens", "ntokens") if self.tokenizer is not None else ("text", "nbytes")
            yield from self._blocks(self._values(item), start, names)
            return
        if self._literal or self.newlines == "lf":
            yield from self._blocks(np.frombuffer(self._bytes(item), dtype=np.uint8), start)
            return
        with self._file(item) as f:
            skip = len(_BOM) if (not self.keep_bom and f.read(3) == _BOM) else 0
            size = f.seek(0, os.SEEK_END) - skip
            w = self.width
            n = -(-size // w)
            for a in range(start, n, _BLOCK):
                b = min(n, a + _BLOCK)
                f.seek(skip + a * w)
                chunk = np.frombuffer(f.read((b - a) * w), dtype=np.uint8)
                if len(chunk) < min((b - a) * w, size - a * w):
                    raise OSError(f"{item!r} shrank while it was being read (from {size} bytes)")
                yield self._block(chunk, a, b, size)

    def window(self, item: str) -> dict[str, Any]:
        """Random access (``streamcli.source``): the file mapped once, its steps read as slices of the map."""
        w = self.width
        if self._literal or self.newlines == "lf":
            data = np.frombuffer(self._bytes(item), dtype=np.uint8)
        else:
            with open(item, "rb") as f:
                skip = len(_BOM) if (not self.keep_bom and f.read(3) == _BOM) else 0
                size = os.fstat(f.fileno()).st_size - skip
            data = (
                np.asarray(np.memmap(item, np.uint8, mode="r", offset=skip, shape=(size,)))
                if size > 0
                else (np.zeros(0, np.uint8))
            )
        n, size = -(-len(data) // w), len(data)
        if size % w == 0:
            return {"text": data.reshape(n, w), "nbytes": np.broadcast_to(np.int32(w), (n,))}
        return {"text": PaddedSteps(data, n, w), "nbytes": ByteCounts(size, n, w)}

    @staticmethod
    def _file(item: str) -> BinaryIO:
        """The file, or the object at a URL read by byte ranges (each retried on transient errors)."""
        if urls.is_remote(item):
            remote, name = _remote_parts(item)
            return remote.open(name, buffer=_BLOCK * 64)
        return open(item, "rb")

    def _blocks(self, data: np.ndarray, start: int, names: tuple[str, str] = ("text", "nbytes")) -> Iterator[Step]:
        w = self.width
        n = -(-len(data) // w)
        for a in range(start, n, _BLOCK):
            b = min(n, a + _BLOCK)
            yield self._block(data[a * w : b * w], a, b, len(data), names)

    def _block(self, chunk: np.ndarray, a: int, b: int, size: int, names: tuple[str, str] = ("text", "nbytes")) -> Step:
        """Steps ``a .. b-1`` of a stream of ``size`` values (bytes or ids) from their values ``chunk``."""
        w = self.width
        if len(chunk) < (b - a) * w:  # the stream's last step is zero-padded
            chunk = np.concatenate([chunk, np.zeros((b - a) * w - len(chunk), chunk.dtype)])
        count = np.minimum(w, size - np.arange(a, b) * w).astype(np.int32)
        if names[0] == "tokens" and w == 1:  # one id a step: every step is whole, so no count
            return {"tokens": chunk.reshape(b - a, w)}
        return {names[0]: chunk.reshape(b - a, w), names[1]: count}

    def item_name(self, item: Any) -> str:
        if self._reader is not None:
            return columns.row_name(item)
        if self._literal:
            return str(item)[:12] + ("…" if len(item) > 12 else "")
        return str(Path(item).name)

    @classmethod
    def can_open(cls, arg: str) -> bool:
        if urls.is_remote(arg):
            return False
        p = Path(urls.local_path(arg))
        if p.is_file():
            return p.suffix == ".txt" or columns.is_table(p)
        return p.is_dir() and any(q.suffix in (".txt", *columns.SUFFIXES) for q in p.rglob("*"))


def _remote_parts(url: str) -> tuple[Remote, str]:
    from streamcli.storage.remote import split

    return split(url)


def _find_remote(url: str, glob: str) -> list[str]:
    from streamcli.storage.remote import find

    found = find(url, glob)
    if not found:
        raise FileNotFoundError(f"text source: nothing matches glob={glob!r} at {url!r}")
    return found


def _find_files(root: Path, glob: str) -> list[str]:
    if root.is_file():
        return [str(root)]
    if not root.is_dir():
        raise FileNotFoundError(f"text source: {str(root)!r} is neither a file nor a folder")
    return sorted(str(p) for p in root.rglob(glob) if p.is_file())
