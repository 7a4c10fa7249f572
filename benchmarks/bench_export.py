"""Benchmark: export resume cost (seek vs start over) and the Ray engine against the local one.

    python benchmarks/bench_export.py              # ~3 minutes; prints Markdown tables
    python benchmarks/bench_export.py --repeats 1  # smoke run

Workload: the camera source at 64x64, 16 streams of 2000 steps, B=8, T=16, one epoch (250 batches, 0.4 GB),
shards of 4 MB, exported in-process (workers=0) so that local and Ray tasks do the same work per CPU.

1. Resume: an export is interrupted at 90% (an exception from the progress callback, after which complete
   shards and their loader states are on disk); ``--resume`` then seeks to the last complete shard. Compared
   with the same export started over. Medians of ``--repeats`` runs.
2. Ray: ``export_on_ray`` with a local Ray of 2 CPUs and 2 partitions, against ``export_loader`` (local,
   one process). Ray's start-up (``ray.init``) is timed separately from the export itself; the files of both
   are compared byte for byte.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from streamcli import StreamLoader, load_source
from streamcli.shards import make_header
from streamcli.shards.exporting import export_loader

OPTIONS: dict[str, Any] = {"count": 16, "steps": 2000, "size": (64, 64)}
SOURCE: dict[str, Any] = {"plugin": "camera", "arg": None, "options": OPTIONS}
LOADER = {"batch_size": 8, "time_steps": 16, "seed": 0}


class Stop(Exception):
    pass


def loader() -> StreamLoader:
    return StreamLoader(load_source("camera", **OPTIONS), 8, 16, seed=0)


def header(ld: StreamLoader) -> dict[str, Any]:
    return make_header(fields=ld.fields, batch_size=8, time_steps=16, layout="TB", source=SOURCE, loader=LOADER,
                       shard_bytes=4_000_000, compress=False)  # fmt: skip


def export(out: Path, *, stop_at: float | None = None, mode: str = "new") -> tuple[float, int]:
    """Seconds and batches written (of this call)."""
    with loader() as ld:
        total = len(ld)
        h = header(ld)
        seen = [0, 0]

        def progress(n: int, _b: int) -> None:
            seen[0] = seen[0] or n
            seen[1] = n
            if stop_at is not None and n >= stop_at * total:
                raise Stop

        t = time.perf_counter()
        try:
            export_loader(ld, out, h, epochs=1, mode=mode, progress=progress)
        except Stop:
            pass
        return time.perf_counter() - t, seen[1] - seen[0] + 1


def files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-ray", action="store_true")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-export-"))
    try:
        full, resumed = [], []
        for r in range(args.repeats):
            a, b = root / f"full{r}", root / f"part{r}"
            full.append(export(a)[0])
            export(b, stop_at=0.9)
            resumed.append(export(b, mode="resume")[0])
            assert files(a) == files(b), "a resumed export differs from an uninterrupted one"
        f, s = statistics.median(full), statistics.median(resumed)
        print("\n| export (camera 64x64, 16 x 2000 steps, B=8, T=16) | seconds | vs full |\n|---|---:|---:|")
        print(f"| uninterrupted | {f:.2f} | 1.00x |")
        print(f"| `--resume` after a stop at 90% (seeks to the last complete shard) | {s:.2f} | {s / f:.2f}x |")
        if args.no_ray:
            return
        import ray

        from streamcli.shards.on_ray import Job, export_on_ray

        with loader() as ld:
            h, total = header(ld), len(ld)
        local_s, ray_s, init_s = [], [], []
        nbytes = 0
        for r in range(args.repeats):
            a, b = root / f"l{r}", root / f"r{r}"
            local_s.append(export(a)[0])
            t = time.perf_counter()
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
            init_s.append(time.perf_counter() - t)
            try:
                job = Job(source=SOURCE, loader=LOADER, header=h, out_dir=str(b), epochs=1, total=total)
                t = time.perf_counter()
                export_on_ray(job, mode="new", partitions=2)
                ray_s.append(time.perf_counter() - t)
            finally:
                ray.shutdown()
            assert files(a) == files(b), "the Ray export differs from the local one"
            nbytes = sum(p.stat().st_size for p in a.iterdir())
        lm, rm, im = statistics.median(local_s), statistics.median(ray_s), statistics.median(init_s)
        print(f"\n| engine ({nbytes / 1e6:.0f} MB, 2 CPUs) | export s | MB/s | vs local |\n|---|---:|---:|---:|")
        print(f"| local (one process) | {lm:.2f} | {nbytes / 1e6 / lm:.0f} | 1.00x |")
        print(f"| ray, 2 partitions (start-up excluded) | {rm:.2f} | {nbytes / 1e6 / rm:.0f} | {lm / rm:.2f}x |")
        print(f"| ray start-up (`ray.init`, 2 CPUs), separately | {im:.2f} | | |")
        print(f"\nmedian of {args.repeats}; files byte-identical in every run")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
