"""Benchmark: the ``arrays`` source over a folder of ``.npy`` sensor recordings against a hand-written numpy loop.

    python benchmarks/bench_arrays.py                 # 5 rounds, about a minute
    python benchmarks/bench_arrays.py --quick         # 2 rounds of fewer batches
    python benchmarks/bench_arrays.py --workers 0,2   # also with 2 workers

Issue 48's workload: 200 recordings of (1,000-50,000, 12) float32 (log-uniform lengths, about 135 MB in all,
written once to a temporary folder), ``B=64``, ``T=128``. The hand loop is ``bench_small_steps.HandLoop``: each
file memory-mapped, the files in a seeded shuffle, a row taking the next file as soon as its own ends, T rows
slice-copied per row into one ``(T, B, 12)`` array, ``valid`` and ``is_first`` set. It runs over the ``np.memmap``
objects mapped before the timing (as the issue's loop), over plain ndarray views of the same maps (faster to slice:
the stricter baseline), and mapping each file when a row takes it (``LazyMaps``: streamcli opens each stream's
window then, inside the timed batches). streamcli runs ``load_source("arrays", folder)`` with ``boundary="pack"``
(a row takes its next stream at once, like the loop). Every round runs each row once, interleaved, the order
reversed every other round; ratios are medians of the rounds' ratios.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import cast

import numpy as np

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import report
from benchmarks.bench_small_steps import HAND, HAND_V, WARMUP, Plan, hand_rate, rounds, streamcli_rate, vs
from streamcli import load_source

ROOT = Path(__file__).resolve().parents[1]
B, T, CHANNELS = 64, 128, 12


def write_recordings(into: Path, n: int = 200, low: int = 1_000, high: int = 50_000, seed: int = 0) -> list[Path]:
    """``n`` recordings of log-uniform lengths in [low, high] rows of ``CHANNELS`` float32 channels."""
    rng = np.random.default_rng(seed)
    lengths = np.exp(rng.uniform(np.log(low), np.log(high), n)).astype(np.int64)
    paths = []
    for i, rows in enumerate(lengths.tolist()):
        path = into / f"rec_{i:03d}.npy"
        np.save(path, rng.standard_normal((rows, CHANNELS), dtype=np.float32))
        paths.append(path)
    return paths


class LazyMaps(Sequence[np.ndarray]):
    """The files, each memory-mapped (``np.load(mmap_mode="r")``) when the hand loop's row takes it: the loop that
    opens the next file when one ends, as streamcli opens each stream's window when a row starts it."""

    def __init__(self, paths: Sequence[str]) -> None:
        self.paths = list(paths)

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, k: int) -> np.ndarray:  # type: ignore[override]
        return cast(np.ndarray, np.load(self.paths[k], mmap_mode="r"))


HAND_LAZY = "hand loop mapping each file as a row takes it"


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2 rounds of fewer batches")
    ap.add_argument("--rounds", type=int, help="rounds (default 5, quick 2)")
    ap.add_argument("--batches", type=int, help="timed batches per run (default 200, quick 60)")
    ap.add_argument("--workers", default="0", help="streamcli worker counts, comma-separated (default 0)")
    ap.add_argument("--verbose", "-v", action="store_true", help="print each round's rates")
    args = ap.parse_args(argv)
    plan = Plan(args.rounds or (2 if args.quick else 5), args.batches or (60 if args.quick else 200), WARMUP, 2)
    workers = [int(w) for w in args.workers.split(",") if w.strip()]

    def log(msg: str) -> None:
        if args.verbose:
            print(msg, file=sys.stderr, flush=True)

    print(f"# issue 48 arrays: {report.cpu_model()}, {report.git_version(ROOT / 'streamcli')}, "
          f"{plan.rounds} rounds of {plan.batches} timed batches\n", flush=True)  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bench_arrays_") as tmp:
        paths = write_recordings(Path(tmp))
        source = load_source("arrays", tmp, index="none")
        maps = [np.load(p, mmap_mode="r") for p in source.items()]
        spans = np.asarray([(i, 0, len(a)) for i, a in enumerate(maps)], np.int64)
        steps = int(spans[:, 2].sum())
        log(f"{len(paths)} recordings, {steps:,} rows, {steps * CHANNELS * 4 / 2**20:.0f} MiB")
        if steps < (plan.warmup + plan.batches + 2) * B * T * 1.2:
            raise SystemExit("too few rows for the timed batches: lower --batches")
        views = [np.asarray(a) for a in maps]
        rows: dict[str, Callable[[], float]] = {
            HAND: functools.partial(hand_rate, maps, spans, B, T, plan),
            HAND_V: functools.partial(hand_rate, views, spans, B, T, plan),
            HAND_LAZY: functools.partial(hand_rate, LazyMaps(list(source.items())), spans, B, T, plan),
        }
        for w in workers:
            rows[f"streamcli, {w} workers"] = functools.partial(
                streamcli_rate, source, plan, w, batch_size=B, time_steps=T
            )
        got = rounds(rows, plan.rounds, log)
        del maps, views, rows
    table = []
    for name, rates in got.items():
        rate = statistics.median(rates)
        cells = [name, f"{rate:.0f}", f"{1e3 / rate:.2f}", vs(got, name, HAND), vs(got, name, HAND_V)]
        table.append([*cells, vs(got, name, HAND_LAZY)])
    heads = ["run", "batches/s", "ms/batch", "vs hand loop (np.memmap)", "vs hand loop on ndarray views"]
    heads.append("vs hand loop mapping as it goes")
    print(
        f"### arrays: 200 .npy recordings of (1,000-50,000, {CHANNELS}) float32, B={B}, T={T}, boundary=pack\n\n"
        + report.fmt_table(heads, table)
        + "\n\nGoal (issue 48): streamcli in-process >= 0.9x the hand loop.\n",
        flush=True,
    )


if __name__ == "__main__":
    # Through the package, so that spawned workers unpickle the source by its module name.
    from benchmarks import bench_arrays

    bench_arrays.main()
