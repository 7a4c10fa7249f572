"""``shards``: the streams of a ``streamcli export``, reassembled, as a source for offline training.

Each item is one original stream, rebuilt across shards from the exported flags (``stream`` and
``position`` of every valid step), so an export can be re-batched with other sizes, seeds or modes without
touching the original decoders. Only a stream's contiguous steps from position 0 are kept; a step exported
twice (``epoch_end="restream"`` or several epochs) is taken once. For bit-identical replay of the exported
batches themselves, use ``streamcli.ShardReader``.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from streamcli.errors import ShardError
from streamcli.shards import MANIFEST, load_manifest, open_shard
from streamcli.source import BaseSource, Field, Step
from streamcli.storage import urls

_MAPPED_SHARDS = 64  # memory maps cost address space (and a file descriptor), not memory
_LOADED_BYTES = 512 << 20  # decompressed shards cost their full size; at least two are kept


class ShardSource(BaseSource):
    """The streams of an export folder (the one holding ``index.json``).

    Args:
        arg: the export folder, or its URL (``s3://bucket/run``: the flags and then each shard's data members are
            read by byte ranges, and held in memory like decompressed shards).
        check: verify each shard's sha256 when it is first read in a process (off by default: it reads
            every byte once more; ``streamcli verify`` checks everything).

    Uncompressed shards are memory-mapped and steps are views of the map; compressed shards are
    decompressed once each and kept while they fit in 512 MB (rows read different shards in turn).
    ``open`` yields blocks (``block_steps``): a stream's steps along one row of one exported batch are one view.
    """

    # An exported batch holds up to T consecutive steps of a stream in one row: one view and one copy per run of
    # them, not a dict per step.
    block_steps = True

    def __init__(self, arg: str | os.PathLike[str] | None = None, *, check: bool = False) -> None:
        if arg is None:
            raise ValueError("the shards source needs an export folder, e.g. streamcli preview shards out/")
        self.root = str(urls.local_path(arg))  # a URL (s3://...) stays one: its shards are read by byte ranges
        self.check = bool(check)
        m = load_manifest(self.root)
        self._manifest = m
        self._fields = tuple(m["_fields"])
        self._data = [f"data.{f.name}" for f in self._fields]
        self._mapped = m.get("compression") is None and not urls.is_remote(self.root)
        self._names: list[str] = list(m.get("streams") or [])
        # stream id -> (shard number, batch k, t, b) per position; built from the flags only.
        self._where = _index(self.root, m)
        self._cache: dict[int, dict[str, np.ndarray]] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_cache"] = None  # a mapped or loaded shard never travels to workers
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
        """Shard ``i``'s data members, from a small most-recently-used cache.

        Rows of a loader read different streams, hence different shards, step by step; the cache keeps a
        shard from being mapped or decompressed again at each switch.
        """
        if self._cache is None:
            self._cache = {}
        if i in self._cache:
            self._cache[i] = self._cache.pop(i)  # most recently used last
            return self._cache[i]
        m = self._manifest
        arrays = open_shard(self.root, m, m["shards"][i], check=self.check, only=self._data)
        self._cache[i] = arrays
        while len(self._cache) > 2 and (
            len(self._cache) > _MAPPED_SHARDS
            or (not self._mapped and sum(a.nbytes for s in self._cache.values() for a in s.values()) > _LOADED_BYTES)
        ):
            self._cache.pop(next(iter(self._cache)))
        return arrays

    def open(self, item: int, start: int = 0) -> Iterator[Step]:
        """Blocks of stream ``item`` from step ``start``: each run of its steps along one row of one exported
        batch, as views of the shard (the loader copies them into its batch; a view keeps its map alive)."""
        layout_tb = self._manifest["layout"] == "TB"
        names = [(f.name, key) for f, key in zip(self._fields, self._data, strict=True)]
        where = self._where[item][start:]  # (shard, k, t, b) per step
        if not len(where):
            return
        # A run goes on while the shard, the batch and the row stay and t steps by one.
        moved = (np.diff(where[:, [0, 1, 3]], axis=0) != 0).any(axis=1) | (np.diff(where[:, 2]) != 1)
        bounds = [0, *(np.flatnonzero(moved) + 1).tolist(), len(where)]
        for i0, i1 in itertools.pairwise(bounds):
            shard, k, t, b = where[i0].tolist()
            arrays, t1 = self._shard(shard), t + i1 - i0
            if layout_tb:
                yield {name: arrays[key][k, t:t1, b] for name, key in names}
            else:
                yield {name: arrays[key][k, b, t:t1] for name, key in names}

    @classmethod
    def can_open(cls, arg: str) -> bool:
        return not urls.is_remote(arg) and (Path(urls.local_path(arg)) / MANIFEST).is_file()


def _index(root: str, m: dict[str, Any]) -> dict[int, np.ndarray]:
    per_stream: dict[int, dict[int, tuple[int, int, int, int]]] = {}
    for s, entry in enumerate(m["shards"]):
        arrays = open_shard(root, m, entry, only=("flag.valid", "flag.stream", "flag.position"))
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
