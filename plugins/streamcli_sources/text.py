"""``text``: each text file, or each string given, streamed as fixed-width chunks of bytes per step.

Files may be objects at a URL (``s3://bucket/books/``): listed remotely and read by byte ranges, block by block.

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

if TYPE_CHECKING:
    from streamcli.storage.remote import Remote

_BOM = b"\xef\xbb\xbf"


_BLOCK = 256  # steps per block


class TextSource(BaseSource):
    """Text files (a file, a folder searched recursively, or a list of paths) or literal strings.

    Fields per step: ``text`` uint8[width], the bytes (zero-padded on a stream's last step), and
    ``nbytes`` int32, how many of them are real.

    Args:
        arg: a text file, a folder (searched recursively), their URL, or a list of paths or strings.
        width: bytes per step.
        glob: select files in a folder by this pattern.
        strings: read the argument as the text itself, not as a path.
        keep_bom: keep a UTF-8 byte-order mark at a file's start (dropped by default).
        newlines: ``keep`` line endings as they are, or ``lf`` to turn CRLF into LF.
        index: ``auto`` takes the items and lengths from the folder's index (``streamcli index text PATH``) when
            it is there, ``none`` lists the folder, or the path or URL of an index.
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
        self._literal = bool(strings) or (not isinstance(arg, (str, os.PathLike)))
        if self._literal and isinstance(arg, (str, os.PathLike)):
            arg = [str(arg)]
        if self._literal:
            self._items: Sequence[str] = [str(s) for s in arg]  # type: ignore[union-attr]
            return
        self.glob = glob
        # An index lists nothing: the items (and the loader's lengths) come from it, checked against the settings.
        self.streamcli_index = _index.find(str(arg), index)
        if self.streamcli_index is not None:
            self.streamcli_index.check("text", self.index_settings(), f"streamcli index text {arg}")
        if urls.is_remote(arg):
            idx = self.streamcli_index
            self._items = _find_remote(str(arg), glob) if idx is None else idx.items
            self.window = None  # type: ignore[method-assign,assignment]  # objects are read by byte ranges: open()
        elif self.streamcli_index is not None:
            self._items = self.streamcli_index.items
        else:
            self._items = _find_files(Path(urls.local_path(arg)), glob)  # type: ignore[arg-type]

    def index_settings(self) -> dict[str, Any]:
        """The options that decide the items and their lengths (an index written with others is stale)."""
        return {"glob": self.glob, "width": self.width, "keep_bom": self.keep_bom, "newlines": self.newlines}

    block_steps = True

    def items(self) -> Sequence[str]:
        return self._items

    def fields(self) -> Sequence[Field]:
        return (Field("text", (self.width,), "uint8", display="text:nbytes"), Field("nbytes", (), "int32"))

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

    def length(self, item: str) -> int | None:
        if self._literal or self.newlines == "lf":
            n = len(self._bytes(item))
        else:
            with self._file(item) as f:
                n = f.seek(0, os.SEEK_END)
                f.seek(0)
                n -= len(_BOM) if (not self.keep_bom and f.read(3) == _BOM) else 0
        return -(-n // self.width)

    def open(self, item: str, start: int = 0) -> Iterator[Step]:
        """Blocks of up to ``_BLOCK`` steps (``block_steps``): one numpy reshape per block, not per step.

        A file read as it is (``newlines="keep"``) is read block by block from ``start``: a segment or a resume
        deep into a large file reads none of what comes before it."""
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
        return {"text": _Padded(data, n, w), "nbytes": _NBytes(size, n, w)}

    @staticmethod
    def _file(item: str) -> BinaryIO:
        """The file, or the object at a URL read by byte ranges (each retried on transient errors)."""
        if urls.is_remote(item):
            remote, name = _remote_parts(item)
            return remote.open(name, buffer=_BLOCK * 64)
        return open(item, "rb")

    def _blocks(self, data: np.ndarray, start: int) -> Iterator[Step]:
        w = self.width
        n = -(-len(data) // w)
        for a in range(start, n, _BLOCK):
            b = min(n, a + _BLOCK)
            yield self._block(data[a * w : b * w], a, b, len(data))

    def _block(self, chunk: np.ndarray, a: int, b: int, size: int) -> Step:
        """Steps ``a .. b-1`` of a stream of ``size`` bytes from their bytes ``chunk``."""
        w = self.width
        if len(chunk) < (b - a) * w:  # the stream's last step is zero-padded
            chunk = np.concatenate([chunk, np.zeros((b - a) * w - len(chunk), np.uint8)])
        nbytes = np.minimum(w, size - np.arange(a, b) * w).astype(np.int32)
        return {"text": chunk.reshape(b - a, w), "nbytes": nbytes}

    def item_name(self, item: str) -> str:
        if self._literal:
            return item[:12] + ("…" if len(item) > 12 else "")
        return Path(item).name

    @classmethod
    def can_open(cls, arg: str) -> bool:
        if urls.is_remote(arg):
            return False
        p = Path(urls.local_path(arg))
        return (p.is_file() and p.suffix == ".txt") or (p.is_dir() and any(p.rglob("*.txt")))


class _Padded:
    """The steps of ``data`` in chunks of ``w`` bytes, the last one zero-padded, read by slices."""

    def __init__(self, data: np.ndarray, n: int, w: int) -> None:
        self.data, self.n, self.w = data, n, w
        self.full = len(data) // w  # steps that need no padding

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, s: slice) -> np.ndarray:
        a, b, _ = s.indices(self.n)
        w = self.w
        if b <= self.full:
            return self.data[a * w : b * w].reshape(b - a, w)
        out = np.zeros((max(b - a, 0), w), np.uint8)
        chunk = self.data[a * w : b * w]
        out.reshape(-1)[: len(chunk)] = chunk
        return out


class _NBytes:
    """Each step's count of real bytes: ``w`` but on a file's last step."""

    def __init__(self, size: int, n: int, w: int) -> None:
        self.size, self.n, self.w = size, n, w
        self._full = np.full(4096, w, np.int32)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, s: slice) -> np.ndarray:
        a, b, _ = s.indices(self.n)
        if b < self.n and b - a <= len(self._full):
            return self._full[: max(b - a, 0)]
        return np.minimum(self.w, self.size - np.arange(a, b) * self.w).astype(np.int32)


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
