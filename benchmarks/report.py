"""What the harness prints and writes: Markdown tables, the targets (as data) and their verdicts, RESULTS.md."""

from __future__ import annotations

import functools
import platform
import statistics
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
BEGIN, END = "<!-- bench_loader:begin -->", "<!-- bench_loader:end -->"
NAMES = {"streamcli": "streamcli", "torch": "torch DataLoader", "psd": "pytorch-stream-dataloader"}

# res[variant][(workers, consumer)][peer] -> the medians of ``runner.repeated``
Results = dict[str, dict[tuple[int, str], dict[str, dict[str, Any]]]]


@dataclass(frozen=True)
class Target:
    """A pass threshold from an issue. ``metric``: "vs_peer" (streamcli's batches/s over ``peer``'s, "best" for
    the fastest peer), "scaling" (2 workers over twice 1 worker), "wait_p50_ms" or "first_s" (met below
    ``goal``; the others are met at or above it)."""

    text: str
    variant: str
    metric: str
    goal: float
    workers: int = 2
    peer: str = "seqtools"
    consumer: str = "free"


TARGETS = (  # issue 35 §3 (A8, A8b, B), after issue 8; A is the earlier workload, kept for continuity
    Target("A8, 2 workers: >= 1.5x seqtools' batches/s", "A8", "vs_peer", 1.5),
    Target("A8 as blocks, 2 workers: >= 1.5x seqtools' batches/s (on A8)", "A8b", "vs_peer", 1.5),
    Target("A8, in-process: >= 1x seqtools in-process", "A8", "vs_peer", 1.0, workers=0),
    Target("A8 as blocks, in-process: >= 1x seqtools in-process (on A8)", "A8b", "vs_peer", 1.0, workers=0),
    Target("A8, 2 workers, 1 ms consumer: wait p50 < 0.1 ms", "A8", "wait_p50_ms", 0.1, consumer="sleep"),
    Target("A8 as blocks, 2 workers, 1 ms consumer: wait p50 < 0.1 ms", "A8b", "wait_p50_ms", 0.1, consumer="sleep"),
    Target("A8, 2 workers: first batch < 2 s", "A8", "first_s", 2.0),
    Target("A, 2 workers: >= 2x the best peer's batches/s", "A", "vs_peer", 2.0, peer="best"),
    Target("B, 2 workers >= 0.95 x (2 x the 1-worker rate)", "B", "scaling", 0.95),
    Target("B, 2 workers: first batch < 2 s", "B", "first_s", 2.0),
)


def peer_runs(res: Results, variant: str, peers_from: str | None, w: int, peer: str) -> dict[str, Any] | None:
    """``peer``'s runs ("best": the fastest peer other than streamcli, by median) for ``variant`` at ``w``."""
    runs = res.get(peers_from or variant, {}).get((w, "free"), {})
    others = {p: r for p, r in runs.items() if p != "streamcli"}
    if peer == "best":
        return max(others.values(), key=lambda r: float(r["rate"]), default=None)
    return others.get(peer)


def ratio(mine: dict[str, Any], other: dict[str, Any]) -> tuple[float, str]:
    """``mine``'s batches/s over ``other``'s: the median of the per-round ratios when both ran in
    the same rounds (``runner.repeated`` interleaves them), with their range. This host's speed shifts by a third
    within seconds, so a ratio of two medians taken in different rounds can land on either side of a goal; a
    round's pair shares the host's phase far more often."""
    a, b = mine.get("rates", []), other.get("rates", [])
    if a and len(a) == len(b) and all(b):
        rounds = sorted(x / y for x, y in zip(a, b, strict=True))
        spread = f"rounds {rounds[0]:.2f}-{rounds[-1]:.2f}" if len(rounds) > 1 else "1 round"
        return statistics.median(rounds), spread + _loads_note(mine, other)
    return float(mine["rate"]) / float(other["rate"]), "no paired rounds"


def _loads_note(mine: dict[str, Any], other: dict[str, Any]) -> str:
    """What other processes took of the machine in the round with the lowest ratio and in the one with the
    highest: when they differ, the spread is the host's, not the loaders'."""
    cols = [mine.get("rates", []), other.get("rates", []), mine.get("loads", []), other.get("loads", [])]
    if len(cols[0]) < 2 or len({len(c) for c in cols}) != 1:
        return ""
    pairs = list(zip(*cols, strict=True))
    by_ratio = sorted(pairs, key=lambda p: p[0] / p[1])
    lo, hi = by_ratio[0], by_ratio[-1]
    return (
        f"; other load in the lowest round {100 * lo[2]:.0f}% (streamcli) / {100 * lo[3]:.0f}% (peer), "
        f"in the highest {100 * hi[2]:.0f}% / {100 * hi[3]:.0f}%"
    )


def rate_spread(r: dict[str, Any]) -> str:
    """A run's batches/s: the median, and the range of its rounds."""
    rates = r.get("rates") or [r["rate"]]
    return f"{r['rate']:.0f}" + (f" ({min(rates):.0f}-{max(rates):.0f})" if len(rates) > 1 else "")


