"""Where today's in-process engine spends a batch: cProfile time grouped by mechanism (issue 24's cost model).

    python benchmarks/investigations/profile_engine.py                 # text (a) and null (c) at a few B, T
    python benchmarks/investigations/profile_engine.py --case null:1024:64 --batches 40

Each case builds a ``StreamLoader`` (``num_workers=0``), runs a few batches, then profiles ``--batches`` more.
Every profiled function's own time goes to the mechanism of its module and name (``MECHANISMS``); time in
numpy, torch and the standard library goes to the streamcli function that called it (split by the time each
caller spent there, up to a few levels). Figures are µs per batch and per row per batch; cProfile's own cost
inflates code that makes many small calls, so read the shares and their growth with B and T, and take the
absolute cost from the unprofiled "µs per row per batch" printed beside them.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import bench_small_steps as bench
from streamcli import StreamLoader, load_source

Func = tuple[str, int, str]  # pstats' (file, line, name)

# (module file, function name or "*") -> mechanism; the first match wins.
MECHANISMS: tuple[tuple[str, str, str], ...] = (
    ("write.py", "_claim", "claims (tickets, next stream)"),
    ("write.py", "_claim_planned", "claims (tickets, next stream)"),
    ("write.py", "take", "claims (tickets, next stream)"),
    ("write.py", "_publish", "claims (tickets, next stream)"),
    ("write.py", "_release", "claims (tickets, next stream)"),
    ("write.py", "_after_next_step", "claims (tickets, next stream)"),
    ("claims.py", "*", "claims (tickets, next stream)"),
    ("control.py", "*", "control block (shared counters)"),
    ("write.py", "_open", "stream open (source.open, reopen)"),
    ("write.py", "_reopen", "stream open (source.open, reopen)"),
    ("write.py", "_look", "look-ahead step / next block"),
    ("write.py", "_next_block", "look-ahead step / next block"),
    ("write.py", "_copy", "copy loop (per run / per step)"),
    ("write.py", "run", "row run bookkeeping"),
    ("write.py", "_finish", "cursors, tallies (per row)"),
    ("write.py", "slot_views", "row run bookkeeping"),
    ("write.py", "*", "row run bookkeeping"),
    ("checks.py", "*", "per-block/step checks"),
    ("cursor.py", "*", "cursors, tallies (per row)"),
    ("producer.py", "*", "producer/row objects"),
    ("slots.py", "record", "cursors, tallies (per row)"),
    ("slots.py", "flush", "flags and flush (per run)"),
    ("slots.py", "pad", "flags and flush (per run)"),
    ("slots.py", "*", "flags and flush (per run)"),
    ("produce.py", "*", "work scheduling (produce.work)"),
    ("heavy.py", "*", "heavy streams"),
    ("leases.py", "*", "slot leases (hand-out, give back)"),
    ("ring.py", "*", "slot leases (hand-out, give back)"),
    ("torchio.py", "*", "tensor creation (Batch)"),
    ("batch.py", "*", "tensor creation (Batch)"),
    ("loader.py", "*", "loader (prepare, hand out batch)"),
    ("ahead.py", "*", "loader (prepare, hand out batch)"),
    ("epoch.py", "*", "loader (prepare, hand out batch)"),
    ("stats.py", "*", "loader (prepare, hand out batch)"),
    ("source.py", "*", "source (open, blocks, file reads)"),
    ("text.py", "*", "source (open, blocks, file reads)"),
    ("bench_small_steps.py", "*", "source (open, blocks, file reads)"),
)
OURS = ("/streamcli/", "/streamcli_sources/", "/benchmarks/")


def mechanism(func: Func) -> str | None:
    """The mechanism of one of streamcli's functions (None: not ours)."""
    path, _, name = func
    if not any(part in path for part in OURS):
        return None
    base = Path(path).name
    for module, fn, what in MECHANISMS:
        if base == module and fn in ("*", name):
            return what
    return f"other ({base})"


