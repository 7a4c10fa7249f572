"""This tree's ``fills.flags.write_flags`` and ``fills.windows.fill`` against another tree's, on the same plans.

    python benchmarks/investigations/window_fill_ab.py --other /work/main             # tokens, B=32, T=256
    python benchmarks/investigations/window_fill_ab.py --other /work/main --arrays    # arrays, B=64, T=128

The plans of 300 consecutive in-process batches are recorded from this tree's loader (``bench_tokens``' corpus or
``bench_arrays``' recordings, ``boundary="pack"``), then replayed through each tree's two functions into fresh
arrays of the slot's shapes, the trees alternating and their order reversed every other round: CPU µs a batch
(``time.thread_time``), the median of the rounds' ratios, and a check that both trees write the same flags and data.
``windows.fill`` starts each round with no window open, so it opens them as the run did (a stream's first batch).
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.bench_arrays import write_recordings
from benchmarks.bench_tokens import EOT, write_corpus
from streamcli import StreamLoader, load_source
from streamcli.fills import flags, windows
from streamcli.fills.spec import Faults

FLAG_NAMES = ("first", "valid", "stream", "position", "replayed")


def other_module(tree: Path, name: str) -> ModuleType:
    """``streamcli/fills/<name>.py`` of another tree, importing this tree's modules for what it imports."""
    spec = importlib.util.spec_from_file_location(f"other_{name}", tree / "streamcli" / "fills" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (a dataclass looks its module up)
    spec.loader.exec_module(module)
    return module


def recorded_plans(source: Any, B: int, T: int, n: int = 300) -> list[Any]:
    plans: list[Any] = []
    fill = windows.fill

    def record(v: Any, plan: Any, *args: Any) -> set[int]:
        plans.append(copy.copy(plan))
        return fill(v, plan, *args)

    windows.fill = record  # type: ignore[assignment]
    try:
        with StreamLoader(source, num_workers=0, seed=0, boundary="pack", batch_size=B, time_steps=T) as loader:
            it = iter(loader)
            for _ in range(n + 30):
                next(it)
    finally:
        windows.fill = fill
    return plans[30:]


def views(source: Any, B: int, T: int) -> flags.Views:
    def zeros(dtype: Any, *shape: int) -> np.ndarray:
        return np.zeros((T, B, *shape), dtype)

    data = [zeros(f.np_dtype, *f.shape) for f in source.fields()]
    cursors = [np.zeros((B, 4), np.int64), np.zeros((B, 4), np.int64)]
    return flags.Views(data, *[zeros(t) for t in (bool, bool, np.int64, np.int64, bool)], *cursors)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--other", type=Path, required=True, help="the other tree's root (e.g. /work/main)")
    ap.add_argument("--arrays", action="store_true", help="the arrays source (default: tokens)")
    ap.add_argument("--rounds", type=int, default=8)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="window_fill_ab_") as tmp:
        if args.arrays:
            write_recordings(Path(tmp))
            source, B, T = load_source("arrays", tmp, index="none"), 64, 128
        else:
            write_corpus(Path(tmp) / "train.bin")
            source, B, T = load_source("tokens", str(Path(tmp) / "train.bin"), eot=EOT, index="none"), 32, 256
        items = source.items()
        plans = recorded_plans(source, B, T)
        steps = np.arange(T, dtype=np.int64)
        trees = {"this tree": (flags, windows), str(args.other): (other_module(args.other, "flags"),
                 other_module(args.other, "windows"))}  # fmt: skip
        spent: dict[str, dict[str, list[float]]] = {"write_flags": {}, "windows.fill": {}}
        written: dict[str, list[np.ndarray]] = {}
        for r in range(args.rounds):
            for name in list(trees)[:: -1 if r % 2 else 1]:
                fl, wi = trees[name]
                v = views(source, B, T)
                faults = Faults("ab", source, items, "raise", lambda skip: None)
                w = wi.Windows(source, source.fields(), faults, np.zeros(4, np.int64))
                c0 = time.thread_time()
                for plan in plans:
                    fl.write_flags(v, plan, steps)
                c1 = time.thread_time()
                for plan in plans:
                    wi.fill(v, plan, w, faults, 0)
                c2 = time.thread_time()
                spent["write_flags"].setdefault(name, []).append((c1 - c0) / len(plans) * 1e6)
                spent["windows.fill"].setdefault(name, []).append((c2 - c1) / len(plans) * 1e6)
                written[name] = [*(a.copy() for a in v.data), *(getattr(v, f).copy() for f in FLAG_NAMES)]
        same = all(np.array_equal(a, b) for a, b in zip(*written.values(), strict=True))
        runs = statistics.mean(len(p.runs) for p in plans)
    print(f"{'arrays' if args.arrays else 'tokens'}, B={B}, T={T}, {runs:.1f} runs a batch; same output: {same}")
    mine, other = trees
    for stage, got in spent.items():
        ratios = [a / b for a, b in zip(got[mine], got[other], strict=True)]
        print(
            f"{stage}: this tree {statistics.median(got[mine]):.1f} µs, {other} {statistics.median(got[other]):.1f} "
            f"µs a batch (CPU); this / other {statistics.median(ratios):.2f}x (rounds {min(ratios):.2f}-"
            f"{max(ratios):.2f})"
        )


if __name__ == "__main__":
    main()