def evaluate(t: Target, res: Results, peers_from: dict[str, str | None]) -> str | None:
    """The verdict line of ``t``, or None when its figures were not measured in this run."""
    runs = res.get(t.variant)
    if runs is None:
        return None
    mine = runs.get((t.workers, t.consumer), {}).get("streamcli")
    if mine is None:
        return None
    if t.metric == "vs_peer":
        other = peer_runs(res, t.variant, peers_from.get(t.variant), t.workers, t.peer)
        if not other or not other["rate"]:
            return None
        value, spread = ratio(mine, other)
        detail = f"{mine['rate']:.0f} vs {other['rate']:.0f} batches/s, medians; {spread}"
    elif t.metric == "scaling":
        one = runs.get((1, "free"), {}).get("streamcli")
        if one is None:
            return None
        # Two configurations, measured one after the other: their rounds are not pairs.
        value = mine["rate"] / (2 * one["rate"])
        detail = f"{rate_spread(mine)} vs 2 x {rate_spread(one)} batches/s, medians (rounds' range)"
    elif t.metric in ("wait_p50_ms", "first_s"):
        value, detail = (
            float(mine[t.metric]),
            ("time inside `next()`" if t.metric == "wait_p50_ms" else "from construction"),
        )
    else:
        raise ValueError(f"unknown metric {t.metric!r} in target {t.text!r}")
    met = value < t.goal if t.metric in ("wait_p50_ms", "first_s") else value >= t.goal
    return f"{t.text}: **{'met' if met else 'not met'}** ({value:.3g}; {detail})"


def fmt_table(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def name_of(peer: str, seqtools_k: int) -> str:
    return NAMES.get(peer, f"seqtools (K={seqtools_k})")


def variant_table(
    res: Results, variant: str, peers: list[str], workers: tuple[int, ...], consumers: tuple[str, ...],
    peers_from: str | None, seqtools_k: int,
) -> str:  # fmt: skip
    """One row per (workers, loader): rates, ratio to the best peer (the median of the rounds' ratios), first
    batch, waits, load."""
    rows = []
    runs = res[variant]
    for w in workers:
        best = peer_runs(res, variant, peers_from, w, "best")
        for p in peers:
            r = runs.get((w, "free"), {}).get(p)
            if r is None:
                continue
            cells = [
                name_of(p, seqtools_k) + (" (blocks)" if peers_from and p == "streamcli" else ""),
                str(w),
                rate_spread(r) + (" (short)" if r["short"] else ""),
                _ratio_cell(r, best),
                f"{r['first_s']:.2f}",
                f"{r['wait_p50_ms']:.3f}",
            ]
            for c in consumers[1:]:
                rc = runs.get((w, c), {}).get(p)
                cells.append(f"{rc['rate']:.0f} / {rc['wait_p50_ms']:.3f}" if rc else "")
            busy = r.get("worker_busy") or []
            cells += [
                " ".join(f"{100 * b:.0f}%" for b in busy) or "-",
                f"{r['cpu_ours']:.2f}",
                f"{100 * r['foreign_load_max']:.0f}%",
            ]
            rows.append(cells)
    heads = ["loader", "W", "batches/s (rounds)", "vs best peer (rounds)", "first batch s", "wait p50 ms"]
    heads += [f"{c} consumer: batches/s / wait p50 ms" for c in consumers[1:]]
    heads += ["worker busy (last run)", "CPU cores used", "other load (max)"]
    return fmt_table(heads, rows)


def _ratio_cell(r: dict[str, Any], best: dict[str, Any] | None) -> str:
    if not best or not best["rate"]:
        return "-"
    value, detail = ratio(r, best)
    rounds = detail.split(";")[0].removeprefix("rounds ")
    return f"{value:.2f}x" + (f" ({rounds})" if "-" in rounds else "")


def memory_verdicts(rss: list[dict[str, Any]]) -> list[str]:
    ok = {r["case"]: r for r in rss if "error" not in r}
    out = []
    pairs = (("items=64", "items=1e5", "the number of items"), ("epoch short", "epoch long (10x)", "epoch length"))
    for small, big, what in pairs:
        if small in ok and big in ok:
            a, b = ok[small]["peak_pss_mib"], ok[big]["peak_pss_mib"]
            out.append(
                f"memory flat in {what}: **{'met' if b <= a * 1.1 + 16 else 'not met'}** "
                f"(peak PSS sum {a:.0f} MiB for {small}, {b:.0f} MiB for {big})"
            )
    return out


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def git_version(package_dir: Path) -> str:
    """The commit of the streamcli checkout being measured, marked when its package has uncommitted edits."""
    try:
        run = functools.partial(subprocess.run, capture_output=True, text=True, check=True, cwd=package_dir)
        rev = run(["git", "rev-parse", "--short", "HEAD"]).stdout.strip()
        dirty = run(["git", "status", "--porcelain", "--", "."]).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "(not a git checkout)"
    return f"commit {rev}" + (" + uncommitted edits" if dirty else "")


def write_results(body: str) -> None:
    """Replace the generated block of RESULTS.md, keeping everything else (notes, the Sources section)."""
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n\n" + BEGIN + "\n" + END + "\n"
    if BEGIN not in text:
        text = text.rstrip() + "\n\n" + BEGIN + "\n" + END + "\n"
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1] if END in rest else rest
    RESULTS.write_text(head + BEGIN + "\n" + body.strip() + "\n" + END + tail)
