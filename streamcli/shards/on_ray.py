"""Export on a Ray cluster: the same shards, byte for byte, as a local export of the same command.

The export's batches are cut into contiguous runs of whole shards, one Ray task per run. A task builds the
source itself (from the plugin name, argument and options), computes the loader's state at its first batch
from the streams' lengths alone (``streamcli.scheduled.resume``: nothing before it is decoded), loads it, and writes its
shards with the same writer as a local export. The driver writes the one manifest. Shards are renamed into
place whole, so after a task or the driver dies, ``--resume`` keeps every shard on disk and reruns the rest.

Ray is optional (``pip install 'streamcli[ray]'``). On a cluster of several machines the export folder must be
a filesystem every node sees (NFS, a cloud bucket mounted with FUSE, ...), since each task writes its own
shards there, or a URL (``s3://bucket/run``): each task then uploads its shards itself, with the credentials
the nodes find in their environment.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from streamcli.errors import RemoteTraceback, ShardError, StreamcliError
from streamcli.scheduled.state import first_difference
from streamcli.shards import folder_writer, remote_writer
from streamcli.shards.exporting import iter_limit
from streamcli.shards.folder_writer import write_shard_file
from streamcli.shards.format import MANIFEST, PARTIAL, ShardInfo, shard_name
from streamcli.shards.lock import FolderLock
from streamcli.shards.ray_local import init_local, release_guards
from streamcli.shards.records import write_json
from streamcli.shards.remote_lock import RemoteLock
from streamcli.shards.writer import batch_arrays
from streamcli.storage import urls
from streamcli.storage.remote import Remote

RAY_HINT = "pip install 'streamcli[ray]'"
_POLL_S = 0.25


def import_ray() -> Any:
    """The ``ray`` module, or ``ImportError`` saying how to install it."""
    try:
        import ray
    except ImportError:
        raise ImportError(f"the ray engine needs Ray, which is not installed: {RAY_HINT}") from None
    return ray


@dataclass(frozen=True)
class Job:
    """Everything a task needs to rebuild the loader and write its shards. Plain data, picklable."""

    source: Mapping[str, Any]  # {"plugin": ..., "arg": ..., "options": {...}}
    loader: Mapping[str, Any]  # StreamLoader keyword arguments, batch_size and time_steps included
    header: Mapping[str, Any]  # the manifest minus its shard list
    out_dir: str
    epochs: int
    total: int  # batches in the whole export
    fingerprint: Mapping[str, Any] | None = None  # the driver's loader's: a task must see the same data


def shard_runs(todo: list[int], partitions: int) -> list[tuple[int, int]]:
    """Split the shard numbers ``todo`` (sorted) into at most ``partitions`` contiguous runs ``[a, b)``,
    balanced by count; a gap in ``todo`` always ends a run."""
    if not todo:
        return []
    groups: list[list[int]] = [[todo[0]]]
    for i in todo[1:]:
        if i == groups[-1][-1] + 1:
            groups[-1].append(i)
        else:
            groups.append([i])
    runs = [(g[0], g[-1] + 1) for g in groups]
    while len(runs) < partitions:  # split the longest run until there are enough
        j = max(range(len(runs)), key=lambda q: runs[q][1] - runs[q][0])
        a, b = runs[j]
        if b - a < 2:
            break
        m = (a + b) // 2
        runs[j : j + 1] = [(a, m), (m, b)]
    return sorted(runs)


def export_range(job: Job, first: int, end: int) -> list[dict[str, Any]]:
    """Write shards ``first .. end-1``; runs inside a Ray task (or anywhere). Returns their shard records."""
    from streamcli.loader import StreamLoader
    from streamcli.plugins import load_source
    from streamcli.scheduled.resume import state_after
    from streamcli.source import call_setup_worker

    k = int(job.header["batches_per_shard"])
    start, stop = first * k, min(end * k, job.total)
    spec = job.source
    source = (
        load_source(spec["plugin"], spec["arg"], **spec["options"])
        if spec.get("arg") is not None
        else (load_source(spec["plugin"], **spec["options"]))
    )
    call_setup_worker(source)  # a task is one CPU: the source's thread limits apply, as in a worker
    kw = dict(job.loader)
    B, T = kw.pop("batch_size"), kw.pop("time_steps")
    out: list[dict[str, Any]] = []
    with StreamLoader(source, B, T, **kw) as loader:
        if job.fingerprint is not None:
            _check_same_data(loader.state_dict()["fingerprint"], job.fingerprint)
        if start:
            lengths = [loader.stream_length(i) for i in range(len(loader.items))]  # errors: SourceError
            if any(n is None for n in lengths):
                raise ShardError(f"source {loader.plugin!r} does not report every stream's length")
            fp = loader.state_dict()["fingerprint"]
            loader.load_state_dict(state_after(StreamLoader, [int(n) for n in lengths], start, fp, **job.loader))  # type: ignore[arg-type]
        epochs_left = job.epochs - loader.state_dict()["epoch"]
        pending: list[dict[str, np.ndarray]] = []
        shard = first
        for batch in iter_limit((iter(loader) for _ in range(epochs_left)), stop - start):
            pending.append(batch_arrays(batch))
            del batch
            if len(pending) == k:
                out.append(_write(job, shard, pending).to_json())
                pending, shard = [], shard + 1
        if pending:
            out.append(_write(job, shard, pending).to_json())
    return out


def _write(job: Job, shard: int, pending: list[dict[str, np.ndarray]]) -> ShardInfo:
    """Shard number ``shard``, written into the export folder, or uploaded to its URL (from the task itself)."""
    if urls.is_remote(job.out_dir):
        return remote_writer.put_shard(Remote(job.out_dir), shard, pending, job.header)
    return write_shard_file(Path(job.out_dir) / shard_name(shard), pending, job.header)


def _check_same_data(here: Mapping[str, Any], driver: Mapping[str, Any]) -> None:
    """A task rebuilds the source from its arguments: refuse to write shards from data other than the driver's
    (files added, removed or changed in between), which would not fit the driver's plan."""
    key = first_difference(driver, here)
    if key is not None:
        what = {"num_items": "number of items", "items": "item list", "lengths": "items' lengths"}.get(key, key)
        raise ShardError(
            f"a Ray task sees another {what} than the driver did ({driver.get(key)!r} there, {here.get(key)!r} "
            "here): the data changed during the export, or the workers see other files; make the input the "
            "same on every node and rerun with --resume"
        )


