"""What ``Schedule.next_plan`` costs on narrow and wide batches, this tree against a base tree, interleaved.

    git archive 7bde911 streamcli | tar -x -C /tmp/sched2_base   # the tree before the per-row event schedule
    python benchmarks/investigations/schedule_wide.py --base /tmp/sched2_base   # about a minute

Each measurement is a fresh process that imports ``streamcli`` from one tree (a path switch), builds a schedule of
known-length streams (``pad``, T=16) and times ``next_plan`` alone (``time.thread_time``) over a stretch of
batches after a warm-up. The trees alternate within each round; the figure is the median over rounds of the
paired ratio this tree / base (below 1: this tree is quicker).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[2]
T = 16
SHAPES = {  # name -> (B, shortest, longest stream)
    "B16 short": (16, 16, 128),
    "B16 long": (16, 256, 2048),
    "B64 short": (64, 16, 128),
    "B64 long": (64, 256, 2048),
    "B1024 short": (1024, 16, 128),
    "B1024 long": (1024, 256, 2048),
}

CHILD = """
import sys, time, json
sys.path.insert(0, {root!r})
import numpy as np
import streamcli
assert streamcli.__file__.startswith({root!r}), streamcli.__file__
from streamcli.scheduled import cursor
IDLE = 0  # (RowPhase.IDLE; the enum was RowState before issue 49)
from streamcli.scheduled.schedule import Schedule
B, lo, hi, T, warm, n = {B}, {lo}, {hi}, {T}, {warm}, {n}
rng = np.random.default_rng(B + lo)
count = int((warm + n + 4) * T * B / ((lo + hi) / 2)) + 4 * B
lengths = rng.integers(lo, hi + 1, count)
order = np.array([(i, 0, 0, int(m)) for i, m in enumerate(lengths)], np.int64)
start = np.array([cursor.record(-1, 0, IDLE, False, False)] * B, np.int64)
s = Schedule(order, start, 0, 0, T=T, pack=False, segment=0, restream=False)
for _ in range(warm):
    s.next_plan()
claims = 0
c0 = time.thread_time()
for _ in range(n):
    claims += int(s.next_plan().claims.sum())
spent = time.thread_time() - c0
print(json.dumps({{"us": 1e6 * spent / n, "claims": claims / n}}))
"""


def measure(root: Path, B: int, lo: int, hi: int, n: int) -> dict[str, float]:
    code = CHILD.format(root=str(root), B=B, lo=lo, hi=hi, T=T, warm=40, n=n)
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd="/")
    result: dict[str, float] = json.loads(out.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=Path, default=Path("/tmp/sched2_base"), help="a tree holding streamcli/")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--only", default="", help="shapes whose name holds this text")
    args = parser.parse_args()
    print(f"{'shape':12} {'claims/batch':>12} {'base µs':>9} {'this µs':>9} {'ratio':>6}  rounds")
    for name, (B, lo, hi) in SHAPES.items():
        if args.only not in name:
            continue
        base, this, ratios, claims = [], [], [], 0.0
        for r in range(args.rounds):
            pair = {}
            for tree in (args.base, HERE) if r % 2 == 0 else (HERE, args.base):
                pair[tree] = measure(tree, B, lo, hi, args.batches)
            base.append(pair[args.base]["us"])
            this.append(pair[HERE]["us"])
            ratios.append(this[-1] / base[-1])
            claims = pair[HERE]["claims"]
        spread = " ".join(f"{x:.2f}" for x in sorted(ratios))
        mb, mt, mr = statistics.median(base), statistics.median(this), statistics.median(ratios)
        print(f"{name:12} {claims:12.0f} {mb:9.0f} {mt:9.0f} {mr:6.2f}  {spread}")


if __name__ == "__main__":
    main()