def attribute(stats: pstats.Stats) -> dict[str, float]:
    """Seconds per mechanism: own time of our functions, plus foreign time passed up to our callers."""
    raw: dict[Func, Any] = stats.stats  # type: ignore[attr-defined]
    out: dict[str, float] = defaultdict(float)

    def give(func: Func, seconds: float, depth: int) -> None:
        what = mechanism(func)
        if what is not None:
            out[what] += seconds
            return
        callers = raw.get(func, (0, 0, 0.0, 0.0, {}))[4]
        total = sum(c[3] for c in callers.values())  # split by the time spent under each caller
        if depth > 4 or not callers or total <= 0:
            out["unattributed (interpreter, libraries)"] += seconds
            return
        for caller, c in callers.items():
            give(caller, seconds * c[3] / total, depth + 1)

    for func, (_, _, tt, _, callers) in raw.items():
        if mechanism(func) is not None:
            out[mechanism(func) or ""] += tt
        elif callers:
            for caller, c in callers.items():
                give(caller, c[2], 1)
        else:
            out["unattributed (interpreter, libraries)"] += tt
    return dict(out)


def loader_for(case: str, tmp: Path, batches: int) -> tuple[StreamLoader, int]:
    """``text`` (section (a) of bench_small_steps, in-process) or ``null:B:T`` (section (c))."""
    kind, *sizes = case.split(":")
    if kind == "text":
        B, T = (int(s) for s in sizes) if sizes else (bench.TEXT_B, bench.TEXT_T)
        need = (batches + 8 + bench.TEXT_SEGMENT // T) * B * T  # no row runs dry (bench_small_steps.text_corpus)
        corpus = bench.text_corpus(bench.text_files(bench.TEXT_FOLDERS), need, tmp)
        source = load_source("text", str(corpus), width=1)
        kw: dict[str, Any] = {"segment": bench.TEXT_SEGMENT}
    elif kind == "null":
        B, T = int(sizes[0]), int(sizes[1])
        source, kw = bench.NullBlocks(4 * B), {}
    else:
        raise SystemExit(f"--case {case!r}: use text[:B:T] or null:B:T")
    return StreamLoader(source, B, T, num_workers=0, seed=0, boundary="pack", **kw), B


def profile(case: str, batches: int, top: int = 0) -> str:
    with tempfile.TemporaryDirectory(prefix="profile_engine_") as tmp:
        loader, B = loader_for(case, Path(tmp), 7 * batches)
        with loader:
            it: Iterator[Any] = iter(loader)
            # Unprofiled, for the absolute figure: the median of 5 windows (the host is shared and noisy).
            plain = statistics.median(bench.timed(it, 3 if i == 0 else 0, batches) for i in range(5))
            prof = cProfile.Profile()
            t0 = time.perf_counter()
            prof.enable()
            for _ in range(batches):
                next(it)
            prof.disable()
            profiled = (time.perf_counter() - t0) / batches
    shares = attribute(pstats.Stats(prof))
    total = sum(shares.values())
    lines = [
        f"### {case}: B={B}, {batches} batches; unprofiled {plain * 1e6 / B:.2f} µs per row per batch "
        f"({plain * 1e3:.2f} ms/batch); profiled {profiled * 1e3:.2f} ms/batch\n",
        "| mechanism | share | µs/batch (scaled to unprofiled) | µs per row per batch |",
        "|---|---:|---:|---:|",
    ]
    for what, sec in sorted(shares.items(), key=lambda kv: -kv[1]):
        share = sec / total
        if share >= 0.005:
            us = share * plain * 1e6
            lines.append(f"| {what} | {100 * share:.1f}% | {us:.0f} | {us / B:.2f} |")
    if top:
        lines += ["", "```"]
        raw: dict[Func, Any] = pstats.Stats(prof).stats  # type: ignore[attr-defined]
        for func, (_, nc, tt, ct, _) in sorted(raw.items(), key=lambda kv: -kv[1][2])[:top]:
            own, cum, calls = tt / batches * 1e6, ct / batches * 1e6, nc / batches
            where = f"{Path(func[0]).name}:{func[1]}({func[2]})"
            lines.append(f"{own:9.0f} µs/batch own {cum:9.0f} cum {calls:8.1f} calls  {where}")
        lines += ["```"]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--case", action="append", help="text[:B:T] or null:B:T (repeatable)")
    ap.add_argument("--batches", type=int, default=30, help="profiled batches per case (default 30)")
    ap.add_argument("--top", type=int, default=0, help="also list the N functions of most own time (profiled)")
    args = ap.parse_args()
    cases = args.case or ["text", "text:256:64", "null:256:64", "null:1024:64", "null:256:16", "null:256:256"]
    for case in cases:
        print(profile(case, args.batches, args.top), flush=True)


if __name__ == "__main__":
    main()
