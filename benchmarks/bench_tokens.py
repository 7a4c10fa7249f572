"""Benchmark (issue 47): the ``tokens`` source over a flat token file against a hand-written numpy loop.

    python benchmarks/bench_small_steps.py --tokens            # this section, 5 rounds
    python benchmarks/bench_tokens.py --quick                  # the same, alone, 2 short rounds
    python benchmarks/bench_tokens.py --batch-size 512         # where the fixed cost a batch weighs less

A nanoGPT-style file of about 20M uint16 ids (random ids below 50256, an end-of-text id 50256 after each
document of 700-2100 ids, about 1,400 on average) is written to a temporary folder. ``B=32``, ``T=256``, one id a
step, ``boundary="pack"``. The rows:

- the hand loop: what a competent user writes (``TokenHandLoop``): memory-map the file, find the documents with
  one ``np.flatnonzero``, shuffle them, and per batch slice-copy each row's next T ids into one int64 ``(T, B)``
  array, taking the row's next document as soon as its own ends, with ``valid`` and ``is_first``;
- its bare slice copies: the same copies replayed from a trace, without the bookkeeping;
- streamcli with 0, 1 and 2 workers, and the best of them per round;
- streamcli over ``UserTokens``, the window plugin a user would write over the same file, in process: what the
  built-in source costs beyond it.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from collections.abc import Sequence
from typing import Any

from benchmarks import report
from benchmarks.rounds import Plan, Rates, rounds, streamcli_rate, timed, vs
from streamcli import BaseSource, Field, load_source

TOKENS_B, TOKENS_T, TOKENS_IDS, EOT = 32, 256, 20_000_000, 50256
Copy = tuple[int, int, int, int]  # (position in the file, t, n, row): one slice copy of the hand loop


def write_corpus(path: Path, n_ids: int = TOKENS_IDS, seed: int = 0) -> int:
    """A flat uint16 token file of about ``n_ids`` ids, the end-of-text id after each document; returns the
    number of documents."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, EOT, n_ids, dtype=np.uint16)
    ends = np.cumsum(rng.integers(700, 2101, n_ids // 700))
    ends = ends[ends < n_ids]
    ids[ends] = EOT
    ids.tofile(path)
    return len(ends)


class TokenHandLoop:
    """The user's loop: documents from one scan of the memory map, shuffled; rows continue their document."""

    def __init__(self, path: str, B: int, T: int, seed: int = 0, trace: list[Copy] | None = None) -> None:
        self.ids = np.memmap(path, np.uint16, mode="r")
        eots = np.flatnonzero(self.ids == EOT)
        starts, ends = np.concatenate([[0], eots + 1]), np.concatenate([eots, [len(self.ids)]])
        keep = ends > starts
        self.docs = np.stack([starts[keep], ends[keep]], 1).tolist()
        self.rng = np.random.default_rng(seed)
        self.order, self.next = self.rng.permutation(len(self.docs)).tolist(), 0
        self.B, self.T, self.trace = B, T, trace
        self.pos, self.end = [0] * B, [0] * B
        self.out = np.zeros((T, B), np.int64)
        self.valid, self.is_first = np.zeros((T, B), bool), np.zeros((T, B), bool)

    def __iter__(self) -> Iterator[np.ndarray]:
        return self

    def __next__(self) -> np.ndarray:
        out, ids, T, pos, end = self.out, self.ids, self.T, self.pos, self.end
        self.valid[:] = True  # every row always has a next document (a new pass when they run out)
        self.is_first[:] = False
        for b in range(self.B):
            t = 0
            while t < T:
                if pos[b] >= end[b]:
                    if self.next == len(self.order):
                        self.order, self.next = self.rng.permutation(len(self.docs)).tolist(), 0
                    pos[b], end[b] = self.docs[self.order[self.next]]
                    self.next += 1
                    self.is_first[t, b] = True
                p = pos[b]
                n = min(T - t, end[b] - p)
                out[t : t + n, b] = ids[p : p + n]
                if self.trace is not None:
                    self.trace.append((p, t, n, b))
                pos[b] = p + n
                t += n
        return out


class UserTokens(BaseSource):
    """A user's window plugin over the file: the documents from one ``flatnonzero``, a memmap view per document."""

    block_steps = True

    def __init__(self, path: str) -> None:
        ids = np.memmap(path, np.uint16, mode="r")
        eots = np.flatnonzero(ids == EOT)
        starts, ends = np.concatenate([[0], eots + 1]), np.concatenate([eots, [len(ids)]])
        keep = ends > starts
        self.path, self.starts, self.lens = path, starts[keep], (ends - starts)[keep]
        self._ids: np.ndarray | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_ids": None}  # each process maps the file itself

    def items(self) -> Sequence[int]:
        return range(len(self.lens))

    def fields(self) -> Sequence[Field]:
        return [Field("tokens", (1,), "int64")]

    def length(self, item: Any) -> int:
        return int(self.lens[item])

    def window(self, item: Any) -> dict[str, np.ndarray]:
        if self._ids is None:
            self._ids = np.asarray(np.memmap(self.path, np.uint16, mode="r"))
        a = int(self.starts[item])
        return {"tokens": self._ids[a : a + int(self.lens[item])].reshape(-1, 1)}

    def open(self, item: Any, start: int = 0) -> Iterator[dict[str, np.ndarray]]:
        yield {"tokens": self.window(item)["tokens"][start:].astype(np.int64)}


def hand_rate(path: str, B: int, T: int, plan: Plan) -> float:
    return 1.0 / timed(TokenHandLoop(path, B, T), plan.warmup, plan.batches)


def bare_rate(path: str, B: int, T: int, plan: Plan) -> float:
    """Batches/s of the hand loop's slice copies alone (from a plain view of the map), replayed from a trace."""
    trace: list[Copy] = []
    loop = TokenHandLoop(path, B, T, trace=trace)
    for _ in range(plan.warmup):
        next(loop)
    del trace[:]
    for _ in range(plan.batches):
        next(loop)
    ids, out = np.asarray(loop.ids), loop.out
    t0 = time.perf_counter()
    for p, t, n, b in trace:
        out[t : t + n, b] = ids[p : p + n]
    return plan.batches / (time.perf_counter() - t0)


HAND, BARE = "hand loop", "bare slice copies"


def section_tokens(plan: Plan, log: Callable[[str], None], B: int = TOKENS_B) -> str:
    T = TOKENS_T
    with tempfile.TemporaryDirectory(prefix="bench_tokens_") as tmp:
        path = str(Path(tmp) / "train.bin")
        docs = write_corpus(Path(path))
        t0 = time.perf_counter()
        source = load_source("tokens", path, eot=EOT, index="none")
        n_items = len(source.items())
        scan = time.perf_counter() - t0
        log(f"tokens: {TOKENS_IDS:,} ids, {docs:,} documents ({n_items:,} found in {scan:.2f} s)")
        rows: dict[str, Callable[[], float]] = {
            HAND: functools.partial(hand_rate, path, B, T, plan),
            BARE: functools.partial(bare_rate, path, B, T, plan),
        }
        for w in (0, 1, 2):
            if w <= plan.max_workers:
                rows[f"streamcli, {w} workers"] = functools.partial(
                    streamcli_rate, source, plan, w, batch_size=B, time_steps=T
                )
        rows["streamcli over a user's window plugin, 0 workers"] = functools.partial(
            streamcli_rate, UserTokens(path), plan, 0, batch_size=B, time_steps=T
        )
        got: Rates = rounds(rows, plan.rounds, log)
    ours = [k for k in got if k.startswith("streamcli,")]
    got["streamcli, best worker count"] = [max(got[k][r] for k in ours) for r in range(plan.rounds)]
    table = []
    for name, rates in got.items():
        rate = statistics.median(rates)
        table.append([name, f"{rate * B * T / 1e6:.2f}", f"{1e3 / rate:.3f}", vs(got, name, HAND), vs(got, name, BARE)])
    heads = ["run", "M ids/s", "ms/batch", "vs hand loop", "vs bare slice copies"]
    best = [max(ours, key=lambda k: got[k][r]).split(", ")[1] for r in range(plan.rounds)]
    return (
        f"### (e) token file: width=1, B={B}, T={T}, {TOKENS_IDS:,} uint16 ids, documents of ~1,400 ids, "
        f"boundary=pack (document scan at construction: {scan:.2f} s)\n\n"
        + report.fmt_table(heads, table)
        + f"\n\nbest worker count per round: {', '.join(best)}. Goals (issue 47): streamcli 0 workers >= 0.9x the "
        "hand loop; best worker count >= 0.9x the bare slice copies.\n"
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--batch-size", "-b", type=int, default=TOKENS_B, help=f"rows B (default {TOKENS_B})")
    ap.add_argument("--quick", action="store_true", help="2 rounds of 40 batches")
    ap.add_argument("--rounds", type=int, help="rounds (default 5, quick 2)")
    ap.add_argument("--batches", type=int, help="timed batches per run (default 200, quick 40)")
    ap.add_argument("--max-workers", type=int, default=2, help="skip worker counts above this (default 2)")
    ap.add_argument("--verbose", "-v", action="store_true", help="print each round's rates")
    args = ap.parse_args(argv)
    plan = Plan(args.rounds or (2 if args.quick else 5), args.batches or (40 if args.quick else 200), 24,
                args.max_workers)  # fmt: skip
    if plan.rounds < 1 or plan.batches < 1 or args.batch_size < 1:
        ap.error("--rounds, --batches and --batch-size must be at least 1")

    def log(msg: str) -> None:
        if args.verbose:
            print(msg, file=sys.stderr, flush=True)

    print(section_tokens(plan, log, args.batch_size), flush=True)


if __name__ == "__main__":
    # Through the package, so that spawned workers unpickle what they need by its module name.
    from benchmarks import bench_tokens as this

    this.main()
