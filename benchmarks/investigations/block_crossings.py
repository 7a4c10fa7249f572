"""What a block plugin's stream changes cost the engine: in-process CPU µs a batch against a hand loop over the same
plugin, for short clips and for clips ten times longer, stage by stage.

    python benchmarks/investigations/block_crossings.py              # about 1 min: 5 interleaved rounds
    python benchmarks/investigations/block_crossings.py --rounds 3 --batches 200

The plugin is ``bench_small_steps``'s ``MemmapClips`` (views of one memory-mapped file of ``(3, 32, 32)`` uint8
frames, one block per clip), B=64, T=16, ``boundary="pack"``; the hand loop is ``bench_small_steps.PluginLoop``
(``open`` each item, copy out of its blocks, set ``valid`` and ``is_first``). Clips of 16-128 frames change stream
about 14 times a batch; clips of 160-1280 about 1.4 times. The engine's cost beyond the hand loop is fitted as
``a + b x (stream changes a batch)`` from the two, so ``b`` is what one stream change costs the engine (its claim,
its plan, its flags, opening and closing it) beyond what the hand loop pays for it, and ``a`` what a batch costs
beyond it whatever the streams do. The stages are timed as in ``bench_loader_costs.py`` (CPU, ``time.thread_time``)
and the last line says what the ratio would be if the schedule, flags and summary cost nothing (the parts a
compiled kernel could take: ``benchmarks/KERNEL.md``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.bench_loader_costs import Stages
from benchmarks.bench_small_steps import CLIP_B, CLIP_SHAPE, CLIP_T, MemmapClips, PluginLoop
from streamcli import StreamLoader

WARMUP = 30
KERNEL = ("schedule", "flags", "summary")


class CountedClips(MemmapClips):
    """``MemmapClips`` that counts its ``open`` calls (the hand loop's stream changes)."""

    opens = 0

    def open(self, item: Any, start: int = 0) -> Any:
        self.opens += 1
        return super().open(item, start)


def clips(into: Path, lo: int, hi: int, n_steps: int, seed: int = 0) -> CountedClips:
    """Clips of ``lo``-``hi`` frames, enough for ``n_steps`` steps, over one file of 16,384 random frames."""
    rng = np.random.default_rng(seed)
    path = into / f"frames_{lo}.u8"
    frames = 16384
    rng.integers(0, 256, (frames, *CLIP_SHAPE), np.uint8).tofile(path)
    lengths = rng.integers(lo, hi + 1, n_steps // ((lo + hi) // 2) + CLIP_B)
    offsets = rng.integers(0, frames - lengths + 1)
    return CountedClips(str(path), list(zip(offsets.tolist(), lengths.tolist(), strict=True)))


def hand(src: CountedClips, n: int) -> tuple[float, float]:
    """CPU µs a batch of the hand loop, and its stream changes a batch."""
    loop = PluginLoop(src, CLIP_B, CLIP_T)
    for _ in range(WARMUP):
        next(loop)
    src.opens = 0
    c0 = time.thread_time()
    for _ in range(n):
        next(loop)
    return 1e6 * (time.thread_time() - c0) / n, src.opens / n


def staged(src: CountedClips, n: int, stages: Stages) -> dict[str, float]:
    """CPU µs a batch of ``StreamLoader(num_workers=0)``, in total and in the timed stages."""
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in stages.targets]
    for (owner, name, label), (_, _, fn) in zip(stages.targets, saved, strict=True):
        setattr(owner, name, stages._timed(fn, label))
    try:
        with StreamLoader(src, CLIP_B, CLIP_T, num_workers=0, seed=0, boundary="pack") as loader:
            it = iter(loader)
            for _ in range(WARMUP):
                next(it)
            stages.spent.clear()
            c0 = time.thread_time()
            for _ in range(n):
                next(it)
            total = time.thread_time() - c0
    finally:
        for owner, name, fn in saved:
            setattr(owner, name, fn)
    out = {k: 1e6 * v / n for k, v in stages.spent.items()}
    out["total"] = 1e6 * total / n
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batches", type=int, default=300)
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.batches < 1:
        ap.error(f"--rounds {args.rounds} --batches {args.batches}: both must be at least 1")
    stages, n = Stages(), args.batches
    need = (WARMUP + n + 8) * CLIP_B * CLIP_T * 2
    rows: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="block_crossings_") as tmp:
        sources = {
            "16-128 frames": clips(Path(tmp), 16, 128, need),
            "160-1280 frames": clips(Path(tmp), 160, 1280, need),
        }
        for r in range(args.rounds):
            for name, src in list(sources.items())[:: -1 if r % 2 else 1]:
                got = rows.setdefault(name, {})
                hand_us, changes = hand(src, n)
                got.setdefault("hand loop over the plugin", []).append(hand_us)
                got.setdefault("stream changes a batch", []).append(changes)
                for stage, us in staged(src, n, stages).items():
                    got.setdefault(stage, []).append(us)
    med = {name: {k: statistics.median(v) for k, v in got.items()} for name, got in rows.items()}
    print(f"Block plugin, B={CLIP_B}, T={CLIP_T}, pack, in-process: CPU µs a batch, median of {args.rounds} rounds\n")
    keys = ["stream changes a batch", "hand loop over the plugin", "total", "schedule", "flags", "summary", "rows"]
    print("| clips | " + " | ".join(keys) + " | streamcli / hand loop (rate) | the same, schedule+flags+summary free |")
    print("|---|" + "---:|" * (len(keys) + 2))
    over = {}
    for name, m in med.items():
        free = m["total"] - sum(m.get(k, 0.0) for k in KERNEL)
        cells = [f"{m.get(k, 0.0):.1f}" for k in keys]
        print(f"| {name} | " + " | ".join(cells) + f" | {m['hand loop over the plugin'] / m['total']:.2f}x | "
              f"{m['hand loop over the plugin'] / free:.2f}x |")  # fmt: skip
        over[name] = (m["stream changes a batch"], m["total"] - m["hand loop over the plugin"])
    (c1, o1), (c2, o2) = over.values()
    b = (o1 - o2) / (c1 - c2) if c1 != c2 else float("nan")
    print(f"\nthe engine beyond the hand loop: {o2 - b * c2:.0f} µs a batch + {b:.1f} µs a stream change")
    return 0


if __name__ == "__main__":
    sys.exit(main())
