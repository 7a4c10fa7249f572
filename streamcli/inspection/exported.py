"""An export's batch K, read from its shard alone: the same interface as ``LoaderBatches``."""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Iterator

import numpy as np

from streamcli.batch import FLAGS, Batch
from streamcli.shards.reader import ShardReader, open_shard

FLAG_MEMBERS = [*(f"flag.{n}" for n in FLAGS), "flag.reset", "meta.epoch", "meta.index"]


def flags_only(arrays: dict[str, np.ndarray], k: int, layout: str) -> Batch:
    """Batch ``k`` of a shard's flag members, with no data fields (what a strip reads)."""
    import torch

    def member(key: str) -> torch.Tensor:
        return torch.from_numpy(np.array(arrays[key][k]))

    return Batch(
        data={},
        is_first=member("flag.is_first"),
        reset=member("flag.reset"),
        valid=member("flag.valid"),
        stream=member("flag.stream"),
        position=member("flag.position"),
        replayed=member("flag.replayed"),
        epoch=int(arrays["meta.epoch"][k]),
        index=int(arrays["meta.index"][k]),
        layout=layout,
    )


class ExportBatches:
    """Batch K of an export (``streamcli export``): K counts the exported batches, across epochs."""

    seeks = True  # a manifest says which shard holds batch K

    def __init__(self, out_dir: str | os.PathLike[str], *, cache: int = 8) -> None:
        self.reader = ShardReader(out_dir)
        self.fields = self.reader.fields
        self.cache_size = max(1, cache)
        self._cache: OrderedDict[int, Batch] = OrderedDict()
        self.opened_at: list[int] = []

    def stream_name(self, stream: int) -> str:
        return self.reader.stream_name(stream)

    def stream_length(self, stream: int) -> int | None:
        return self.reader.stream_length(stream)

    def __len__(self) -> int:
        return len(self.reader)

    def workers_of(self, k: int, batch: Batch) -> None:
        """An export does not keep which producer made a row."""
        return None

    def wait(self, k: int) -> float | None:
        return None  # an export was read from disk: there was no producer to wait for

    def batch(self, k: int) -> Batch:
        got = self._cache.get(k)
        if got is None:
            got = self.reader.batch(k).clone()  # a copy: the shard's map is not kept open
            self.opened_at.append(k)
            self._cache[k] = got
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        self._cache.move_to_end(k)
        return got

    def scan(self, first: int, end: int) -> Iterator[tuple[int, Batch]]:
        """Batches ``first .. end-1`` (as far as the export goes), for their flags: each shard opened once."""
        reader, at = self.reader, 0
        for entry in reader.manifest["shards"]:
            n = int(entry["batches"])
            lo, hi = max(first, at), min(end, at + n)
            if lo < hi:
                arrays = open_shard(reader.out_dir, reader.manifest, entry, only=FLAG_MEMBERS)
                for k in range(lo, hi):
                    yield k, flags_only(arrays, k - at, reader.layout)
            at += n

    def close(self) -> None:
        self._cache.clear()
