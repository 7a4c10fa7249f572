"""The loaders the benchmark compares, each wrapped as a ``Candidate``: iterate once for one epoch, then close.

Every candidate yields ``(T, B, 3, 64, 64)`` uint8 frames (streamcli yields ``Batch`` objects; use
``frames_of``), reads the same ``SyntheticFrames`` source with boundary "pad" (a stream that ends mid-chunk
pads the rest of its row; the row takes a new stream at the next batch) and pads rows that ran dry at the end
of the epoch. How each peer is driven, and why that is its best honest use, is written in RESULTS.md.
"""

from __future__ import annotations

import gc
import multiprocessing
from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from benchmarks.torch_baseline import TorchBaseline
from benchmarks.workloads import FRAME_SHAPE, SyntheticFrames, write_chunk
from streamcli.stats import LoaderStats


def shared_uint8(*shape: int) -> tuple[torch.Tensor, npt.NDArray[np.uint8]]:
    """A uint8 tensor allocated straight in shared memory, as ``default_collate`` does inside a worker.

    Sending it from a DataLoader worker then passes a file descriptor instead of copying it into shm first.
    """
    storage = torch.UntypedStorage._new_shared(int(np.prod(shape)))  # type: ignore[no-untyped-call]
    t = torch.empty(0, dtype=torch.uint8).set_(storage).view(*shape)
    return t, t.numpy()


def frames_of(batch: Any) -> torch.Tensor:
    """The ``(T, B, 3, 64, 64)`` frame tensor of whatever a candidate yielded."""
    return batch if isinstance(batch, torch.Tensor) else batch["frame"]


def item_order(source: SyntheticFrames, seed: int) -> list[int]:
    """The seeded shuffle of items that the peers use (streamcli shuffles with its own seed)."""
    return [int(i) for i in np.random.default_rng(seed).permutation(len(source.items()))]


class Candidate:
    """One epoch of one loader. ``iter()`` it once, then ``close()``."""

    name = "?"

    def __iter__(self) -> Iterator[Any]:
        raise NotImplementedError

    def close(self) -> None:
        gc.collect()

    def extra(self) -> dict[str, Any]:
        """Loader-specific counters to report (e.g. streamcli's stats, seqtools' stream opens)."""
        return {}

    @property
    def stats(self) -> LoaderStats | None:
        """The loader's own counters, when it keeps them (read by ``streamcli.bench.time_run``)."""
        return None


# --- streamcli ---------------------------------------------------------------------------------------------


class StreamcliCandidate(Candidate):
    name = "streamcli"

    def __init__(self, source: SyntheticFrames, b: int, t: int, w: int, seed: int = 0, **kw: Any) -> None:
        from streamcli import StreamLoader

        self.loader = StreamLoader(
            source, b, t, num_workers=w, seed=seed, shuffle=True, boundary="pad", epoch_end="pad", **kw
        )

    def __iter__(self) -> Iterator[Any]:
        return iter(self.loader)

    @property
    def stats(self) -> LoaderStats:
        return self.loader.stats

    def stream_name(self, stream: int) -> str:
        return self.loader.stream_name(stream)

    def close(self) -> None:
        self.loader.close()
        super().close()

    def extra(self) -> dict[str, Any]:
        s = self.loader.stats
        return {
            "stats_wait_p50_ms": s.wait_percentile(50) * 1e3,
            "stats_first_batch_s": s.first_batch_s,
            "copies": s.copies,
        }


# --- torch DataLoader: the hand-written baseline (each worker yields its rows' (T, B/W, ...) chunk) -------


class TorchCandidate(Candidate):
    """``torch_baseline.TorchBaseline``, with the peers' item order and fork workers (torch's default start method
    on Linux)."""

    name = "torch DataLoader"

    def __init__(self, source: SyntheticFrames, b: int, t: int, w: int, seed: int = 0) -> None:
        self.base = TorchBaseline(source, b, t, w, seed=seed, shuffle=True, mp_context=None)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.base)

    @property
    def stats(self) -> LoaderStats:
        return self.base.stats

    def close(self) -> None:
        self.base.close()
        super().close()


# --- pytorch-stream-dataloader 1.0 ------------------------------------------------------------------------


def _psd_stream(source: SyntheticFrames, t: int, item: int) -> Iterator[torch.Tensor]:
    """The per-stream iterator psd asks for: (T, 3, 64, 64) chunks, the last one zero-padded."""
    steps = source.open(item)
    while True:
        chunk, arr = shared_uint8(t, *FRAME_SHAPE)
        n, ended = write_chunk(steps, arr)
        if n:
            yield chunk
        if ended:
            return


def _psd_collate(rows: Iterator[torch.Tensor]) -> torch.Tensor:
    return torch.stack(list(rows), dim=1)


