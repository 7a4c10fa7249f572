"""Benchmark: issue 24's small-step workloads, streamcli against a hand-written numpy loop doing the same job.

    python benchmarks/bench_small_steps.py                    # all three sections, about 2-3 minutes
    python benchmarks/bench_small_steps.py --text --quick     # one section, fewer rounds and batches
    python benchmarks/bench_small_steps.py --text --folder ~/code  # (a) over your own *.txt files

Sections (all of them when none is named):

- ``--text`` (a): the built-in ``text`` source, ``width=1``, ``B=256``, ``T=256``, ``segment=4096``,
  ``boundary="pack"`` over real text files (tests/data/text and /work/shared/data/text, or ``--folder``),
  linked into a temporary folder as many times as the timed batches need, so that no row runs dry in the
  timed window. The hand loop memory-maps each file, shuffles the segments with a seeded RNG, gives a row the
  next segment when its own ends, slice-copies T steps per row and sets ``valid`` and ``is_first``. Its bare
  slice copies are the same copies replayed from a trace, without the bookkeeping.
- ``--clips`` (b): a user's block plugin over memory-mapped ``(3, 32, 32)`` uint8 clips, ``B=64``, ``T=16``:
  clips are windows of one file of synthetic frames written to a temporary folder at start-up, and the
  plugin yields views of the memmap. The hand loop is the same loop as (a) over the clips; the hand loop over the
  plugin is what a user writes over it (``PluginLoop``: ``open`` each item, copy out of its blocks).
- ``--large`` (d): the same block plugin over ``(3, 224, 224)`` frames, ``B=16``, ``T=8``, against the bare slice
  copies: large frames, where the copy itself sets the pace.
- ``--tokens`` (e): the ``tokens`` source over a flat file of 20M uint16 ids against a hand loop over the same
  memory map (``benchmarks/bench_tokens.py``).
- ``--null`` (c): the engine's own cost, with a block source whose blocks are already in memory (one
  preallocated array, a 1-byte step): µs per row per batch at ``B=256`` and ``1,024``, in-process and with
  2 workers, beside a loop doing only the same slice copies.

Every round runs each row of a section once, in an order reversed every other round; ratios are the median
of the rounds' ratios (``report.ratio``), since this shared host's speed swings within seconds.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import report
from benchmarks.bench_tokens import section_tokens
from benchmarks.rounds import Plan as Plan  # the rounds and their timing, shared with bench_tokens
from benchmarks.rounds import Rates as Rates
from benchmarks.rounds import rounds as rounds
from benchmarks.rounds import streamcli_rate as streamcli_rate
from benchmarks.rounds import timed as timed
from benchmarks.rounds import vs as vs
from streamcli import BaseSource, Field, load_source

ROOT = Path(__file__).resolve().parents[1]
TEXT_FOLDERS = (ROOT / "tests" / "data" / "text", Path("/work/shared/data/text"))
TEXT_B, TEXT_T, TEXT_SEGMENT = 256, 256, 4096
CLIP_B, CLIP_T, CLIP_SHAPE = 64, 16, (3, 32, 32)
LARGE_B, LARGE_T, LARGE_SHAPE = 16, 8, (3, 224, 224)
NULL_BS, NULL_T = (256, 1024), 64
WARMUP = 24  # untimed batches per run: more than a loader's ring holds (prefetch 16 and its extra slots)
_BOM = b"\xef\xbb\xbf"

# --- the hand loop (a, b) ----------------------------------------------------------------------------------

Copy = tuple[np.ndarray, int, int, int, int]  # (source array, position, t, n, row): one slice copy of the loop


class HandLoop:
    """What a user writes without a loader: ``B`` rows over a seeded shuffle of ``spans`` (array index, start,
    end), each row taking the next span as soon as its own ends; per batch it slice-copies T steps per row
    into one preallocated ``(T, B, *step)`` array and sets ``valid`` and ``is_first``. With ``trace`` it
    records its copies, for ``bare_copies``."""

    def __init__(self, arrays: Sequence[np.ndarray], spans: npt.NDArray[np.int64], B: int, T: int, seed: int = 0,
                 trace: list[Copy] | None = None) -> None:  # fmt: skip
        self.arrays, self.spans, self.B, self.T = arrays, spans.tolist(), B, T
        self.rng = np.random.default_rng(seed)
        self.order = self.rng.permutation(len(spans)).tolist()
        self.next = 0
        self.row_array: list[np.ndarray] = [arrays[0]] * B
        self.pos = [0] * B
        self.end = [0] * B
        step = arrays[0].shape[1:]
        self.out = np.zeros((T, B, *step), arrays[0].dtype)
        self.valid = np.zeros((T, B), bool)
        self.is_first = np.zeros((T, B), bool)
        self.trace = trace

    def __iter__(self) -> Iterator[np.ndarray]:
        return self

    def __next__(self) -> np.ndarray:
        out, valid, is_first, T = self.out, self.valid, self.is_first, self.T
        valid[:] = False
        is_first[:] = False
        for b in range(self.B):
            t = 0
            while t < T:
                if self.pos[b] >= self.end[b]:
                    if self.next == len(self.order):  # every span given: the next pass, reshuffled
                        self.order, self.next = self.rng.permutation(len(self.spans)).tolist(), 0
                    a, s, e = self.spans[self.order[self.next]]
                    self.next += 1
                    self.row_array[b], self.pos[b], self.end[b] = self.arrays[a], int(s), int(e)
                    is_first[t, b] = True
                p = self.pos[b]
                n = min(T - t, self.end[b] - p)
                out[t : t + n, b] = self.row_array[b][p : p + n]
                valid[t : t + n, b] = True
                if self.trace is not None:
                    self.trace.append((self.row_array[b], p, t, n, b))
                self.pos[b] = p + n
                t += n
        return out


class PluginLoop:
    """What a user writes over a block plugin without a loader (issue 35's "hand loop over the same plugin"): ``B``
    rows over a seeded shuffle of the source's items, each row opening the next item with ``source.open`` as soon
    as its own stream ends; per batch it copies T steps per row out of the blocks the plugin yields into one
    preallocated ``(T, B, *step)`` array and sets ``valid`` and ``is_first``."""

    def __init__(self, source: BaseSource, B: int, T: int, seed: int = 0) -> None:
        self.source, self.B, self.T = source, B, T
        self.items = list(source.items())
        self.rng = np.random.default_rng(seed)
        self.order = self.rng.permutation(len(self.items)).tolist()
        self.next = 0
        self.its: list[Iterator[Any] | None] = [None] * B
        self.blocks: list[np.ndarray | None] = [None] * B
        self.j = [0] * B
        field = source.fields()[0]
        self.name = field.name
        self.out = np.zeros((T, B, *field.shape), field.dtype)
        self.valid = np.zeros((T, B), bool)
        self.is_first = np.zeros((T, B), bool)

    def __iter__(self) -> Iterator[np.ndarray]:
        return self

    def __next__(self) -> np.ndarray:
        out, valid, is_first, T = self.out, self.valid, self.is_first, self.T
        its, blocks, js = self.its, self.blocks, self.j
        valid[:] = False
        is_first[:] = False
        for b in range(self.B):
            t = 0
            while t < T:
                blk, j = blocks[b], js[b]
                if blk is None or j >= len(blk):
                    it = its[b]
                    step = None if it is None else next(it, None)
                    if step is None:  # the row's stream ended: the next item
                        if self.next == len(self.order):
                            self.order, self.next = self.rng.permutation(len(self.items)).tolist(), 0
                        its[b] = iter(self.source.open(self.items[self.order[self.next]]))
                        self.next += 1
                        blocks[b] = None
                        is_first[t, b] = True
                        continue
                    blk = blocks[b] = step[self.name]
                    j = 0
                n = min(T - t, len(blk) - j)
                out[t : t + n, b] = blk[j : j + n]
                valid[t : t + n, b] = True
                js[b] = j + n
                t += n
        return out


HAND, BARE = "hand loop", "hand loop, bare slice copies"
HAND_V, BARE_V = "hand loop on ndarray views", "bare slice copies on ndarray views"
PLUGIN = "hand loop over the plugin"


def baselines(arrays: Sequence[np.ndarray], spans: npt.NDArray[np.int64], B: int, T: int,
              plan: Plan) -> dict[str, Callable[[], float]]:  # fmt: skip
    """The hand loop and its bare slice copies over ``arrays`` (memmaps, as the issue's loop), and both again
    over plain ndarray views of the same maps: slicing an ``np.memmap`` makes a memmap, which costs a few µs
    more per slice, so the views are the faster, stricter baseline."""
    views = [np.asarray(a) for a in arrays]
    return {
        HAND: functools.partial(hand_rate, arrays, spans, B, T, plan),
        BARE: functools.partial(bare_rate, arrays, spans, B, T, plan),
        HAND_V: functools.partial(hand_rate, views, spans, B, T, plan),
        BARE_V: functools.partial(bare_rate, views, spans, B, T, plan),
    }


def plugin_rate(source: BaseSource, B: int, T: int, plan: Plan) -> float:
    return 1.0 / timed(PluginLoop(source, B, T), plan.warmup, plan.batches)


def hand_rate(arrays: Sequence[np.ndarray], spans: npt.NDArray[np.int64], B: int, T: int, plan: Plan) -> float:
    return 1.0 / timed(HandLoop(arrays, spans, B, T), plan.warmup, plan.batches)


def bare_rate(arrays: Sequence[np.ndarray], spans: npt.NDArray[np.int64], B: int, T: int, plan: Plan) -> float:
    """Batches/s of the hand loop's slice copies alone, replayed from a trace of the same batches."""
    trace: list[Copy] = []
    loop = HandLoop(arrays, spans, B, T, trace=trace)
    for _ in range(plan.warmup):
        next(loop)
    del trace[:]
    for _ in range(plan.batches):
        next(loop)
    out = loop.out
    t0 = time.perf_counter()
    for a, p, t, n, b in trace:
        out[t : t + n, b] = a[p : p + n]
    return plan.batches / (time.perf_counter() - t0)


# --- (a) byte-level text -----------------------------------------------------------------------------------


def text_files(folders: Sequence[Path]) -> list[Path]:
    return sorted(p for f in folders if f.is_dir() for p in f.rglob("*.txt") if p.is_file())


def text_corpus(files: Sequence[Path], min_bytes: int, into: Path) -> Path:
    """A folder of links to ``files``, repeated until they hold ``min_bytes``: enough segments that no row of
    the timed batches runs dry (``boundary="pack"`` refills a row only while the epoch has segments left)."""
    if not files:
        raise SystemExit("no *.txt file found; pass --folder DIR")
    total, copies = sum(p.stat().st_size for p in files), 0
    while copies * total < min_bytes or not copies:
        for i, p in enumerate(files):
            (into / f"{copies:03d}_{i:03d}_{p.name}").symlink_to(p.resolve())
        copies += 1
    return into


def text_spans(paths: Sequence[str], segment: int) -> tuple[list[np.ndarray], npt.NDArray[np.int64]]:
    """Each file memory-mapped once (past a UTF-8 byte-order mark, as the ``text`` source drops it), viewed as
    ``(bytes, 1)`` steps, and every segment as (file, start, end)."""
    arrays, spans = [], []
    for i, path in enumerate(paths):
        raw = np.memmap(path, np.uint8, mode="r")
        skip = len(_BOM) if bytes(raw[:3]) == _BOM else 0
        arrays.append(raw[skip:].reshape(-1, 1))
        n = len(raw) - skip
        spans += [(i, s, min(n, s + segment)) for s in range(0, n, segment)]
    return arrays, np.asarray(spans, np.int64)


def section_text(plan: Plan, folders: Sequence[Path], log: Callable[[str], None]) -> str:
    B, T, seg = TEXT_B, TEXT_T, TEXT_SEGMENT
    files = text_files(folders)
    need = (plan.warmup + plan.batches + seg // T + 4) * B * T  # a row's last segment may start just before
    with tempfile.TemporaryDirectory(prefix="bench_small_steps_text_") as tmp:
        corpus = text_corpus(files, need, Path(tmp))
        source = load_source("text", str(corpus), width=1)
        arrays, spans = text_spans([str(p) for p in source.items()], seg)
        log(f"(a) text: {len(files)} files, {len(source.items())} links, {sum(len(a) for a in arrays):,} bytes, "
            f"{len(spans)} segments")  # fmt: skip
        rows = baselines(arrays, spans, B, T, plan)
        for w in (0, 1, 2):
            if w <= plan.max_workers:
                rows[f"streamcli, {w} workers"] = functools.partial(
                    streamcli_rate, source, plan, w, batch_size=B, time_steps=T, segment=seg
                )
        got = rounds(rows, plan.rounds, log)
    ours = [k for k in got if k.startswith("streamcli")]
    got["streamcli, best worker count"] = [max(got[k][r] for k in ours) for r in range(plan.rounds)]
    table = []
    for name, rates in got.items():
        rate = statistics.median(rates)
        table.append([name, f"{rate * B * T / 1e6:.1f}", f"{1e3 / rate:.2f}", vs(got, name, HAND),
                      vs(got, name, BARE), vs(got, name, BARE_V)])  # fmt: skip
    heads = ["run", "M steps/s", "ms/batch", "vs hand loop", "vs bare slice copies", "vs bare copies on views"]
    best = [max(ours, key=lambda k: got[k][r]).split(", ")[1] for r in range(plan.rounds)]
    return (
        f"### (a) byte-level text: width=1, B={B}, T={T}, segment={seg}, boundary=pack\n\n"
        + report.fmt_table(heads, table)
        + f"\n\nbest worker count per round: {', '.join(best)}. Goals: streamcli 0 workers >= 1.0x the hand loop; "
        "best worker count >= 0.5x the bare slice copies.\n"
    )


# --- (b) a block plugin over memory-mapped clips -----------------------------------------------------------


class MemmapClips(BaseSource):
    """A user's block plugin: clips are ``(offset, length)`` windows of one raw file of ``shape`` uint8 frames
    (``(3, 32, 32)`` by default), memory-mapped once per process; ``open`` yields the rest of a clip as one view
    of the memmap."""

    block_steps = True

    def __init__(self, path: str, clips: Sequence[tuple[int, int]], shape: tuple[int, ...] = CLIP_SHAPE) -> None:
        self.path, self.clips, self.shape = path, [(int(o), int(n)) for o, n in clips], tuple(shape)
        self._frames: np.ndarray | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_frames"] = None  # the memmap is reopened in each worker
        return state

    def frames(self) -> np.ndarray:
        if self._frames is None:
            self._frames = np.memmap(self.path, np.uint8, mode="r").reshape(-1, *self.shape)
        return self._frames

    def items(self) -> Sequence[int]:
        return range(len(self.clips))

    def fields(self) -> Sequence[Field]:
        return [Field("frame", self.shape, "uint8", display="image")]

    def length(self, item: Any) -> int:
        return self.clips[int(item)][1]

    def open(self, item: Any, start: int = 0) -> Iterator[dict[str, Any]]:
        offset, n = self.clips[int(item)]
        if start < n:
            yield {"frame": self.frames()[offset + start : offset + n]}


def make_clips(into: Path, n_clips: int, frames: int, seed: int = 0,
               shape: tuple[int, ...] = CLIP_SHAPE) -> MemmapClips:  # fmt: skip
    """``frames`` random frames in ``into/frames.u8`` and ``n_clips`` clips of 16-128 frames at random offsets
    (they may overlap: the file stays small while the epoch is long)."""
    rng = np.random.default_rng(seed)
    path = into / "frames.u8"
    rng.integers(0, 256, (frames, *shape), np.uint8).tofile(path)
    lengths = rng.integers(16, 129, n_clips)
    offsets = rng.integers(0, frames - lengths + 1)
    return MemmapClips(str(path), list(zip(offsets.tolist(), lengths.tolist(), strict=True)), shape)


def section_clips(plan: Plan, log: Callable[[str], None]) -> str:
    B, T = CLIP_B, CLIP_T
    n_clips = (plan.warmup + plan.batches + 128 // T + 4) * B * T // 72 + B  # clips average 72 frames
    with tempfile.TemporaryDirectory(prefix="bench_small_steps_clips_") as tmp:
        source = make_clips(Path(tmp), n_clips, frames=16384)
        frames = source.frames()
        spans = np.asarray([(0, o, o + n) for o, n in source.clips], np.int64)
        log(f"(b) clips: {n_clips} clips, {frames.nbytes / 2**20:.0f} MiB file")
        rows = baselines([frames], spans, B, T, plan)
        rows[PLUGIN] = functools.partial(plugin_rate, source, B, T, plan)
        for w in (0, 2):
            if w <= plan.max_workers:
                rows[f"streamcli, {w} workers"] = functools.partial(
                    streamcli_rate, source, plan, w, batch_size=B, time_steps=T
                )
        got = rounds(rows, plan.rounds, log)
        del frames, rows
    table = []
    for name, rates in got.items():
        rate = statistics.median(rates)
        gib = rate * B * T * np.prod(CLIP_SHAPE) / 2**30
        cells = [name, f"{rate:.0f}", f"{gib:.2f}", vs(got, name, PLUGIN), vs(got, name, HAND), vs(got, name, HAND_V)]
        w0 = "streamcli, 0 workers"
        cells.append(vs(got, name, w0) if w0 in got and name.startswith("streamcli") else "-")
        table.append(cells)
    heads = ["run", "batches/s", "GiB/s", "vs hand loop over the plugin", "vs hand loop", "vs hand loop on views"]
    heads.append("vs streamcli in-process")
    return (
        f"### (b) block plugin over memory-mapped (3, 32, 32) uint8 clips: B={B}, T={T}, boundary=pack\n\n"
        + report.fmt_table(heads, table)
        + "\n\nGoals: streamcli 0 workers >= 0.9x the hand loop over the plugin (issue 35), >= 0.8x the hand loop over"
        " the arrays (issue 24); 2 workers >= 1.0x in-process.\n"
    )


def section_large(plan: Plan, log: Callable[[str], None]) -> str:
    B, T, shape = LARGE_B, LARGE_T, LARGE_SHAPE
    n_clips = (plan.warmup + plan.batches + 128 // T + 4) * B * T // 72 + B
    with tempfile.TemporaryDirectory(prefix="bench_small_steps_large_") as tmp:
        source = make_clips(Path(tmp), n_clips, frames=512, shape=shape)
        frames = source.frames()
        spans = np.asarray([(0, o, o + n) for o, n in source.clips], np.int64)
        log(f"(d) large frames: {n_clips} clips, {frames.nbytes / 2**20:.0f} MiB file")
        views = [np.asarray(frames)]
        rows: dict[str, Callable[[], float]] = {
            BARE_V: functools.partial(bare_rate, views, spans, B, T, plan),
            HAND: functools.partial(hand_rate, [frames], spans, B, T, plan),
        }
        for w in (0, 2):
            if w <= plan.max_workers:
                rows[f"streamcli, {w} workers"] = functools.partial(
                    streamcli_rate, source, plan, w, batch_size=B, time_steps=T
                )
        got = rounds(rows, plan.rounds, log)
        del frames, views, rows
    table = []
    for name, rates in got.items():
        rate = statistics.median(rates)
        gib = rate * B * T * np.prod(shape) / 2**30
        table.append([name, f"{rate:.0f}", f"{gib:.2f}", vs(got, name, BARE_V), vs(got, name, HAND)])
    heads = ["run", "batches/s", "GiB/s", "vs bare slice copies (the copy limit)", "vs hand loop"]
    return (
        f"### (d) large frames: the block plugin over memory-mapped {shape} uint8 clips, B={B}, T={T}\n\n"
        + report.fmt_table(heads, table)
        + "\n\nGoal (held from the first engine): streamcli at the copy limit.\n"
    )


# --- (c) the engine's own cost ---------------------------------------------------------------------------


class NullBlocks(BaseSource):
    """Streams of ``length`` 1-byte steps whose blocks are views of one preallocated array: nothing to make."""

    block_steps = True

    def __init__(self, n_items: int, length: int = 10**8, block: int = 4096) -> None:
        self.n_items, self.stream_length, self.block = n_items, length, block

    def items(self) -> Sequence[int]:
        return range(self.n_items)

    def fields(self) -> Sequence[Field]:
        return [Field("x", (1,), "uint8")]

    def length(self, item: Any) -> int:
        return self.stream_length

    def open(self, item: Any, start: int = 0) -> Iterator[dict[str, np.ndarray]]:
        blk = np.zeros((self.block, 1), np.uint8)
        for a in range(start, self.stream_length, self.block):
            yield {"x": blk[: min(self.block, self.stream_length - a)]}


def null_copies_rate(B: int, T: int, plan: Plan) -> float:
    """Batches/s of only the slice copies a loader must make: one ``(T, 1)`` copy per row from a block."""
    blk = np.zeros((4096, 1), np.uint8)
    out = np.zeros((T, B, 1), np.uint8)

    def batches() -> Iterator[None]:
        p = 0
        while True:
            p = 0 if p + T > len(blk) else p
            for b in range(B):
                out[:, b] = blk[p : p + T]
            p += T
            yield None

    return 1.0 / timed(batches(), plan.warmup, plan.batches)


def section_null(plan: Plan, log: Callable[[str], None]) -> str:
    T = NULL_T
    rows: dict[str, Callable[[], float]] = {}
    for B in NULL_BS:
        rows[f"B={B}, slice copies alone"] = functools.partial(null_copies_rate, B, T, plan)
        for w in (0, 2):
            if w <= plan.max_workers:
                rows[f"B={B}, streamcli, {w} workers"] = functools.partial(
                    streamcli_rate, NullBlocks(4 * B), plan, w, batch_size=B, time_steps=T
                )
    got = rounds(rows, plan.rounds, log)
    table = []
    for name, rates in got.items():
        B = int(name.split(",")[0][2:])
        per_row = [1e6 / (r * B) for r in rates]
        table.append([name, f"{1e3 / statistics.median(rates):.2f}", f"{statistics.median(per_row):.2f}",
                      f"{min(per_row):.2f}-{max(per_row):.2f}"])  # fmt: skip
    return (
        f"### (c) engine cost, null block source (1-byte steps, blocks in memory): T={T}\n\n"
        + report.fmt_table(["run", "ms/batch", "µs per row per batch (median)", "rounds' range"], table)
        + "\n\nGoal: streamcli <= 2 µs per row per batch at B=256 and 1,024.\n"
    )


# --- main ----------------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--text", action="store_true", help="(a) byte-level text")
    ap.add_argument("--clips", action="store_true", help="(b) block plugin over memory-mapped clips")
    ap.add_argument("--null", action="store_true", help="(c) engine cost with a null block source")
    ap.add_argument("--large", action="store_true", help="(d) large frames (3, 224, 224) against the copy limit")
    ap.add_argument("--tokens", action="store_true", help="(e) a flat token file (issue 47)")
    ap.add_argument("--quick", action="store_true", help="2 rounds of fewer batches (a few seconds a section)")
    ap.add_argument("--rounds", type=int, help="rounds (default 5, quick 2)")
    ap.add_argument("--batches", type=int, help="timed batches per run (default 200, quick 40)")
    ap.add_argument("--max-workers", type=int, default=2, help="skip worker counts above this (default 2)")
    ap.add_argument("--folder", type=Path, action="append", help="(a) text files to read (repeatable)")
    ap.add_argument("--verbose", "-v", action="store_true", help="print each round's rates")
    args = ap.parse_args(argv)
    # Warm-up: more batches than the ring holds, so the batches workers wrote ahead while the loader started are
    # not counted as made in the timed window (they made the short runs of workers look several times faster).
    plan = Plan(args.rounds or (2 if args.quick else 5), args.batches or (40 if args.quick else 200),
                warmup=WARMUP, max_workers=args.max_workers)  # fmt: skip
    if plan.rounds < 1 or plan.batches < 1:
        ap.error(f"--rounds {plan.rounds} and --batches {plan.batches} must be at least 1")
    for folder in args.folder or []:
        if not folder.is_dir():
            ap.error(f"--folder {str(folder)!r} is not a folder; pass a folder of *.txt files")
    everything = not (args.text or args.clips or args.null or args.large or args.tokens)

    def log(msg: str) -> None:
        if args.verbose:
            print(msg, file=sys.stderr, flush=True)

    print(f"# issue 24 small steps: {report.cpu_model()}, {report.git_version(ROOT / 'streamcli')}, "
          f"{plan.rounds} rounds of {plan.batches} timed batches\n", flush=True)  # fmt: skip
    if everything or args.text:
        print(section_text(plan, args.folder or TEXT_FOLDERS, log), flush=True)
    if everything or args.clips:
        print(section_clips(plan, log), flush=True)
    if everything or args.null:
        print(section_null(plan, log), flush=True)
    if everything or args.large:
        print(section_large(plan, log), flush=True)
    if everything or args.tokens:
        print(section_tokens(plan, log), flush=True)


if __name__ == "__main__":
    # Through the package, so that spawned workers unpickle the sources here by their module name.
    from benchmarks import bench_small_steps

    bench_small_steps.main()
