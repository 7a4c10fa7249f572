"""``TorchBaseline``: the honest hand-written alternative to streamcli, a plain ``torch.utils.data.DataLoader``.

Its workers each own a block of rows and fill coherent ``(T, rows, ...)`` chunks, as a careful user would write
it; the main process concatenates them. ``_peers.TorchCandidate`` races it against the other loaders, through
the library's runner (``streamcli.bench.time_run``).
"""

from __future__ import annotations

import gc
import time
from collections import deque
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from streamcli.source import Field, StreamSource, call_setup_worker, uses_blocks
from streamcli.stats import LoaderStats


class _Row:
    """One row's open stream: its iterator and, for a block source, the unread part of its current block."""

    def __init__(self, source: StreamSource, item: Any) -> None:
        self.it = iter(source.open(item, 0))
        self.blocks = uses_blocks(source)  # steps come as (n, ...) blocks
        self.block: dict[str, np.ndarray] | None = None
        self.off = 0

    def fill(self, out: dict[str, np.ndarray], r: int) -> tuple[int, bool]:
        """Copy up to T steps into row ``r`` of ``out`` (zeros after the end); return (count, ended)."""
        t_len = len(next(iter(out.values())))
        t = 0
        while t < t_len:
            if self.block is None:
                step = next(self.it, None)
                if step is None:
                    for a in out.values():
                        a[t:, r] = 0
                    return t, True
                if not self.blocks:
                    for k, a in out.items():
                        a[t, r] = step[k]
                    t += 1
                    continue
                self.block, self.off = {k: np.asarray(v) for k, v in step.items()}, 0
            n_block = len(next(iter(self.block.values())))
            n = min(t_len - t, n_block - self.off)
            for k, a in out.items():
                a[t : t + n, r] = self.block[k][self.off : self.off + n]
            t, self.off = t + n, self.off + n
            if self.off >= n_block:
                self.block = None
        return t, False


class _RowsData:
    """Worker ``w`` of ``W`` owns rows ``bounds[w]`` and the items ``order[w::W]``; yields ``(w, chunks, valid)``.

    A row continues its stream; when the stream ends mid-chunk the rest is padding and the row takes the next
    item at the next chunk (boundary "pad").
    """

    def __init__(
        self, source: StreamSource, fields: Sequence[Field], order: Sequence[int], bounds: Sequence[int], t: int
    ) -> None:
        self.source, self.fields, self.order, self.bounds, self.t = source, fields, order, bounds, t

    def __iter__(self) -> Iterator[tuple[int, dict[str, Any], int]]:
        import torch
        import torch.utils.data as tud

        info = tud.get_worker_info()
        w, n_w = (info.id, info.num_workers) if info is not None else (0, 1)
        if info is not None:
            call_setup_worker(self.source)  # part of the source contract (e.g. thread limits): the baseline too
        items = list(self.source.items())
        queue = iter([items[i] for i in self.order[w::n_w]])
        n_rows = self.bounds[w + 1] - self.bounds[w]
        rows: list[_Row | None] = [None] * n_rows
        while n_rows:
            chunks: dict[str, Any] = {}
            arrays: dict[str, np.ndarray] = {}
            for f in self.fields:
                shape = (self.t, n_rows, *f.shape)
                if info is not None:  # straight into shared memory, as default_collate does in a worker, so
                    # that sending it passes a file descriptor instead of copying it into shared memory first
                    nbytes = int(np.prod(shape)) * f.np_dtype.itemsize
                    storage = torch.UntypedStorage._new_shared(nbytes)  # type: ignore[no-untyped-call]
                    chunks[f.name] = torch.empty(0, dtype=_torch_dtype(f)).set_(storage).view(shape)
                    arrays[f.name] = chunks[f.name].numpy()
                else:
                    arrays[f.name] = np.empty(shape, f.np_dtype)
                    chunks[f.name] = torch.from_numpy(arrays[f.name])
            valid = 0
            for r in range(n_rows):
                while True:
                    row = rows[r]
                    if row is None:
                        item = next(queue, None)
                        if item is None:
                            for a in arrays.values():
                                a[:, r] = 0
                            break
                        row = rows[r] = _Row(self.source, item)
                    n, ended = row.fill(arrays, r)
                    if ended:
                        rows[r] = None
                    if n:
                        valid += n
                        break
            if not valid:
                return
            yield w, chunks, valid


