"""Benchmark: object storage against local disk, on a local S3 protocol server (moto, in its own process).

    python benchmarks/bench_storage.py               # about a minute; prints a Markdown table
    python benchmarks/bench_storage.py --repeats 1   # smoke run (``make bench`` runs it)

Two comparisons, each row interleaved with its baseline within every repeat, each figure the median of
``--repeats`` passes, and each ratio the median of the per-repeat ratios:

- replay: ``ShardReader`` over camera batches (``size=64x64``, B=8, T=16, 4 MB shards) exported once to a
  local folder and once to ``s3://`` on the moto server, every byte of every batch touched;
- the cache: ``Cache.get`` of objects already cached, then a read of the file, against a plain read of the
  same local files: the hit path as a source sees it (checked lately, so no request), and with ``fresh_s=0``
  (one HEAD request per hit to check the object is unchanged).

The server runs on loopback, so these figures are the cost of the protocol and of streamcli's reads
(ranged GETs, retries armed), not of a network: real object storage adds its latency per request.
"""

from __future__ import annotations

import argparse
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

from streamcli import Batch, ShardReader, StreamLoader, load_source
from streamcli.shards import export, make_header

B, T = 8, 16
CAMERA = {"count": 16, "steps": 128, "size": (64, 64)}
OBJECTS, OBJECT_BYTES = 16, 1 << 20


@contextmanager
def moto_server() -> Iterator[str]:
    """A moto S3 server in a subprocess on a free loopback port; yields its endpoint URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("the moto server did not start (pip install 'moto[server]')") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


_BUF = np.empty(64 << 20, np.uint8)


def touch_batches(batches: Iterator[Batch]) -> int:
    """Copy every byte of every batch into one buffer (each byte read, nothing allocated); the bytes touched."""
    n = 0
    for b in batches:
        for t in (*b.data.values(), *b.flags().values()):
            flat = np.ascontiguousarray(t.numpy()).reshape(-1).view(np.uint8)
            _BUF[: flat.nbytes] = flat
            n += flat.nbytes
    return n


def timed(fn: Callable[[], int]) -> tuple[float, int]:
    t0 = time.perf_counter()
    n = fn()
    return time.perf_counter() - t0, n


def compare(rows: dict[str, Callable[[], int]], repeats: int) -> dict[str, tuple[float, float, int]]:
    """Row -> (median seconds, median ratio to the first row, bytes); rows interleaved in every repeat."""
    for fn in rows.values():
        fn()  # warm: page cache, imports, connections
    secs: dict[str, list[float]] = {k: [] for k in rows}
    nbytes: dict[str, int] = {}
    for _ in range(repeats):
        for name, fn in rows.items():
            dt, n = timed(fn)
            secs[name].append(dt)
            nbytes[name] = n
    base = next(iter(rows))
    return {
        k: (statistics.median(v), statistics.median(a / b for a, b in zip(v, secs[base], strict=True)), nbytes[k])
        for k, v in secs.items()
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5, help="timed passes per row (median reported)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    with moto_server() as endpoint, tempfile.TemporaryDirectory(prefix="bench_storage_") as tmp:
        os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1")
        os.environ["AWS_ENDPOINT_URL"] = endpoint
        os.environ["STREAMCLI_CACHE_DIR"] = str(Path(tmp) / "cache")
        import fsspec

        from streamcli.storage.cache import Cache
        from streamcli.storage.remote import Remote

        fsspec.filesystem("s3").mkdir("bench")
        with StreamLoader(load_source("camera", **CAMERA), B, T, num_workers=0, shuffle=False) as loader:
            batches = [b.clone() for b in loader]
            fields = tuple(loader.fields)
        header = make_header(
            fields=fields, batch_size=B, time_steps=T, layout="TB", source={"plugin": "camera", "options": CAMERA},
            loader={}, shard_bytes=4 << 20, compress=False,
        )  # fmt: skip
        local, url = Path(tmp) / "run", "s3://bench/run"
        export(iter(batches), local, header)
        t0 = time.perf_counter()
        m = export(iter(batches), url, header)
        upload_s = time.perf_counter() - t0
        replay = compare(
            {
                "ShardReader, local disk": lambda: touch_batches(iter(ShardReader(local))),
                "ShardReader, s3:// (moto)": lambda: touch_batches(iter(ShardReader(url))),
            },
            args.repeats,
        )
        files = Path(tmp) / "files"
        files.mkdir()
        remote = Remote("s3://bench/objects")
        rng = np.random.default_rng(0)
        for i in range(OBJECTS):
            data = rng.integers(0, 256, OBJECT_BYTES, dtype=np.uint8).tobytes()
            (files / f"o{i}.bin").write_bytes(data)
            remote.write(f"o{i}.bin", data)
        cache, strict = Cache(limit=1 << 40), Cache(limit=1 << 40, fresh_s=0)
        urls_ = [f"s3://bench/objects/o{i}.bin" for i in range(OBJECTS)]
        cold_t0 = time.perf_counter()
        for u in urls_:
            cache.get(u)
        cold_s = time.perf_counter() - cold_t0
        cached = compare(
            {
                "read local files": lambda: sum(len((files / f"o{i}.bin").read_bytes()) for i in range(OBJECTS)),
                "Cache.get (hit) + read": lambda: sum(len(cache.get(u).read_bytes()) for u in urls_),
                "Cache.get (hit, fresh_s=0: a HEAD each) + read": lambda: sum(
                    len(strict.get(u).read_bytes()) for u in urls_
                ),
            },
            args.repeats,
        )
    print(
        f"python benchmarks/bench_storage.py --repeats {args.repeats}  # {time.strftime('%Y-%m-%d')}, "
        f"{os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, moto server on loopback"
    )
    print("| measure | median s | MB/s | ratio to the first row (median) |")
    print("|---|---|---|---|")
    for rows in (replay, cached):
        for name, (s, ratio, n) in rows.items():
            print(f"| {name} | {s:.3f} | {n / s / 1e6:,.0f} | {ratio:.2f}x |")
    nbytes = sum(int(s["bytes"]) for s in m["shards"])
    print(
        f"\n- export to s3:// (moto): {len(m['shards'])} shards, {nbytes / 1e6:.0f} MB in {upload_s:.2f} s; "
        f"cold cache fill: {OBJECTS} x {OBJECT_BYTES >> 20} MB in {cold_s:.2f} s"
    )


if __name__ == "__main__":
    main()
