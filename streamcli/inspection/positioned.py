"""The loader positioned at batch K: the batch a loader with the same options hands out K-th, read alone.

With every stream's length known, ``Planner`` gives the state before batch K and the loader reopens each row's
stream there, so going to batch K opens the same few streams as going to batch 0. Without the lengths, going to K
replays the run from its start (or from the batch it stands at, going forward) and says so (``seeks`` is False;
``progress`` is called as it goes). Going to the batch after the one just read continues the loader's own
iterator, so stepping forward costs what training costs; a small cache keeps the last batches read.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from streamcli.batch import Batch
from streamcli.inspection.plan import Planner, lengths_of, next_batch
from streamcli.inspection.workers import RowWorkers, Worker
from streamcli.loader import StreamLoader

Progress = Callable[[int, int], None]
"""``progress(done, total)``: batches replayed so far on the way to a batch, of those needed."""


class LoaderBatches:
    """Batch K of ``loader``'s run (K counts every batch handed out, across epochs, as an export does).

    Args:
        loader: an open ``StreamLoader`` this object drives (its iteration is moved around; close it yourself).
        start: a ``state_dict()`` to count the run from (a resumed run, also one saved on another world size or
            batch size); None: the run's start.
        cache: how many batches to keep (copies, so no shared-memory slot stays pinned).
        progress: called while a batch is reached by replaying (lengths unknown).

    ``wait(k)`` is how long the consumer waited for batch k when it was read; ``workers_of(k, batch)`` which producer
    made each of its rows (``inspection.workers``).
    """

    def __init__(
        self,
        loader: StreamLoader,
        *,
        start: Mapping[str, Any] | None = None,
        cache: int = 8,
        progress: Progress | None = None,
    ) -> None:
        self.loader = loader
        if start is not None:
            loader.load_state_dict(start)
        self.start: dict[str, Any] = loader.state_dict()  # in this loader's own terms (a re-plan, if any, done)
        lengths = lengths_of(loader)
        self.planner = Planner(loader, lengths, self.start) if lengths is not None else None
        self.row_workers = RowWorkers.of(loader, lengths is not None)
        self.cache_size = max(1, cache)
        self.progress = progress
        self.fields = loader.fields
        self._cache: OrderedDict[int, Batch] = OrderedDict()
        self._waits: dict[int, float] = {}
        self._balanced: dict[int, bool] = {}  # whether the loader balanced its rows when batch k was read
        self._it: Iterator[Batch] | None = None
        self._next = 0  # the run's batch the loader's iterator hands out next
        self.opened_at: list[int] = []  # the batches reached by loading a state (seeks), for tests and the TUI

    @property
    def seeks(self) -> bool:
        """True when any batch is reached without reading those before it (every length known)."""
        return self.planner is not None

    def stream_name(self, stream: int) -> str:
        return self.loader.stream_name(stream)

    def stream_length(self, stream: int) -> int | None:
        return self.loader.stream_length(stream)

    def __len__(self) -> int:
        """Batches in the run's first epoch (a run goes on epoch after epoch)."""
        return len(self.loader)

    def wait(self, k: int) -> float | None:
        return self._waits.get(k)

    def workers_of(self, k: int, batch: Batch) -> list[Worker] | None:
        """The producer that made each row of ``batch``, the run's batch ``k``: a worker's number, ``"main"`` or
        ``"moves"`` (``balance``: the engine alone knows)."""
        balanced = self._balanced.get(k, False)
        return [self.row_workers.worker(batch, b, balanced) for b in range(batch.batch_size)]

    def batch(self, k: int) -> Batch:
        """The run's batch ``k`` (``RunEnded``, an ``IndexError``, past the run's end)."""
        if k < 0:
            raise IndexError(f"batch {k} must be 0 or more")
        got = self._cache.get(k)
        if got is not None:
            self._cache.move_to_end(k)
            return got
        if self._it is None or k != self._next:
            self._move_to(k)
        batch = self._read()
        self._cache[k] = batch
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return batch

    def _move_to(self, k: int) -> None:
        """Stand the loader's iterator before batch ``k``."""
        if self.planner is not None:
            self._load(self.planner.state_at(k), k)
            self.opened_at.append(k)
            return
        if self._it is None or k < self._next:  # replay from the start
            self._load(self.start, 0)
        total = k - self._next
        for done in range(total):
            if self.progress is not None:
                self.progress(done, total)
            self._read()  # read and dropped: the replay
        if self.progress is not None and total:
            self.progress(total, total)

    def _load(self, state: Mapping[str, Any], k: int) -> None:
        self.loader.load_state_dict(state)
        self._it, self._next = None, k

    def _read(self) -> Batch:
        t0 = time.perf_counter()
        batch, self._it = next_batch(self.loader, self._it)
        self._waits[self._next] = time.perf_counter() - t0
        if self.row_workers.workers >= 2 and self.row_workers.balance is None:  # the loader's measure may turn it on
            self._balanced[self._next] = self.loader.stats.balanced
        self._next += 1
        out = batch.clone()
        del batch  # frees the loader's slot
        return out

    def scan(self, first: int, end: int) -> Iterator[tuple[int, Batch]]:
        """Batches ``first .. end-1`` for their flags: the planner's stand-in (no data read), else the batches in
        the cache."""
        if self.planner is not None:
            yield from self.planner.scan(first, end)
        else:
            yield from ((k, b) for k, b in sorted(self._cache.items()) if first <= k < end)

    def close(self) -> None:
        """Close the stand-in the planner runs (the loader is the caller's)."""
        if self.planner is not None:
            self.planner.close()