class PsdCandidate(Candidate):
    """``StreamDataLoader(StreamDataset(items, stream_fn, B, "zeros", zeros), W, collate)`` as in its README."""

    name = "pytorch-stream-dataloader"

    def __init__(self, source: SyntheticFrames, b: int, t: int, w: int, seed: int = 0) -> None:
        from functools import partial

        if w < 1:
            raise ValueError(f"pytorch-stream-dataloader needs workers: {w=} must be >= 1")
        from pytorch_stream_dataloader.stream_dataloader import StreamDataLoader
        from pytorch_stream_dataloader.stream_dataset import StreamDataset

        fill = torch.zeros((t, *FRAME_SHAPE), dtype=torch.uint8)
        ds = StreamDataset(item_order(source, seed), partial(_psd_stream, source, t), b, "zeros", fill)
        self.dl = StreamDataLoader(ds, w, _psd_collate)

    def __iter__(self) -> Iterator[torch.Tensor]:
        return iter(self.dl)


# --- seqtools 1.4.1 ---------------------------------------------------------------------------------------


def plan_rows(source: SyntheticFrames, order: list[int], b: int, t: int) -> npt.NDArray[np.int64]:
    """The pad-boundary schedule: ``plan[k, r] = (item, start position)`` of row r in batch k, or (-1, 0).

    A row that frees takes the next item (ties: lowest row), as a coherent loader does.
    """
    free_at = [0] * b
    placed: list[tuple[int, int, int]] = []  # (row, first batch, item)
    for item in order:
        r = min(range(b), key=lambda i: (free_at[i], i))
        placed.append((r, free_at[r], item))
        free_at[r] += -(-source.length(item) // t)
    plan = np.full((max(free_at), b, 2), (-1, 0), np.int64)
    for r, k0, item in placed:
        for j in range(-(-source.length(item) // t)):
            plan[k0 + j, r] = (item, j * t)
    return plan


class PlannedBatches:
    """An indexable of jobs for ``seqtools.prefetch``: job j = batches ``[jK, jK+K)`` as ``(K, T, B, ...)``.

    seqtools workers take jobs from a shared queue, so consecutive jobs land on different workers. Each
    worker keeps its rows' open iterators; if a job continues where that worker stopped it reads on,
    otherwise it re-opens the stream with ``open(item, start)``, which pays the open cost again.
    """

    def __init__(self, source: SyntheticFrames, plan: npt.NDArray[np.int64], t: int, k: int) -> None:
        self.source, self.plan, self.t, self.k = source, plan, t, k
        self.opens = multiprocessing.get_context("fork").Value("q", 0)
        self.its: dict[int, tuple[int, int, Iterator[dict[str, npt.NDArray[np.uint8]]]]] = {}

    def __len__(self) -> int:
        return -(-len(self.plan) // self.k)

    def __getitem__(self, j: int) -> npt.NDArray[np.uint8]:
        if not 0 <= j < len(self):
            raise IndexError(j)
        b = self.plan.shape[1]
        out = np.zeros((self.k, self.t, b, *FRAME_SHAPE), np.uint8)
        for kk in range(self.k):
            k = j * self.k + kk
            if k >= len(self.plan):
                break
            for r in range(b):
                item, pos = (int(x) for x in self.plan[k, r])
                if item < 0:
                    continue
                cached = self.its.get(r)
                if cached is None or cached[:2] != (item, pos):
                    cached = (item, pos, self.source.open(item, pos))
                    with self.opens.get_lock():
                        self.opens.value += 1
                n, _ = write_chunk(cached[2], out[kk, :, r])
                self.its[r] = (item, pos + n, cached[2])
        return out


class SeqtoolsCandidate(Candidate):
    """``seqtools.prefetch(PlannedBatches, nworkers=W, method="process", shm_size=...)``, zero-copy via shm.

    With ``W=0`` the jobs are read in-process, without ``prefetch``.
    """

    name = "seqtools"

    def __init__(self, source: SyntheticFrames, b: int, t: int, w: int, seed: int = 0, k: int = 1) -> None:
        import seqtools

        self.k = k
        self.jobs = PlannedBatches(source, plan_rows(source, item_order(source, seed), b, t), t, k)
        buffered = max(6, 2 * w + 2)
        slot = self.k * t * b * int(np.prod(FRAME_SHAPE)) + 4096
        self.seq: Any = self.jobs
        if w > 0:
            self.seq = seqtools.prefetch(
                self.jobs, nworkers=w, method="process", max_buffered=buffered, shm_size=slot * buffered
            )
        self.name = f"seqtools (K={k})"

    def __iter__(self) -> Iterator[torch.Tensor]:
        left = len(self.jobs.plan)
        for job in self.seq:
            for kk in range(min(self.k, left)):
                yield torch.from_numpy(job[kk])
            left -= self.k
            del job

    def close(self) -> None:
        del self.seq
        super().close()

    def extra(self) -> dict[str, Any]:
        return {"stream_opens": int(self.jobs.opens.value)}
