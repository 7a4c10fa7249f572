"""Where streamcli's time goes: py-spy samples of the main process and one worker while batches flow.

    pip install py-spy
    python benchmarks/bench_loader_profile.py A 2      # variant A or B, number of workers

Prints the loader's rate and stats, then for each process the share of samples (idle included) per
innermost frame and per enclosing function.
"""

from __future__ import annotations

import collections
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable here and in spawn workers
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.workloads import SyntheticFrames


def summarize(path: str, top: int = 12) -> str:
    total = 0
    leaf: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    for line in Path(path).read_text().splitlines():
        if not line.strip():
            continue
        stack, n_str = line.rsplit(" ", 1)
        n = int(n_str)
        total += n
        frames = stack.split(";")
        leaf[frames[-1]] += n
        for f in set(frames):
            incl[f] += n
    out = [f"  {total} samples; innermost frames:"]
    out += [f"  {100 * c / total:5.1f}%  {f}" for f, c in leaf.most_common(top)]
    out += ["  enclosing functions:"]
    out += [f"  {100 * c / total:5.1f}%  {f}" for f, c in incl.most_common(top + 8)]
    return "\n".join(out)


def main() -> int:
    import psutil
    import torch

    from streamcli import StreamLoader

    variant = sys.argv[1] if len(sys.argv) > 1 else "A"
    workers = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        print("py-spy not found: pip install py-spy", file=sys.stderr)
        return 1
    torch.set_num_threads(1)
    cost = 0.0 if variant == "A" else 100e-6
    source = SyntheticFrames(
        64, 2000, 20000, frame_cost_s=cost, open_cost_s=20 * cost
    )  # a long epoch, so the window stays mid-epoch
    tmp = tempfile.mkdtemp(prefix="bench_loader_profile")
    with StreamLoader(source, 16, 8, num_workers=workers, boundary="pad", epoch_end="pad") as loader:
        it = iter(loader)
        for _ in range(30):
            next(it)
        # The workers: children of the loader, or of its fork server (whose own child it is, as the tracker is).
        kids = [
            p
            for p in psutil.Process().children(recursive=True)
            if "resource_tracker" not in " ".join(p.cmdline()) and not p.children()
        ]
        targets = {"main": os.getpid(), **({"worker 0": kids[0].pid} if kids else {})}
        procs = [
            subprocess.Popen(
                [
                    spy,
                    "record",
                    "-p",
                    str(pid),
                    "-d",
                    "3",
                    "-r",
                    "200",
                    "--idle",
                    "-f",
                    "raw",
                    "-o",
                    f"{tmp}/{name}.txt",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for name, pid in targets.items()
        ]
        n, t0, c0 = 0, time.perf_counter(), time.process_time()
        while n % 32 or any(p.poll() is None for p in procs):  # no extra thread: py-spy samples them all
            batch = next(it)
            del batch
            n += 1
        dt = time.perf_counter() - t0
        s = loader.stats
        print(
            f"variant {variant}, {workers} workers: {n / dt:.0f} batches/s while sampled; main process CPU "
            f"{1e6 * (time.process_time() - c0) / n:.0f} us per batch; worker busy "
            f"{[round(b, 2) for b in s.worker_busy]}; "
            f"wait p50 {1e3 * s.wait_percentile(50):.3f} ms"
        )
    for name in targets:
        print(f"\n{name}:\n{summarize(f'{tmp}/{name}.txt')}")
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
