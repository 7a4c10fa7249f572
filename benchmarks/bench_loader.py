"""Benchmark: streamcli's StreamLoader against torch's DataLoader, pytorch-stream-dataloader and seqtools.

    python benchmarks/bench_loader.py            # full run, a few minutes; prints the tables
    python benchmarks/bench_loader.py --quick    # smoke run
    python benchmarks/bench_loader.py --write    # also rewrite the generated part of benchmarks/RESULTS.md

Workloads (``benchmarks.workloads.VARIANTS``): 64 streams of 200-2000 steps, one (3, 64, 64) uint8 frame per
step, B=16, T=8. A: frames cost nothing. A8: the same frames made 8 per numpy call, yielded one step at a time
(as the peers read); A8b: A8 as blocks (``block_steps = True``; run only where the loader supports blocks).
B: 100 us of CPU per frame and 2 ms per stream open. Measuring: ``benchmarks.runner``; tables and targets:
``benchmarks.report``; how each peer is driven: RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable here and in spawn workers
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# Spawn workers re-import this module as ``__mp_main__``: keep torch (``runner``, ``report``) out of its top level,
# or every streamcli worker would pay torch's import before its first batch.
from benchmarks.workloads import VARIANTS, Variant, workload

if TYPE_CHECKING:
    from benchmarks import report


IN_PROCESS_ROUNDS = 3  # rounds of the in-process configurations, per repeat


def rounds_for(workers: int, repeats: int) -> int:
    """Runs of a configuration: in-process runs take a fraction of a second, shorter than this host's swings of
    speed, so they get more rounds (their ratios are the median of the rounds', ``report.ratio``)."""
    return repeats * IN_PROCESS_ROUNDS if workers == 0 and repeats > 1 else repeats


def supports_blocks() -> bool:
    from streamcli import StreamLoader

    return bool(getattr(StreamLoader, "supports_blocks", False))


def joined_variants(names: list[str], peers: list[str]) -> dict[str, Variant]:
    """Variants compared with another's peers (A8b with A8's), by that variant, when it runs before them with the
    same configurations: they run interleaved with it, round by round, so that their ratio is measured side by
    side, not minutes apart on a host whose speed drifts by a third."""
    out = {}
    for i, name in enumerate(names):
        v = VARIANTS[name]
        base = v.peers_from
        if base is None or base not in names[:i] or "streamcli" not in peers:
            continue
        if v.needs_blocks and not supports_blocks():
            continue
        if (v.workers, v.consumers) == (VARIANTS[base].workers, VARIANTS[base].consumers):
            out[base] = v
    return out


def run_variant(
    v: Variant,
    peers: list[str],
    args: argparse.Namespace,
    repeats: int,
    warmup: int,
    k: int,
    companion: Variant | None = None,
) -> dict[tuple[int, str], dict[str, dict[str, object]]]:
    """Every (workers, consumer) configuration of ``v``, each loader interleaved with the others; with a
    ``companion`` (a variant compared with ``v``'s peers), its streamcli runs too, as ``"<name>/streamcli"``."""
    from benchmarks import runner

    n_batches = v.batches // 4 if args.quick else v.batches
    consumers = ("free", "sleep") if args.quick else v.consumers
    configs = [(w, "free") for w in v.workers] + [(2, c) for c in consumers[1:]]
    out = {}
    for w, consumer in configs:
        factories = {
            p: functools.partial(runner.make, p, v.source(), w, k)
            for p in peers
            if not (p == "psd" and w == 0)  # pytorch-stream-dataloader has no in-process mode
        }
        if companion is not None:
            factories[f"{companion.name}/streamcli"] = functools.partial(runner.make, "streamcli", companion.source(),
                                                                         w, k)  # fmt: skip
        rounds = rounds_for(w, repeats)
        out[w, consumer] = runner.repeated(factories, rounds, warmup, n_batches, not args.quick, consumer=consumer)
        for p, r in out[w, consumer].items():
            print(f"  {v.name} W={w} consumer={consumer} {p}: {json.dumps(r)}", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    from benchmarks import report, runner

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: a quarter of the batches, one repeat")
    ap.add_argument("--peers", default=",".join(runner.PEERS), help=f"comma list from {runner.PEERS}")
    ap.add_argument("--variants", default=",".join(VARIANTS), help=f"comma list from {tuple(VARIANTS)}")
    ap.add_argument("--repeats", type=int, default=None, help="runs per figure (median); default 3, quick 1")
    ap.add_argument("--seqtools-k", type=int, default=None, help="batches per seqtools job (default 1; B: 8)")
    ap.add_argument("--no-extras", action="store_true", help="skip verification, lifetime and memory sections")
    ap.add_argument("--write", action="store_true", help="rewrite the generated section of RESULTS.md")
    ap.add_argument("--rss-case", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.rss_case:
        print(json.dumps(runner.rss_case(args.rss_case, args.quick)))
        return 0
    unknown = [v for v in args.variants.split(",") if v and v not in VARIANTS]
    if unknown:
        ap.error(f"--variants {','.join(unknown)}: unknown; choose from {', '.join(VARIANTS)}")

    import torch

    torch.set_num_threads(1)  # the consumer's copies (torch.cat, clone) stay on one core for every loader
    started, load_before = time.time(), os.getloadavg()[0]
    peers = [p for p in args.peers.split(",") if p]
    bad = [p for p in peers if p not in runner.PEERS]
    if bad:
        ap.error(f"--peers {','.join(bad)}: unknown; choose from {', '.join(runner.PEERS)}")
    repeats = args.repeats or (1 if args.quick else 3)
    warmup = 5 if args.quick else 20
    lines: list[str] = []
    res: report.Results = {}

    def log(line: str = "") -> None:
        print(line, flush=True)
        lines.append(line)

    for why in filter(None, map(runner.missing, peers)):
        log(f"skipped {why}")
    peers = [p for p in peers if runner.missing(p) is None]

    def k_for(v: Variant) -> int:
        return int(args.seqtools_k or (8 if v.costs else 1))

    names = [v for v in args.variants.split(",") if v]
    joined = joined_variants(names, peers)
    ran_with: dict[str, dict[tuple[int, str], dict[str, dict[str, object]]]] = {}
    for name in names:
        v = VARIANTS[name]
        log(f"\n### Variant {v.name}: {v.title}\n")
        if v.needs_blocks and not supports_blocks():
            log("n/a: this StreamLoader does not support block sources (`StreamLoader.supports_blocks` is not set)")
            continue
        run_peers = [p for p in peers if p == "streamcli"] if v.peers_from else peers
        if name in ran_with:
            res[v.name] = ran_with.pop(name)
        else:
            both = run_variant(v, run_peers, args, repeats, warmup, k_for(v), joined.get(name))
            res[v.name] = {c: {p: r for p, r in rs.items() if "/" not in p} for c, rs in both.items()}
            if name in joined:
                other = joined[name].name
                ran_with[other] = {c: {p.split("/", 1)[1]: r for p, r in rs.items() if p.startswith(f"{other}/")}
                                   for c, rs in both.items()}  # fmt: skip
        consumers = ("free", "sleep") if args.quick else v.consumers
        log(report.variant_table(res, v.name, run_peers, v.workers, consumers, v.peers_from, k_for(v)))
        if v.peers_from:
            log(
                f'\n("vs best peer" compares with the peers\' figures on {v.peers_from}, the same frames, measured in '
                f"the same rounds when {v.peers_from} runs too.)"
            )

    verdicts = [x for t in report.TARGETS if (x := report.evaluate(t, res, {n: VARIANTS[n].peers_from for n in res}))]
    if not args.no_extras:
        verdicts += extras(args, peers, repeats, warmup, k_for(VARIANTS["A"]), log)
    if verdicts:
        log("\n### Target verdicts\n")
        for verdict in verdicts:
            log(f"- {verdict}")

    import streamcli

    cmd = " ".join(["python benchmarks/bench_loader.py", *(sys.argv[1:] if argv is None else argv)])
    version = os.environ.get("STREAMCLI_COMMIT") or report.git_version(Path(streamcli.__file__).resolve().parent)
    sizes = ", ".join(f"{VARIANTS[n].batches // (4 if args.quick else 1)} ({n})" for n in res)
    header = (
        f"Generated by `{cmd}` on {datetime.date.today().isoformat()} with streamcli {version}: "
        f"{os.cpu_count()} vCPU ({report.cpu_model()}), Python {platform.python_version()}, "
        f"torch {torch.__version__}; median of {repeats} runs per figure (in-process {rounds_for(0, repeats)}), "
        f"interleaved, ratios to peers the median of the rounds' ratios; each {warmup} warm-up batches then "
        f"{sizes} timed batches; load average {load_before:.2f} at the start; "
        f"took {time.time() - started:.0f} s."
    )
    print("\n" + header)
    if args.write:
        report.write_results(header + "\n" + "\n".join(lines))
    return 0


def extras(
    args: argparse.Namespace, peers: list[str], repeats: int, warmup: int, k: int, log: Callable[[str], None]
) -> list[str]:
    """The coherence check, the cost of the lifetime guarantee, and memory; returns their verdicts."""
    from benchmarks import report, runner

    size = "32 streams of 20-200 steps" if args.quick else "the A workload"
    log(f"\n### Coherence and delivery ({size}, 2 workers, one full epoch, run twice)\n")
    vrows = []
    for p in peers:
        v = runner.verify(p, 2, k, args.quick)
        probs = v["problems"]
        good = "yes" if not probs else f"**no**: {len(probs)} problems, e.g. {probs[0]}"
        vrows.append(
            [report.NAMES.get(p, "seqtools"), str(v["epoch_batches"]), str(v["empty"]), f"{v['valid_frac']:.2f}",
             good, "yes" if v["deterministic"] else "**no**", f"{v['max_wait_ms']:.0f}"]
        )  # fmt: skip
        print(f"  verify {p}: {v['epoch_batches']} batches, problems {probs[:3]}", flush=True)
    heads = ["loader", "batches/epoch", "all-padding batches", "valid fraction", "coherent, each stream once"]
    log(report.fmt_table([*heads, "same order twice", "longest wait ms after the first batch"], vrows))
    if "streamcli" not in peers:
        return []

    log("\n### Cost of the lifetime guarantee (streamcli, variant A, 2 workers)\n")
    modes: dict[str, dict[str, object]] = {
        "zero-copy views, each batch dropped (default)": {},
        "consumer calls batch.clone() and drops the view": {"clone": True},
        "consumer holds the last 32 batches (loader hands out copies)": {"hold": 32},
    }
    n_batches = VARIANTS["A"].batches // (4 if args.quick else 1)
    lrows = []
    for consumer in ("free", "sleep"):
        for label, kw in modes.items():
            fs = {"s": functools.partial(runner.make, "streamcli", workload("A"), 2, 1)}
            r = runner.repeated(fs, repeats, warmup, n_batches, not args.quick, consumer=consumer, **kw)["s"]
            lrows.append(
                [label, consumer, f"{r['rate']:.0f}", f"{r['wait_p50_ms']:.3f}", str(r.get("copies", "?")),
                 f"{100 * r['foreign_load_max']:.0f}%"]
            )  # fmt: skip
            print(f"  lifetime {label} {consumer}: {json.dumps(r)}", flush=True)
    heads = ["consumer", "consumer kind", "batches/s", "wait p50 ms", "copies (last run)", "other load (max)"]
    log(report.fmt_table(heads, lrows))

    log("\n### Memory (streamcli, 2 workers, variant A; sum over the main process and its workers)\n")
    rss = runner.run_rss_cases(args.quick)
    mrows = []
    for r in rss:
        if "error" in r:
            mrows.append([r["case"], "error", str(r["error"]), "", "", ""])
        else:
            mrows.append(
                [r["case"], str(r["batches"]), f"{r['peak_rss_mib']:.0f}", f"{r['peak_pss_mib']:.0f}",
                 f"{r['early_pss_mib']:.0f}", f"{r['peak_main_rss_mib']:.0f}"]
            )  # fmt: skip
    heads = ["case", "batches", "peak RSS sum MiB", "peak PSS sum MiB", "PSS in first 20% MiB", "main RSS MiB"]
    log(report.fmt_table(heads, mrows))
    return report.memory_verdicts(rss)


if __name__ == "__main__":
    sys.exit(main())
