"""Benchmark: compressed shards (zstd, deflate) against uncompressed ones: size, export speed, replay speed.

    python benchmarks/bench_compress.py                  # about a minute on 2 cores; prints a Markdown table
    python benchmarks/bench_compress.py --repeats 1      # smoke run
    python benchmarks/bench_compress.py --video DIR      # other clips than tests/data/video

Three workloads, each rendered or decoded once, in-process, then exported from memory into a temporary folder
once per codec (none, zstd at levels 1, 3 and 9, deflate), 32 MB shards:

- camera: the camera source's synthetic frames (``size=96x96``, 8 streams of 192 steps), B=8, T=16;
- video: the real clips of ``tests/data/video`` decoded at 128x128 (B=4, T=16);
- text: the books of ``../shared/data/text`` (or ``tests/data/text``), 64 bytes per step (B=8, T=32).

Streams are cut into segments of T steps, so that each fills one row of a batch: padding is zeros, which would
flatter the ratios.

For each, the table gives the bytes on disk, the ratio to the uncompressed export, export speed (writing the
shards from batches in memory) and replay speed (``ShardReader`` over every batch, every byte of every tensor
copied into one preallocated buffer, as ``bench_replay.py`` does), all in MB/s of uncompressed bytes, and replay
speed as a ratio to the uncompressed export's in the same run; "real steps" is the share of steps that are data,
not padding. The page cache is warm (one untimed pass first),
so replay measures the readers' own cost; rows are interleaved within each repeat, each figure is the median of
``--repeats`` passes.

"pays below" is the storage bandwidth under which the compressed export replays faster than the uncompressed
one, when reading the files is not overlapped with decoding: reading S bytes at bandwidth W and decoding them
costs ``S / W + S / R`` uncompressed and ``S / (ratio * W) + S / Rz`` compressed, equal at
``W = (1 - 1 / ratio) / (1 / Rz - 1 / R)``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from streamcli import Batch, Field, ShardReader, StreamLoader, load_source
from streamcli.shards import export, make_header

ROOT = Path(__file__).resolve().parents[1]
SHARD_BYTES = 32 << 20
CODECS: list[tuple[str, str, int | None]] = [
    ("none", "none", None),
    ("zstd-1", "zstd", 1),
    ("zstd-3", "zstd", 3),
    ("zstd-9", "zstd", 9),
    ("deflate", "deflate", None),
]
Workload = tuple[list[Batch], tuple[Field, ...], int, int]


def batches_of(src: object, b: int, t: int) -> Workload:
    """Every batch of one epoch, the streams cut into segments of ``t`` steps (each fills a row of a batch: padding
    is zeros, which would flatter the ratios)."""
    with StreamLoader(src, b, t, num_workers=0, shuffle=False, segment=t) as loader:  # type: ignore[arg-type]
        return [x.clone() for x in loader], tuple(loader.fields), b, t


def camera() -> Workload:
    return batches_of(load_source("camera", count=8, steps=192, size=(96, 96)), 8, 16)


def video(folder: Path) -> Workload:
    return batches_of(load_source("video", str(folder), size=(128, 128), scan=True), 4, 16)  # scan: lengths


def text(folder: Path) -> Workload:
    return batches_of(load_source("text", str(folder), width=64), 8, 32)


class Toucher:
    """Copy arrays into one preallocated buffer: every byte is read, nothing is allocated."""

    def __init__(self) -> None:
        self.buf = np.empty(64 << 20, np.uint8)
        self.n = 0

    def batch(self, b: Batch) -> None:
        for t in (*b.data.values(), *b.flags().values()):
            flat = np.ascontiguousarray(t.numpy()).reshape(-1).view(np.uint8)
            if flat.nbytes > self.buf.nbytes:
                self.buf = np.empty(flat.nbytes, np.uint8)
            self.buf[: flat.nbytes] = flat
            self.n += flat.nbytes


def write(out: Path, w: Workload, compress: str, level: int | None) -> float:
    """Export ``w`` to ``out`` (replacing it); the seconds it took."""
    batches, fields, b, t = w
    header = make_header(fields=fields, batch_size=b, time_steps=t, layout="TB", source={}, loader={},
                         shard_bytes=SHARD_BYTES, compress=compress, level=level)  # fmt: skip
    t0 = time.perf_counter()
    export(iter(batches), out, header, mode="overwrite")
    return time.perf_counter() - t0


def replay(out: Path, tch: Toucher) -> float:
    t0 = time.perf_counter()
    for b in ShardReader(out):
        tch.batch(b)
    return time.perf_counter() - t0


def disk_bytes(out: Path) -> int:
    return sum(p.stat().st_size for p in out.glob("shard-*.npz"))


def bench(name: str, w: Workload, tmp: Path, repeats: int) -> list[str]:
    """One workload's table rows."""
    outs = {label: tmp / f"{name}-{label}" for label, _, _ in CODECS}
    raw = 0
    for label, compress, level in CODECS:  # the first write is untimed: it warms imports and the page cache
        write(outs[label], w, compress, level)
    raw = disk_bytes(outs["none"])
    tch = Toucher()
    writes: dict[str, list[float]] = {label: [] for label in outs}
    reads: dict[str, list[float]] = {label: [] for label in outs}
    for label in outs:
        replay(outs[label], tch)
    for _ in range(repeats):
        for label, compress, level in CODECS:
            writes[label].append(raw / write(outs[label], w, compress, level) / 1e6)
            tch.n = 0
            dt = replay(outs[label], tch)
            reads[label].append(tch.n / dt / 1e6)
    base = statistics.median(reads["none"])
    rows = []
    for label, _, _ in CODECS:
        size = disk_bytes(outs[label])
        ratio = raw / size
        r_w, r_r = statistics.median(writes[label]), statistics.median(reads[label])
        pays = "" if label == "none" else _pays(ratio, r_r, base)
        real = f"{statistics.mean(float(b.valid.float().mean()) for b in w[0]):.0%}" if label == "none" else ""
        rows.append(
            f"| {name} | {real} | {label} | {size / 1e6:,.1f} | {ratio:.2f}x | {r_w:,.0f} | {r_r:,.0f} "
            f"| {r_r / base:.2f}x | {pays} |"
        )
    return rows


