"""pin_memory on a CUDA machine: are batches page-locked, identical after the copy to the GPU, and what do the
pinned and pageable paths deliver (batches/s including a non_blocking host-to-device copy)?

Run from the repository root on a machine with CUDA: ``python benchmarks/gpu_pin_memory.py``. It needs no
install: it puts the checkout on ``sys.path``.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "plugins")]

import numpy as np  # noqa: E402
import torch  # noqa: E402

from streamcli import BaseSource, Field, StreamLoader  # noqa: E402


class Frames(BaseSource):
    """64 streams of 300 (3, 128, 128) uint8 frames whose pixels encode (stream, step)."""

    def items(self) -> list[int]:
        return list(range(64))

    def fields(self) -> list[Field]:
        return [Field("frame", (3, 128, 128), "uint8")]

    def length(self, item: int) -> int:
        return 300

    def open(self, item: int, start: int = 0) -> Iterator[dict[str, np.ndarray]]:
        for p in range(start, 300):
            yield {"frame": np.full((3, 128, 128), (item * 7 + p) % 256, np.uint8)}


def run(pin: bool, workers: int) -> tuple[float, bool, bool]:
    rates, pinned, equal = [], True, True
    for _ in range(3):
        with StreamLoader(Frames(), 16, 8, num_workers=workers, pin_memory=pin) as loader:
            start, n = 0.0, 0
            for batch in loader:
                if n == 1:  # time the steady state: workers spawn and import torch before the first batch
                    start = time.perf_counter()
                gpu = batch["frame"].to("cuda", non_blocking=True)
                pinned &= batch["frame"].is_pinned()
                torch.cuda.synchronize()
                if n % 50 == 0:
                    equal &= bool(torch.equal(gpu.cpu(), batch["frame"]))
                n += 1
            rates.append((n - 1) / (time.perf_counter() - start))
    return statistics.median(rates), pinned, equal


def main() -> None:
    if not torch.cuda.is_available():
        sys.exit("no CUDA device here; this check needs one")
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print(f"{'workers':>7} {'pin_memory':>10} {'batches/s':>10} {'pinned':>7} {'equal':>6}")
    for workers in (0, 2):
        for pin in (False, True):
            rate, pinned, equal = run(pin, workers)
            print(f"{workers:>7} {pin!s:>10} {rate:>10.0f} {pinned!s:>7} {equal!s:>6}")


if __name__ == "__main__":
    main()
