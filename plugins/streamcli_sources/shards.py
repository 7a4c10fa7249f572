"""``shards``: the streams of a ``streamcli export``, reassembled, as a source for offline training.

Each item is one original stream, rebuilt across shards from the exported flags (``stream`` and
``position`` of every valid step), so an export can be re-batched with other sizes, seeds or modes without
touching the original decoders. Only a stream's contiguous steps from position 0 are kept; a step exported
twice (``epoch_end="restream"`` or several epochs) is taken once. For bit-identical replay of the exported
batches themselves, use ``streamcli.ShardReader``.
"""

from __future__ import annotations

import os
import struct
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from streamcli.errors import ShardError
from streamcli.replay import expected_shapes, load_manifest, read_shard, shard_path
from streamcli.source import BaseSource, Field, Step

_MAPPED_SHARDS = 64  # memory maps cost address space, not memory
_LOADED_SHARDS = 2  # decoded (compressed) shards cost their full size


class ShardSource(BaseSource):
    """The streams of an export folder (the one holding ``index.json``).

    Args:
        arg: the export folder.
        check: verify each shard's sha256 when it is read (on by default).
    """

    def __init__(self, arg: str | os.PathLike[str] | None = None, *, check: bool = True) -> None:
        if arg is None:
            raise ValueError("the shards source needs an export folder, e.g. streamcli preview shards out/")
        self.root = str(arg)
        self.check = bool(check)
        m = load_manifest(self.root)
        self._manifest = m
        self._fields = tuple(m["_fields"])
        self._names: list[str] = list(m.get("streams") or [])
        # stream id -> (shard number, batch k, t, b) per position; built from the flags only.
        self._where = _index(self.root, m)
        self._cache: dict[int, dict[str, np.ndarray]] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_cache"] = None  # a loaded shard never travels to workers
        return state

    def items(self) -> list[int]:
        return sorted(self._where)

    def fields(self) -> Sequence[Field]:
        return self._fields

    def length(self, item: int) -> int:
        return int(self._where[item].shape[0])

    def item_name(self, item: int) -> str:
        return self._names[item] if 0 <= item < len(self._names) else f"stream {item}"

    def _shard(self, i: int) -> dict[str, np.ndarray]:
        """Shard ``i``'s data members: memory-mapped when stored uncompressed, else loaded (a few kept).

        Rows of a loader read different streams, hence different shards, step by step; mapping avoids
        decoding a whole shard for each switch.
        """
        if self._cache is None:
            self._cache = {}
        if i in self._cache:
            self._cache[i] = self._cache.pop(i)  # most recently used last
            return self._cache[i]
        m = self._manifest
        entry = m["shards"][i]
        if self.check:
            read_shard(self.root, m, entry, check=True, only=())  # sha256 once per shard and process
        arrays = _map_members(shard_path(self.root, entry["name"]), m, int(entry["batches"]))
        if arrays is None:  # compressed: decode the data members
            names = [f"data.{f.name}" for f in self._fields]
            arrays = read_shard(self.root, m, entry, check=False, only=names)
        self._cache[i] = arrays
        limit = _MAPPED_SHARDS if isinstance(next(iter(arrays.values())), np.memmap) else _LOADED_SHARDS
        while len(self._cache) > limit:
            self._cache.pop(next(iter(self._cache)))
        return arrays

    def open(self, item: int, start: int = 0) -> Iterator[Step]:
        layout_tb = self._manifest["layout"] == "TB"
        for shard, k, t, b in self._where[item][start:]:
            arrays = self._shard(int(shard))
            yield {
                f.name: np.array(arrays[f"data.{f.name}"][k, t, b] if layout_tb else arrays[f"data.{f.name}"][k, b, t])
                for f in self._fields
            }

    @classmethod
    def can_open(cls, arg: str) -> bool:
        return (Path(arg) / "index.json").is_file()


def _index(root: str, m: dict[str, Any]) -> dict[int, np.ndarray]:
    per_stream: dict[int, dict[int, tuple[int, int, int, int]]] = {}
    for s, entry in enumerate(m["shards"]):
        arrays = read_shard(root, m, entry, check=False, only=("flag.valid", "flag.stream", "flag.position"))
        valid, stream, pos = arrays["flag.valid"], arrays["flag.stream"], arrays["flag.position"]
        if m["layout"] == "BT":
            valid, stream, pos = (np.swapaxes(a, 1, 2) for a in (valid, stream, pos))
        for k, t, b in zip(*np.nonzero(valid), strict=True):
            where = per_stream.setdefault(int(stream[k, t, b]), {})
            where.setdefault(int(pos[k, t, b]), (s, int(k), int(t), int(b)))
    out = {}
    for sid, where in per_stream.items():
        n = 0
        while n in where:
            n += 1
        if n:
            out[sid] = np.array([where[p] for p in range(n)], dtype=np.int64).reshape(n, 4)
    if not out:
        raise ShardError(f"the export in {root!r} holds no valid steps")
    return out


def _map_members(path: Path, m: dict[str, Any], k: int) -> dict[str, np.ndarray] | None:
    """Memory-map the data members of an uncompressed shard; None if it is compressed.

    Shapes and dtypes are checked against the manifest, and object dtypes are never mapped.
    """
    want = expected_shapes(m, k)
    out: dict[str, np.ndarray] = {}
    try:
        with zipfile.ZipFile(path) as zf, open(path, "rb") as f:
            for info in zf.infolist():
                key = info.filename.removesuffix(".npy")
                if not key.startswith("data."):
                    continue
                if info.compress_type != zipfile.ZIP_STORED:
                    return None
                f.seek(info.header_offset)
                local = f.read(30)
                name_len, extra_len = struct.unpack("<HH", local[26:30])
                f.seek(info.header_offset + 30 + name_len + extra_len)
                version = np.lib.format.read_magic(f)
                if version == (1, 0):
                    shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
                elif version == (2, 0):
                    shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
                else:
                    return None
                if key not in want or (tuple(shape), dtype.str) != want[key] or dtype.hasobject:
                    raise ShardError(f"shard {path.name!r}: {key} is {dtype.str}{list(shape)}, not {want.get(key)}")
                order: Literal["C", "F"] = "F" if fortran else "C"
                out[key] = np.memmap(path, dtype=dtype, mode="r", offset=f.tell(), shape=tuple(shape), order=order)
    except (OSError, ValueError, zipfile.BadZipFile, struct.error) as exc:
        raise ShardError(f"shard {path.name!r} is truncated or corrupted: {type(exc).__name__}: {exc}") from None
    return out
