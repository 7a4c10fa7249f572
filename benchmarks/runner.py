"""How the harness measures: one run of a loader (through ``streamcli.bench.time_run``, so "wait" means what it
means in ``streamcli bench``: the time inside ``next()``), repeats interleaved over loaders, the wait for a
quiet machine, the coherence check and the memory cases.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import _peers
from benchmarks.workloads import CoherenceCheck, SyntheticFrames, decode_stamps, spin, workload
from streamcli.bench import time_run, timed_next

B, T = 16, 8
PEERS = ("streamcli", "torch", "psd", "seqtools")
ROOT = Path(__file__).resolve().parents[1]


MODULES = {"psd": "pytorch_stream_dataloader", "seqtools": "seqtools"}  # peers from the ``bench`` extra


def missing(peer: str) -> str | None:
    """Why ``peer`` cannot run here (its package is not installed), else None."""
    import importlib.util

    module = MODULES.get(peer)
    if module is None or importlib.util.find_spec(module) is not None:
        return None
    return f"{peer}: {module} is not installed (pip install -e '.[bench]', or make bench)"


def make(peer: str, source: SyntheticFrames, w: int, seqtools_k: int, **kw: Any) -> _peers.Candidate:
    """One loader of the comparison over ``source`` with ``w`` workers."""
    if peer == "streamcli":
        return _peers.StreamcliCandidate(source, B, T, w, **kw)
    if peer == "torch":
        return _peers.TorchCandidate(source, B, T, w)
    if peer == "psd":
        return _peers.PsdCandidate(source, B, T, w)
    if peer == "seqtools":
        return _peers.SeqtoolsCandidate(source, B, T, w, k=seqtools_k)
    raise ValueError(f"unknown peer {peer!r}; choose from {PEERS}")


def _busy_jiffies() -> tuple[int, int]:
    """(busy, total) CPU jiffies of the whole machine, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v) - v[3] - v[4], sum(v)


def _tree_cpu_s() -> float:
    import psutil

    total = 0.0
    me = psutil.Process()
    for p in [me, *me.children(recursive=True)]:
        try:
            c = p.cpu_times()
        except psutil.Error:
            continue
        total += c.user + c.system
    return total


def wait_quiet(threshold: float = 0.15, max_wait_s: float = 30.0) -> float:
    """Wait (up to ``max_wait_s``) until the machine is under ``threshold`` busy; return the last busy fraction.

    The benchmark machine is shared; this keeps other people's test runs out of the figures where possible.
    """
    deadline = time.monotonic() + max_wait_s
    while True:
        b0, t0 = _busy_jiffies()
        time.sleep(0.3)
        b1, t1 = _busy_jiffies()
        busy = (b1 - b0) / max(1, t1 - t0)
        if busy < threshold or time.monotonic() > deadline:
            return busy
        time.sleep(1.0)


class Consumer:
    """The training step: "free" (nothing), "sleep" (1 ms asleep, like a GPU-bound step that leaves the CPU to
    the producers) or "cpu" (1 ms of CPU, competing with them); it may clone each batch or hold the last
    ``hold`` batches."""

    def __init__(self, kind: str = "free", hold: int = 0, clone: bool = False) -> None:
        if kind not in ("free", "sleep", "cpu"):
            raise ValueError(f"consumer {kind!r} must be free, sleep or cpu")
        self.kind, self.hold, self.clone = kind, hold, clone
        self.held: list[Any] = []

    def __call__(self, batch: Any) -> None:
        if self.clone:
            batch = batch.clone()
        if self.kind == "sleep":
            time.sleep(1e-3)
        elif self.kind == "cpu":
            spin(1e-3)
        _peers.frames_of(batch)
        if self.hold:
            self.held.append(batch)
            del self.held[: -self.hold]


class CpuProbe:
    """CPU used by this process tree, and by everyone else on the machine, over the timed window."""

    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer
        self.out: dict[str, Any] = {}

    def start(self, loader: Any) -> None:
        self.t0, self.jiffies0, self.cpu0 = time.perf_counter(), _busy_jiffies(), _tree_cpu_s()

    def stop(self, loader: _peers.Candidate) -> None:
        elapsed = max(time.perf_counter() - self.t0, 1e-9)
        jiffies1, cpu1 = _busy_jiffies(), _tree_cpu_s()
        hz = os.sysconf("SC_CLK_TCK")
        ours = cpu1 - self.cpu0
        machine = (jiffies1[0] - self.jiffies0[0]) / hz
        ncpu = (jiffies1[1] - self.jiffies0[1]) / hz / elapsed
        self.out = {
            "cpu_ours": ours / elapsed,
            "foreign_load": max(0.0, (machine - ours) / elapsed / max(ncpu, 1.0)),
            **loader.extra(),
        }
        self.consumer.held.clear()  # before the loader closes


def measure(
    factory: Callable[[], _peers.Candidate],
    warmup: int,
    batches: int,
    consumer: str = "free",
    hold: int = 0,
    clone: bool = False,
) -> dict[str, Any]:
    """One run: build the loader, time the first batch, skip ``warmup`` batches, time the next ``batches``."""
    probe = CpuProbe(Consumer(consumer, hold, clone))
    run = time_run(factory, batches, warmup, consume=probe.consumer, probe=probe, across_epochs=False, sample_rss=False)
    waits = np.asarray(run.waits_s) * 1e3
    return {
        "first_s": run.first_batch_s,
        "batches": run.batches,
        "rate": run.batches / run.elapsed_s,
        "wait_p50_ms": float(np.percentile(waits, 50)) if waits.size else 0.0,
        "wait_p90_ms": float(np.percentile(waits, 90)) if waits.size else 0.0,
        "short": run.short,
        "worker_busy": [round(x, 2) for x in run.busy_per_worker],
        **probe.out,
    }


