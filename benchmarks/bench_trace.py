"""What tracing costs: the A8 workload (``benchmarks.workloads``) with ``trace=`` off and on, interleaved round by
round, each run in a fresh process; with ``--base DIR`` also the library as it was before the trace's hooks
(``git archive COMMIT streamcli | tar -x -C DIR``), to show that tracing off costs nothing.

    python benchmarks/bench_trace.py --rounds 5
    python benchmarks/bench_trace.py --rounds 5 --base /tmp/base   # with the library before the hooks
    python benchmarks/bench_trace.py --rounds 12 --base /tmp/base --workers 0 --cpu   # by CPU time: less noise

Prints the median batches/s of each configuration per worker count, and the ratios to "off": the median of the
rounds' paired ratios, and every round's ratio sorted, so that their range shows how far the host's noise reaches.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
B, T, BATCHES, WARMUP = 16, 8, 400, 20


def one(workers: int, trace: bool, cpu: bool = False) -> float:
    """Batches per second of one run (after ``WARMUP`` untimed batches), in this process; ``cpu``: per second of
    this process's CPU time rather than of the wall clock (in process, ``workers=0``, that is all the loader's work,
    and other jobs on a shared host take little of it)."""
    clock = time.process_time if cpu else time.perf_counter
    sys.path.insert(0, str(ROOT))
    from benchmarks.workloads import workload
    from streamcli import StreamLoader

    kw: dict[str, Any] = {"trace": os.path.join(tempfile.mkdtemp(), "t.json")} if trace else {}  # (base: no trace=)
    with StreamLoader(workload("A8"), B, T, num_workers=workers, **kw) as loader:
        it = iter(loader)
        for _ in range(WARMUP):
            next(it)
        t0 = clock()
        for _ in range(BATCHES):
            next(it)
        return BATCHES / (clock() - t0)


def run(config: str, workers: int, base: str | None, cpu: bool = False) -> float:
    env = dict(os.environ)
    if config == "base":
        assert base is not None
        env["PYTHONPATH"] = base  # the old library shadows this tree's
    code = f"import benchmarks.bench_trace as b; print(b.one({workers}, {config == 'on'}, {cpu}))"
    out = subprocess.run([sys.executable, "-c", code], cwd=base if config == "base" else ROOT, env=env,
                         capture_output=True, text=True, check=True)  # fmt: skip
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workers", default="0,2", help="comma list of worker counts")
    parser.add_argument("--base", default=None, help="a folder holding the library before the hooks (streamcli/)")
    parser.add_argument("--cpu", action="store_true", help="time by CPU seconds of the process (for --workers 0)")
    args = parser.parse_args()
    configs = ["off", "on"] + (["base"] if args.base else [])
    if args.base:  # the old tree needs the benchmarks package too
        (Path(args.base) / "benchmarks").mkdir(exist_ok=True)
        for name in ("__init__.py", "workloads.py", "bench_trace.py"):
            (Path(args.base) / "benchmarks" / name).write_text((ROOT / "benchmarks" / name).read_text())
    got: dict[tuple[str, int], list[float]] = {}
    for r in range(args.rounds):
        for w in [int(x) for x in args.workers.split(",")]:
            for c in configs if r % 2 == 0 else configs[::-1]:
                got.setdefault((c, w), []).append(run(c, w, args.base, args.cpu))
    table = {f"{c} w={w}": statistics.median(v) for (c, w), v in got.items()}
    # The host's speed swings between runs: each round's ratio to "off", measured side by side, then their median.
    paired = {
        f"{c}/off w={w}": statistics.median(x / y for x, y in zip(v, got[("off", w)], strict=True))
        for (c, w), v in got.items()
        if c != "off"
    }
    for (c, w), v in sorted(got.items(), key=lambda x: (x[0][1], x[0][0])):
        mid, off = statistics.median(v), statistics.median(got[("off", w)])
        print(f"workers={w} {c:>4}: {mid:8.1f} batches/s  ratio to off {mid / off:.3f}  runs {[round(x) for x in v]}")
    print(json.dumps(table))
    print("median of the rounds' ratios:", json.dumps({k: round(v, 3) for k, v in paired.items()}))
    spread = {
        f"{c}/off w={w}": sorted(round(x / y, 3) for x, y in zip(v, got[("off", w)], strict=True))
        for (c, w), v in got.items()
        if c != "off"
    }
    print("the rounds' ratios, sorted (their range):", json.dumps(spread))


if __name__ == "__main__":
    main()