def export_on_ray(
    job: Job,
    *,
    mode: str,
    partitions: int | None = None,
    address: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    on_started: Callable[[float], None] | None = None,
) -> dict[str, Any]:
    """Run ``job`` on Ray and return the manifest; ``mode`` is "new", "overwrite" or "resume".

    ``progress(batches_on_disk, total)`` is called as shards appear; ``on_started(seconds)`` once Ray is up.
    Ctrl-C cancels the tasks and leaves a resumable export. The driver holds the folder's lock throughout (the
    tasks only write their shards), so a second export into the folder is refused with ``ExportBusyError``.
    """
    ray = import_ray()
    if urls.is_remote(job.out_dir):
        with RemoteLock(Remote(job.out_dir)) as remote_lock:
            return _export_on_ray(ray, remote_lock, job, mode, partitions, address, progress, on_started)
    with FolderLock(job.out_dir) as lock:
        return _export_on_ray(ray, lock, job, mode, partitions, address, progress, on_started)


def _export_on_ray(
    ray: Any,
    lock: Any,
    job: Job,
    mode: str,
    partitions: int | None,
    address: str | None,
    progress: Callable[[int, int], None] | None,
    on_started: Callable[[float], None] | None,
) -> dict[str, Any]:
    out = Path(job.out_dir)
    k = int(job.header["batches_per_shard"])
    n_shards = -(-job.total // k)
    remote = None
    if urls.is_remote(job.out_dir):
        remote = Remote(job.out_dir)
        done = remote_writer.prepare_ray(remote, job.header, mode, n_shards, k, job.total, lock)
    else:
        done = folder_writer.prepare_ray(out, job.header, mode, n_shards, k, job.total, lock)
    if done is None:  # already complete
        import json

        if remote is not None:
            return dict(json.loads(remote.read(MANIFEST)))
        return dict(json.loads((out / MANIFEST).read_text()))
    t0 = time.perf_counter()
    started_here = not ray.is_initialized()
    if started_here:
        if address:
            ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
        else:
            init_local(ray)
    try:
        if on_started is not None:
            on_started(time.perf_counter() - t0)
        todo = [i for i in range(n_shards) if i not in done]
        cpus = int(ray.cluster_resources().get("CPU", 1))
        runs = shard_runs(todo, partitions or max(1, cpus))
        task = ray.remote(num_cpus=1, max_retries=0)(export_range)
        refs = [task.remote(job, a, b) for a, b in runs]
        records = {name: done[i] for i, name in ((i, shard_name(i)) for i in done)}
        try:
            pending = list(refs)
            while pending:
                ready, pending = ray.wait(pending, num_returns=len(pending), timeout=_POLL_S)
                for ref in ready:
                    try:
                        got = ray.get(ref)
                    except ray.exceptions.RayTaskError as exc:
                        err = task_error(exc)
                        raise err from err.__cause__
                    for rec in got:
                        records[rec["name"]] = rec
                if progress is not None:
                    on_disk = len(records) if remote is not None else _on_disk(out, n_shards)  # a listing costs
                    progress(min(job.total, on_disk * k), job.total)
        except BaseException:
            if not started_here:
                _cancel(ray, refs)
            # else ray.shutdown() below ends the tasks with their owner; cancelling them first races with a task
            # that finishes at that moment, which Ray answers by aborting this process (its task_manager check)
            raise
    finally:
        if started_here:
            ray.shutdown()
            release_guards()
    shards = [records[shard_name(i)] for i in range(n_shards)]
    manifest = dict(job.header)
    manifest["shards"] = shards
    manifest["batches"] = sum(int(s["batches"]) for s in shards)
    if remote is not None:
        lock.check()
        remote_writer.commit(remote, manifest)
        return manifest
    write_json(out / MANIFEST, manifest)  # the commit point, as in a local export
    (out / PARTIAL).unlink(missing_ok=True)
    return manifest


def task_error(exc: Any) -> BaseException:
    """What a failed Ray task raised, for the driver: streamcli's own error (a ``SourceError`` naming the plugin
    and item, say) with the task's traceback as its cause, as a worker's error arrives; else Ray's error."""
    cause = getattr(exc, "cause", None)
    if not isinstance(cause, StreamcliError):
        return exc  # type: ignore[no-any-return]
    cause.__cause__ = RemoteTraceback(str(getattr(exc, "traceback_str", None) or exc))  # (``str``: the traceback)
    return cause


def _cancel(ray: Any, refs: list[Any]) -> None:
    """Cancel the tasks still running on a Ray instance this process did not start (and will not shut down).
    Only those not finished: cancelling one as it finishes is the race that Ray may answer with an abort."""
    _, running = ray.wait(refs, num_returns=len(refs), timeout=0)
    for ref in running:
        ray.cancel(ref, force=True)


def _on_disk(out: Path, n_shards: int) -> int:
    return sum(1 for i in range(n_shards) if (out / shard_name(i)).exists())
