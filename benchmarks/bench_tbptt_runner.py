"""Benchmark: ``streamcli.tbptt.run_rnn`` (one packed call, resets inside the batch) against the module called
one step at a time with the same resets (the reference it matches), and against one plain call that ignores
the resets (the floor: what the module costs with no bookkeeping at all).

    python benchmarks/bench_tbptt_runner.py                 # LSTM H=256, B=32, T=64, ~10% resets, CPU
    python benchmarks/bench_tbptt_runner.py --repeats 3 --threads 2

Forward (no grad) and forward + backward are timed separately. Each repeat runs every row once, in an order
reversed every other repeat, and the figures are medians over the repeats (this host's speed swings).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from torch import nn

from streamcli.tbptt import run_rnn

Hidden = tuple[torch.Tensor, torch.Tensor]


def step_by_step(rnn: nn.LSTM, x: torch.Tensor, is_first: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """The reference: one module call per step, zeroing the state at ``is_first`` and keeping it on padding."""
    h = x.new_zeros(rnn.num_layers, x.shape[1], rnn.hidden_size)
    state: Hidden = (h, h)
    outs = []
    for t in range(x.shape[0]):
        reset, keep = is_first[t][None, :, None], valid[t][None, :, None]
        state = (state[0].masked_fill(reset, 0.0), state[1].masked_fill(reset, 0.0))
        y, new = rnn(x[t : t + 1], state)
        state = (torch.where(keep, new[0], state[0]), torch.where(keep, new[1], state[1]))
        outs.append(y[0].masked_fill(~valid[t][:, None], 0.0))
    return torch.stack(outs)


def timed(fn: Callable[[], torch.Tensor], backward: bool) -> float:
    start = time.perf_counter()
    if backward:
        torch.autograd.backward(fn().square().sum())
    else:
        with torch.no_grad():
            fn()
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--resets", type=float, default=0.1, help="share of steps that begin a stream")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1: steadier on a shared host)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    rnn = nn.LSTM(args.hidden, args.hidden)
    x = torch.randn(args.steps, args.batch, args.hidden)
    is_first = torch.rand(args.steps, args.batch) < args.resets
    is_first[0] = True
    valid = torch.ones(args.steps, args.batch, dtype=torch.bool)
    rows: dict[str, Callable[[], torch.Tensor]] = {
        "step by step (reference)": lambda: step_by_step(rnn, x, is_first, valid),
        "run_rnn": lambda: run_rnn(rnn, x, is_first, valid)[0],
        "plain nn.LSTM, resets ignored (floor)": lambda: rnn(x)[0],
    }
    with torch.no_grad():
        diff = (run_rnn(rnn, x, is_first, valid)[0] - step_by_step(rnn, x, is_first, valid)).abs().max()
    print(
        f"LSTM H={args.hidden}, B={args.batch}, T={args.steps}, {int(is_first[1:].sum())} resets after the first "
        f"step ({args.resets:.0%}), {args.threads} thread(s), {args.repeats} repeats; "
        f"run_rnn vs reference max |diff| {float(diff):.1e} (float32)"
    )
    for backward in (False, True):
        times: dict[str, list[float]] = {name: [] for name in rows}
        for fn in rows.values():  # warm-up
            timed(fn, backward)
        for r in range(args.repeats):
            order = list(rows) if r % 2 == 0 else list(reversed(rows))
            for name in order:
                times[name].append(timed(rows[name], backward))
        ref = statistics.median(times["step by step (reference)"])
        print(f"\n{'forward + backward' if backward else 'forward (no grad)'}: median ms, and the reference's / row's")
        for name, ts in times.items():
            med = statistics.median(ts)
            print(f"  {name:<40} {med * 1e3:8.2f} ms   {ref / med:5.2f}x")


if __name__ == "__main__":
    main()