class TorchBaseline:
    """``DataLoader(rows dataset, batch_size=None, num_workers=W)``; the main process concatenates the W chunks.

    Yields ``{field: (T, B, ...) tensor}`` with boundary "pad" and epoch end "pad", like ``StreamLoader``'s
    defaults (no flags). The DataLoader returns worker outputs in strict round-robin order, so the W chunks of
    batch k arrive together; once a worker has run out of items its rows are zeros.
    """

    def __init__(
        self,
        source: StreamSource,
        batch_size: int,
        time_steps: int,
        num_workers: int = 0,
        *,
        seed: int = 0,
        shuffle: bool = True,
        mp_context: str | None = "spawn",
    ) -> None:
        import torch.utils.data as tud

        self.fields = list(source.fields())
        n = len(source.items())
        order = np.random.default_rng(seed).permutation(n) if shuffle else np.arange(n)
        self.w = max(1, min(num_workers, batch_size))
        self.bounds = [batch_size * i // self.w for i in range(self.w + 1)]
        self.t = time_steps
        self._step_bytes = sum(f.nbytes for f in self.fields)
        self._batches = self._steps = 0
        self._t0 = time.perf_counter()
        dataset = __getattr__("RowsDataset")(source, self.fields, [int(i) for i in order], self.bounds, time_steps)
        workers = min(num_workers, batch_size)
        self.dl: Any = tud.DataLoader(
            dataset,
            batch_size=None,
            num_workers=workers,
            multiprocessing_context=mp_context if workers else None,
            persistent_workers=workers > 0,
        )

    def __iter__(self) -> Iterator[dict[str, Any]]:
        import torch

        pending: list[deque[tuple[dict[str, Any], int]]] = [deque() for _ in range(self.w)]
        done = [False] * self.w

        def ready() -> bool:
            return all(done[i] or pending[i] for i in range(self.w)) and any(pending)

        def pop() -> dict[str, Any]:
            parts = [q.popleft() if q else None for q in pending]
            self._batches += 1
            self._steps += sum(p[1] for p in parts if p is not None)
            if self.w == 1 and parts[0] is not None:
                return parts[0][0]
            out = {}
            for f in self.fields:
                chunks = []
                for i, p in enumerate(parts):
                    if p is not None:
                        chunks.append(p[0][f.name])
                    else:
                        rows = self.bounds[i + 1] - self.bounds[i]
                        chunks.append(torch.zeros((self.t, rows, *f.shape), dtype=_torch_dtype(f)))
                out[f.name] = torch.cat(chunks, dim=1)
            return out

        for wid, chunks, valid in self.dl:
            pending[wid].append((chunks, valid))
            for i in range(self.w):  # round-robin: a worker skipped while another queued 2 has finished
                if not pending[i] and len(pending[wid]) > 1:
                    done[i] = True
            while ready():
                yield pop()
        done = [True] * self.w
        while ready():
            yield pop()

    @property
    def stats(self) -> LoaderStats:
        """The counters a ``DataLoader`` can give: batches, valid steps and bytes (worker load is unknown)."""
        b, t = self.bounds[-1], self.t
        return LoaderStats(
            batches=self._batches, steps=self._steps, bytes=self._batches * b * t * self._step_bytes,
            elapsed_s=time.perf_counter() - self._t0, first_batch_s=None, waits_s=(), worker_busy=(),
            worker_steps=(), ready_slots=0, num_slots=0, epoch=0, streams_done=0, streams_total=0, skipped=0,
            copies=0,
        )  # fmt: skip

    def close(self) -> None:
        self.dl = None  # the DataLoader's iterator shuts its workers down when collected
        gc.collect()


def _torch_dtype(f: Field) -> Any:
    import torch

    return torch.from_numpy(np.empty(0, f.np_dtype)).dtype


def __getattr__(name: str) -> Any:
    # The DataLoader needs an IterableDataset subclass, picklable by reference for spawn workers, but torch
    # must not be imported with this module; so the class is made on first access, here and in workers.
    if name == "RowsDataset":
        import torch.utils.data as tud

        cls = type("RowsDataset", (_RowsData, tud.IterableDataset), {"__module__": __name__})
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
