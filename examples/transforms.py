"""Augmentation that stays the same along every stream: a random crop and flip of a camera's (or videos') frames.

    python examples/transforms.py                          # 8 virtual camera streams, 2 workers
    python examples/transforms.py --workers 0 --batches 4
    python examples/transforms.py --video tests/data/video  # a folder of videos

A clip cut into batches of T steps gets one crop offset and one flip decision for all its frames: the transform
runs in the workers on each block of frames as it is read, and draws from ``ctx.seed``, which is fixed for one
stream in one epoch (and differs between streams and epochs). So the draw is the same whatever the worker count,
the chunking into batches, or a resume. ``Gamma`` shows how to write your own: a module-level class (workers
receive a pickled copy) whose draws come from ``ctx.rng()``.

The script checks what it claims: every frame it receives equals the stream's frames transformed as one block.
The same augmentation from the command line: ``streamcli preview camera --transform crop=96,flip``.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from streamcli import StreamLoader, load_source
from streamcli.source import iter_steps
from streamcli.transforms import Compose, Context, HorizontalFlip, RandomCrop, stream_seed


class Gamma:
    """A gamma curve drawn once per stream and epoch from ``[1 / high, high]`` (uint8 frames)."""

    def __init__(self, high: float = 1.5, field: str = "frame") -> None:
        self.high, self.field = high, field

    def __call__(self, block: dict[str, np.ndarray], ctx: Context) -> dict[str, np.ndarray]:
        g = np.exp(ctx.rng().uniform(-np.log(self.high), np.log(self.high)))
        lut = np.clip(255.0 * (np.arange(256) / 255.0) ** g + 0.5, 0, 255).astype(np.uint8)
        return {**block, self.field: lut[block[self.field]]}  # same shape and dtype: no fields() member needed


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--video", help="a folder of videos instead of the virtual camera")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batches", type=int, default=6)
    ap.add_argument("--crop", type=int, default=96)
    args = ap.parse_args(argv)

    if args.video:
        source = load_source("video", args.video, size=(128, 128), scan=True)
    else:
        source = load_source("camera", 8, steps=24, size=(128, 160))
    transform = Compose([RandomCrop(args.crop), HorizontalFlip(0.5), Gamma()])
    seed = 0
    with StreamLoader(source, 4, 8, num_workers=args.workers, seed=seed, transform=transform) as loader:
        print(f"{loader.plugin}: {', '.join(f.describe() for f in loader.fields)}")
        items = loader.items
        whole: dict[int, np.ndarray] = {}  # each stream transformed in one block, to check against
        for k, batch in enumerate(loader):
            if k == args.batches:
                break
            frames = batch["frame"].numpy()  # (T, B, C, h, w)
            valid, stream, position = batch.valid.numpy(), batch.stream.numpy(), batch.position.numpy()
            for t, b in zip(*np.nonzero(valid), strict=True):
                i = int(stream[t, b])
                if i not in whole:
                    whole[i] = _whole_stream(source, items[i], i, transform, seed, batch.epoch)
                assert np.array_equal(frames[t, b], whole[i][position[t, b]]), f"stream {i} step {position[t, b]}"
            print(f"batch {k}: {frames.shape}, rows reading streams {sorted(set(stream[valid].tolist()))}")
    print(f"every frame matched its stream's one draw ({len(whole)} streams checked)")


def _whole_stream(source: Any, item: Any, i: int, transform: Any, seed: int, epoch: int) -> np.ndarray:
    """Stream ``i`` read in full and transformed as one block, with the context the workers use."""
    steps = list(iter_steps(source, item))
    block = {f.name: np.stack([np.asarray(s[f.name]) for s in steps]) for f in source.fields()}
    out: np.ndarray = transform(block, Context(i, 0, epoch, stream_seed(seed, epoch, i)))["frame"]
    return out


if __name__ == "__main__":
    main()