def repeated(
    factories: Mapping[str, Callable[[], _peers.Candidate]],
    repeats: int,
    warmup: int,
    batches: int,
    quiet: bool,
    **kw: Any,
) -> dict[str, dict[str, Any]]:
    """Median of ``repeats`` runs of every factory, interleaved round by round so that load from elsewhere on
    the machine spreads over all loaders; a run that saw more than 20% of the machine busy with other
    processes is retried (twice at most) and the least disturbed try is kept."""
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in factories}
    for _ in range(repeats):
        for name, factory in factories.items():
            tries = []
            for _attempt in range(3 if quiet else 1):
                if quiet:
                    wait_quiet(max_wait_s=5)
                tries.append(measure(factory, warmup, batches, **kw))
                if tries[-1]["foreign_load"] < 0.2:
                    break
            runs[name].append(min(tries, key=lambda r: float(r["foreign_load"])))
    out = {}
    for name, rs in runs.items():
        o = dict(rs[-1])
        o["foreign_load_max"] = max(r["foreign_load"] for r in rs)
        for key in ("first_s", "rate", "wait_p50_ms", "wait_p90_ms", "cpu_ours"):
            o[key] = statistics.median(r[key] for r in rs)
        o["rates"] = [round(r["rate"], 1) for r in rs]
        o["loads"] = [round(r["foreign_load"], 3) for r in rs]  # other processes' share of the machine, per round
        o["short"] = any(r["short"] for r in rs)
        out[name] = o
    return out


def verify(peer: str, w: int, seqtools_k: int, quick: bool) -> dict[str, Any]:
    """One full epoch twice: coherence and once-only delivery (from the frame stamps), and determinism."""
    orders = []
    res: dict[str, Any] = {}
    for _ in range(2):
        source = workload("A", *((32, 20, 200) if quick else (64, 200, 2000)))
        check = CoherenceCheck(source, B)
        cand = make(peer, source, w, seqtools_k)
        max_wait = 0.0
        try:
            it = iter(cand)
            while True:
                batch, wait = timed_next(it)
                if check.batches:  # not the first batch (worker start-up)
                    max_wait = max(max_wait, wait)
                if batch is None:
                    break
                check.feed(decode_stamps(_peers.frames_of(batch).numpy()))
                del batch
            del it
        finally:
            cand.close()
        orders.append(check.order)
        res = {
            "max_wait_ms": 1e3 * max_wait,
            "empty": check.empty_batches,
            "epoch_batches": check.batches,
            "valid_frac": check.valid_steps / max(1, check.batches * B * T),
            "problems": check.finish(),
        }
    res["deterministic"] = orders[0] == orders[1]
    return res


class RssSampler:
    """Samples the summed RSS and PSS of this process and all its children every ``period`` seconds."""

    def __init__(self, period: float = 0.1) -> None:
        import psutil

        self.proc = psutil.Process()
        self.period = period
        self.samples: list[tuple[float, float, float, float]] = []  # (t, rss, pss, main rss) MiB
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._t0 = time.perf_counter()

    def _run(self) -> None:
        import psutil

        while not self._stop.wait(self.period):
            rss = pss = main = 0
            for p in [self.proc, *self.proc.children(recursive=True)]:
                try:
                    info = p.memory_full_info()
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
                rss += info.rss
                pss += getattr(info, "pss", info.rss)
                main = main or info.rss
            self.samples.append((time.perf_counter() - self._t0, rss / 2**20, pss / 2**20, main / 2**20))

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


RSS_CASES = {  # name: (items, min length, max length, batches (full run))
    "items=64": (64, 200, 2000, 400),
    "items=1e5": (100_000, 1, 3, 3000),
    "epoch short": (64, 200, 2000, 10**9),
    "epoch long (10x)": (64, 2000, 20000, 10**9),
}


def rss_case(case: str, quick: bool) -> dict[str, Any]:
    """Run streamcli (2 workers, variant A) on one RSS case in this process; sample the process tree."""
    n_items, lo, hi, limit = RSS_CASES[case]
    if quick:
        limit = min(limit, 400) if case == "items=1e5" else limit
    source = SyntheticFrames(n_items, lo, hi)
    n = 0
    with RssSampler() as sampler:
        cand = make("streamcli", source, 2, 1)
        try:
            for batch in cand:
                _peers.frames_of(batch)
                del batch
                n += 1
                if n >= limit:
                    break
        finally:
            cand.close()
    s = sampler.samples
    mid = [x for x in s if x[0] <= s[-1][0] * 0.2] or s[:1]
    return {
        "case": case,
        "batches": n,
        "peak_rss_mib": max(x[1] for x in s),
        "peak_pss_mib": max(x[2] for x in s),
        "early_pss_mib": max(x[2] for x in mid),
        "peak_main_rss_mib": max(x[3] for x in s),
        "samples": len(s),
    }


def run_rss_cases(quick: bool) -> list[dict[str, Any]]:
    """Each memory case in a fresh interpreter (``python -m benchmarks.bench_loader --rss-case``)."""
    cases = ["items=64", "items=1e5", "epoch short"] + ([] if quick else ["epoch long (10x)"])
    out = []
    for case in cases:
        cmd = [sys.executable, "-m", "benchmarks.bench_loader", "--rss-case", case, *(["--quick"] if quick else [])]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=ROOT)
        if proc.returncode:
            out.append({"case": case, "error": proc.stderr.strip().splitlines()[-1:]})
        else:
            out.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        print(f"  rss {out[-1]}", flush=True)
    return out