def _pays(ratio: float, rz: float, r: float) -> str:
    """The storage bandwidth (MB/s) below which the compressed export replays faster (see the module docstring)."""
    if ratio <= 1:
        return "never"
    extra = 1 / rz - 1 / r
    return "always" if extra <= 0 else f"{(1 - 1 / ratio) / extra:,.0f} MB/s"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3, help="timed passes per row (median reported)")
    ap.add_argument("--video", type=Path, default=ROOT / "tests" / "data" / "video", help="a folder of clips")
    shared = ROOT.parent / "shared" / "data" / "text"
    books = shared if shared.is_dir() else ROOT / "tests" / "data" / "text"
    ap.add_argument("--text", type=Path, default=books, help="a folder of .txt files")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    workloads: dict[str, Callable[[], Workload]] = {
        "camera": camera,
        "video": lambda: video(args.video),
        "text": lambda: text(args.text),
    }
    lines = [
        "| workload | real steps | codec | MB on disk | ratio | export MB/s | replay MB/s | replay vs none "
        "| pays below |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory(prefix="bench_compress_") as tmp:
        for name, make in workloads.items():
            t0 = time.perf_counter()
            w = make()
            print(f"{name}: {len(w[0])} batches in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
            lines += bench(name, w, Path(tmp), args.repeats)
    import zstandard

    print(
        f"python benchmarks/bench_compress.py --repeats {args.repeats}  # {time.strftime('%Y-%m-%d')}, "
        f"{os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, numpy {np.__version__}, "
        f"zstandard {zstandard.__version__} (libzstd {'.'.join(map(str, zstandard.ZSTD_VERSION))})"
    )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
