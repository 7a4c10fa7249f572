"""``shards``: the streams of a ``streamcli export``, reassembled, as a source for offline training.

Each item is one original stream, rebuilt across shards from the exported flags (``stream`` and
``position`` of every valid step), so an export can be re-batched with other sizes, seeds or modes without
touching the original decoders. Only a stream's contiguous steps from position 0 are kept; a step exported
twice (``epoch_end="restream"`` or several epochs) is taken once. For bit-identical replay of the exported
batches themselves, use ``streamcli.ShardReader``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from streamcli.errors import ShardError
from streamcli.replay import load_manifest, read_shard
from streamcli.source import BaseSource, Field, Step


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
        self._fields = tuple(m["_fields"])
        self._names: list[str] = list(m.get("streams") or [])
        # stream id -> (shard number, batch k, t, b) per position; built from the flags only.
        self._where = _index(self.root, m)
        self._cache: tuple[int, dict[str, np.ndarray]] | None = None

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
        if self._cache is None or self._cache[0] != i:
            m = load_manifest(self.root)
            self._cache = (i, read_shard(self.root, m, m["shards"][i], check=self.check))
        return self._cache[1]

    def open(self, item: int, start: int = 0) -> Iterator[Step]:
        layout_tb = load_manifest(self.root)["layout"] == "TB"
        for shard, k, t, b in self._where[item][start:]:
            arrays = self._shard(int(shard))
            yield {
                f.name: arrays[f"data.{f.name}"][k, t, b] if layout_tb else arrays[f"data.{f.name}"][k, b, t]
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
