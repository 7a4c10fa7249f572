"""Truncated BPTT: a character-level GRU whose hidden state is carried from one batch to the next.

    python examples/train_tbptt.py                     # the public-domain texts in tests/data/text
    python examples/train_tbptt.py my_books/ --epochs 20
    python examples/train_tbptt.py --batches 100        # a short run; a progress line every 10 s

The README's training example is the ``train`` function below, and ``tests/test_training_example.py`` checks
its claim on the shipped text: carrying the state learns faster than resetting it every batch.

The pattern: ``RowState`` carries each row's hidden state to the next batch by stream (zeros where a stream
begins, detached every batch, restored in its new row after a resume on another batch size); ``run_rnn`` runs
the GRU over **all** T steps of the batch in one call, resetting at ``is_first`` and leaving the state unchanged
over padding, so the state handed to the next batch has seen every step; step t+1 is predicted from the output
at step t (``out[:-1]`` against ``x[1:]``), masked by ``batch.valid``. Running the RNN over ``x[:-1]`` instead
loses the last step of every row at every batch boundary, and then carrying the state is no better than
resetting it.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from streamcli import RowState, StreamLoader, load_source, run_rnn

TEXT = Path(__file__).resolve().parents[1] / "tests" / "data" / "text"


def train(
    path: str | Path = TEXT,
    *,
    batches: int | None = None,
    epochs: int = 1,
    batch_size: int = 16,
    time_steps: int = 64,
    hidden: int = 256,
    segment: int = 1024,
    carry: bool = True,
    num_workers: int = 2,
    seed: int = 0,
    progress_s: float = 0.0,
) -> list[float]:
    """Train on every byte of the text files under ``path``; return each batch's loss (nats per byte).

    ``batches`` stops after that many batches (running as many epochs as it takes); ``carry=False`` zeroes the
    state at every batch instead of carrying it, the baseline that carrying must beat. ``progress_s`` > 0 prints
    a progress line (batches, batches/s, recent loss) after the first batch and then every ``progress_s`` seconds.
    """
    torch.manual_seed(seed)
    source = load_source("text", str(path), width=1)  # one byte per step
    rnn, head = torch.nn.GRU(256, hidden), torch.nn.Linear(hidden, 256)
    opt = torch.optim.Adam([*rnn.parameters(), *head.parameters()], lr=3e-3)
    losses: list[float] = []
    # segment= cuts the files into streams of at most `segment` bytes, so every row has a stream to read.
    with StreamLoader(
        source, batch_size=batch_size, time_steps=time_steps, num_workers=num_workers, segment=segment, seed=seed
    ) as loader:
        state = RowState(segment=loader.segment)  # each row's state, by stream; detached every batch
        epoch, start, shown = 0, time.monotonic(), -math.inf
        while (batches is None and epoch < epochs) or (batches is not None and len(losses) < batches):
            for batch in loader:
                x = batch["text"][..., 0].long()  # (T, B) byte values
                if carry:  # the state each row's stream ended the last batch with; zeros where one begins
                    hx, is_first = state.begin(batch), state.is_first
                else:  # the baseline: every batch starts from zeros
                    hx, is_first = None, batch.is_first
                out, hn = run_rnn(rnn, F.one_hot(x, 256).float(), is_first, batch.valid, hx)  # all T steps
                if carry:
                    state.update(hn)
                keep = batch.valid[1:] & batch.valid[:-1] & ~batch.is_first[1:]  # no padding, no stream boundary
                loss = F.cross_entropy(head(out[:-1])[keep], x[1:][keep])  # step t predicts step t+1
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.item())
                if progress_s > 0 and time.monotonic() - shown >= progress_s:
                    shown, recent = time.monotonic(), losses[-100:]
                    print(f"batch {len(losses)}: {len(losses) / (shown - start):.1f} batches/s, "
                          f"loss {sum(recent) / len(recent):.3f} nats/byte", flush=True)  # fmt: skip
                if batches is not None and len(losses) >= batches:
                    break
            epoch += 1
    return losses


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", nargs="?", default=str(TEXT), help="a text file or a folder of them")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batches", type=int, default=None, help="stop after N batches (instead of --epochs)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--progress", type=float, default=10.0, help="seconds between progress lines (0: none)")
    ap.add_argument("--no-carry", action="store_true", help="reset the state every batch (the baseline)")
    args = ap.parse_args(argv)
    if args.batches is not None and args.batches < 1:
        ap.error(f"--batches {args.batches} must be at least 1")
    losses = train(args.path, batches=args.batches, epochs=args.epochs, num_workers=args.workers,
                   carry=not args.no_carry, progress_s=args.progress)  # fmt: skip
    tail = losses[-max(1, len(losses) // 10) :]
    print(f"{len(losses)} batches, loss over the last {len(tail)}: {sum(tail) / len(tail):.3f} nats/byte")


if __name__ == "__main__":  # required with workers: each worker process imports this module again (spawn)
    main()
