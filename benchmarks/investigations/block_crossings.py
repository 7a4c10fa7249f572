"""What a block plugin's stream changes cost the engine: in-process CPU µs a batch against a hand loop over the same
plugin, for short clips and for clips ten times longer, stage by stage.

    python benchmarks/investigations/block_crossings.py              # about 1 min: 5 interleaved rounds
    python benchmarks/investigations/block_crossings.py --rounds 3 --batches 200

The plugin is ``bench_small_steps``'s ``MemmapClips`` (views of one memory-mapped file of ``(3, 32, 32)`` uint8
frames, one block per clip), B=64, T=16, ``boundary="pack"``; the hand loop is ``bench_small_steps.PluginLoop``
(``open`` each item, copy out of its blocks, set ``valid`` and ``is_first``). Clips of 16-128 frames change stream
about 14 times a batch; clips of 160-1280 about 1.4 times. A third row reads workload A8's frames as blocks of up
to 8 (``workloads.BlockFrames``, streams of 200-2000 steps) at B=16, T=8, outside the fit. The engine's cost beyond
the hand loop is fitted, round by round, as ``a + b x (stream changes a batch)`` from the two clip rows, so ``b``
is what one stream change costs the engine (its claim, its plan, its flags, opening and closing it) beyond what
the hand loop pays for it, and ``a`` what a batch costs beyond it whatever the streams do. The stages are timed as
in ``bench_loader_costs.py`` (CPU, ``time.thread_time``), and the last column says what the ratio would be if the
schedule, flags and summary cost nothing (the parts a compiled kernel could take: ``benchmarks/KERNEL.md``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.bench_loader_costs import Stages
from benchmarks.bench_small_steps import CLIP_B, CLIP_SHAPE, CLIP_T, MemmapClips, PluginLoop
from benchmarks.workloads import workload
from streamcli import BaseSource, StreamLoader

WARMUP = 30
KERNEL = ("schedule", "flags", "summary")


def clips(into: Path, lo: int, hi: int, n_steps: int, seed: int = 0) -> MemmapClips:
    """Clips of ``lo``-``hi`` frames, enough for ``n_steps`` steps, over one file of 16,384 random frames."""
    rng = np.random.default_rng(seed)
    path = into / f"frames_{lo}.u8"
    frames = 16384
    rng.integers(0, 256, (frames, *CLIP_SHAPE), np.uint8).tofile(path)
    lengths = rng.integers(lo, hi + 1, n_steps // ((lo + hi) // 2) + CLIP_B)
    offsets = rng.integers(0, frames - lengths + 1)
    return MemmapClips(str(path), list(zip(offsets.tolist(), lengths.tolist(), strict=True)))


def hand(src: BaseSource, n: int, B: int, T: int) -> tuple[float, float]:
    """CPU µs a batch of the hand loop, and its stream changes a batch (counted in ``n`` more batches, untimed)."""
    loop = PluginLoop(src, B, T)
    for _ in range(WARMUP):
        next(loop)
    c0 = time.thread_time()
    for _ in range(n):
        next(loop)
    spent = time.thread_time() - c0
    changes = 0
    for _ in range(n):
        next(loop)
        changes += int(loop.is_first.sum())
    return 1e6 * spent / n, changes / n


def staged(src: BaseSource, n: int, B: int, T: int, stages: Stages) -> dict[str, float]:
    """CPU µs a batch of ``StreamLoader(num_workers=0)``, in total and in the timed stages."""
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in stages.targets]
    for (owner, name, label), (_, _, fn) in zip(stages.targets, saved, strict=True):
        setattr(owner, name, stages._timed(fn, label))
    try:
        with StreamLoader(src, B, T, num_workers=0, seed=0, boundary="pack") as loader:
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


def spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f}x ({min(xs):.2f}-{max(xs):.2f})"


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
        sources: dict[str, tuple[BaseSource, int, int]] = {
            "16-128 frames": (clips(Path(tmp), 16, 128, need), CLIP_B, CLIP_T),
            "160-1280 frames": (clips(Path(tmp), 160, 1280, need), CLIP_B, CLIP_T),
            "A8 as blocks, B=16, T=8": (workload("A8b"), 16, 8),
        }
        for r in range(args.rounds):
            for name, (src, B, T) in list(sources.items())[:: -1 if r % 2 else 1]:
                got = rows.setdefault(name, {})
                hand_us, changes = hand(src, n, B, T)
                got.setdefault("hand loop over the plugin", []).append(hand_us)
                got.setdefault("stream changes a batch", []).append(changes)
                for stage, us in staged(src, n, B, T, stages).items():
                    got.setdefault(stage, []).append(us)
    print(f"Block plugins, pack, in-process: CPU µs a batch, median of {args.rounds} rounds (clips: B={CLIP_B}, "
          f"T={CLIP_T}); the ratios are the medians of the rounds' own, with their range\n")  # fmt: skip
    keys = ["stream changes a batch", "hand loop over the plugin", "total", "schedule", "flags", "summary", "rows"]
    heads = ["plugin", *keys, "streamcli / hand loop (rate)", "the same, schedule+flags+summary free"]
    print("| " + " | ".join(heads) + " |")
    print("|---|" + "---:|" * (len(heads) - 1))
    for name, got in rows.items():
        hands, total = got["hand loop over the plugin"], got["total"]
        free = [t - sum(got[k][i] for k in KERNEL if k in got) for i, t in enumerate(total)]
        cells = [f"{statistics.median(got.get(k, [0.0])):.1f}" for k in keys]
        cells += [
            spread([h / t for h, t in zip(hands, total, strict=True)]),
            spread([h / f for h, f in zip(hands, free, strict=True)]),
        ]
        print(f"| {name} | " + " | ".join(cells) + " |")
    fits = []  # each round's (µs a batch, µs a stream change) beyond the hand loop, from the two clip sources
    short, long_ = rows["16-128 frames"], rows["160-1280 frames"]
    for i in range(args.rounds):
        (c1, o1), (c2, o2) = ((g["stream changes a batch"][i], g["total"][i] - g["hand loop over the plugin"][i])
                              for g in (short, long_))  # fmt: skip
        b = (o1 - o2) / (c1 - c2)
        fits.append((o2 - b * c2, b))
    a_med, b_med = statistics.median(f[0] for f in fits), statistics.median(f[1] for f in fits)
    print(f"\nthe clips: the engine beyond the hand loop: {a_med:.0f} µs a batch + {b_med:.1f} µs a stream change "
          f"(rounds: {', '.join(f'{a:.0f} + {b:.1f}' for a, b in fits)})")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
