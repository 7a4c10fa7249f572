"""Benchmark: how long a loader with worker processes takes to give its first batch, by start method.

    python benchmarks/bench_startup.py                  # 2 workers, 7 rounds, spawn against forkserver
    python benchmarks/bench_startup.py --workers 4 --repeats 9
    python benchmarks/bench_startup.py --torch          # a training script's case: a .py file importing torch

Each round builds a ``StreamLoader`` over the shipped text (``tests/data/text``), takes its first batch and
closes it, then does the same with a second loader in the same process (a fork server is running by then),
once per start method, the methods alternating from round to round. Every measured loader runs in a
fresh interpreter that has imported streamcli and torch already, so the figure is what the start method costs:
starting the workers and their imports, not the caller's own. Reported: medians over the rounds of the wall
time to the first batch and of the CPU seconds that the loader's processes used until then (the caller
and every descendant: the workers, the fork server with its imports, the resource tracker), and the ratio of
spawn to forkserver.

``--torch`` runs the measured program as a script file (``python train.py``), not ``python -c``: workers then
have a main module to import, and it imports torch, as every training script does. That is the case the fork
server exists for: the main module is imported once, by the server, and never by a worker (``workers.server``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_ONE = """
import json, sys, time
import psutil
import torch  # the caller's own imports, outside the figure
from streamcli import StreamLoader, load_source

def cpu():
    # CPU seconds of this process and every live descendant (the workers, a fork server, the tracker)
    total = 0.0
    for p in [psutil.Process(), *psutil.Process().children(recursive=True)]:
        t = p.cpu_times()
        total += t.user + t.system
    return total

if __name__ == "__main__":
    source = load_source("text", sys.argv[1], width=1)
    out = {}
    for which in ("first", "next"):  # the process's first loader, then another one
        c0, t0 = cpu(), time.perf_counter()
        loader = StreamLoader(source, 8, 16, num_workers=int(sys.argv[2]), segment=256, mp_context=sys.argv[3])
        next(iter(loader))
        out[which + "_s"], out[which + "_cpu_s"] = time.perf_counter() - t0, cpu() - c0
        loader.close()
    print(json.dumps(out))
"""


def one(method: str, workers: int, script: Path | None) -> dict[str, float]:
    program = [str(script)] if script is not None else ["-c", _ONE]
    out = subprocess.run(
        [sys.executable, *program, str(ROOT / "tests" / "data" / "text"), str(workers), method],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--torch", action="store_true", help="run the program as a script file that imports torch")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "train.py"
        script.write_text(_ONE)
        report(args, script if args.torch else None)


def report(args: argparse.Namespace, script: Path | None) -> None:
    methods = ["spawn", "forkserver"]
    runs: dict[str, list[dict[str, float]]] = {m: [] for m in methods}
    for r in range(args.repeats):
        for m in methods if r % 2 == 0 else reversed(methods):
            runs[m].append(one(m, args.workers, script))
    keys = ("first_s", "first_cpu_s", "next_s", "next_cpu_s")
    med = {m: {k: statistics.median(x[k] for x in runs[m]) for k in keys} for m in methods}
    case = "a script file importing torch" if script is not None else "python -c"
    print(f"{args.workers} workers, {case}, medians of {args.repeats} rounds")
    print("| start method | first loader: first batch (s) | CPU (s) | next loader: first batch (s) | CPU (s) |")
    print("|---|---|---|---|---|")
    for m in methods:
        print(f"| {m} | " + " | ".join(f"{med[m][k]:.3f}" for k in keys) + " |")
    spawn, fork = med["spawn"], med["forkserver"]
    print("spawn / forkserver: " + ", ".join(f"{k} {spawn[k] / fork[k]:.2f}x" for k in keys))


if __name__ == "__main__":
    main()
