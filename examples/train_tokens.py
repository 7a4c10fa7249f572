"""A recurrent language model on a token file, its state carried from batch to batch along each document.

    python examples/train_tokens.py                          # a byte-level corpus made from tests/data/text
    python examples/train_tokens.py --steps 50               # a few seconds
    python examples/train_tokens.py data/train.bin --eot 50256 --vocab 50304   # nanoGPT's OpenWebText

Without a path it writes ``tokens/train.bin`` in a temporary folder the way nanoGPT's ``prepare.py`` does (uint16
ids, an end-of-text id after each document), with bytes as ids and the paragraphs of the shipped books as
documents. The ``tokens`` source gives each document to one row, which continues it from batch to batch; the
end-of-text ids are not delivered (``is_first`` marks where a document begins). ``RowState`` carries each row's
GRU state to the next batch (zeros where a document begins), and ``run_rnn`` runs the GRU over all T steps of a
batch, resetting it at ``is_first``. ``benchmarks/learning.py`` measures the claim: carrying the state learns
faster than resetting it every batch.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from streamcli import RowState, StreamLoader, load_source, run_rnn

TEXT = Path(__file__).resolve().parents[1] / "tests" / "data" / "text"
BYTE_EOT = 256  # the end-of-text id of the byte-level corpus: one past the bytes


def write_byte_corpus(path: Path, text: Path = TEXT) -> Path:
    """A nanoGPT-style token file of the paragraphs of the books under ``text``: bytes as ids, 256 after each."""
    ids: list[np.ndarray] = []
    for book in sorted(text.glob("*.txt")):
        for paragraph in book.read_bytes().replace(b"\r\n", b"\n").split(b"\n\n"):
            if paragraph.strip():
                ids += [np.frombuffer(paragraph.strip(), np.uint8), np.array([BYTE_EOT])]
    path.parent.mkdir(parents=True, exist_ok=True)
    np.concatenate(ids).astype(np.uint16).tofile(path)
    return path


def train(
    path: str | Path,
    *,
    eot: int | None = BYTE_EOT,
    vocab: int = BYTE_EOT + 1,
    steps: int = 300,
    batch_size: int = 16,
    time_steps: int = 32,
    hidden: int = 128,
    carry: bool = True,
    num_workers: int = 2,
    seed: int = 0,
    progress_s: float = 0.0,
) -> list[float]:
    """Train for ``steps`` batches on the token file (or folder) at ``path``; return each batch's loss (nats per
    token). ``carry=False`` starts every batch from zeros: the baseline that carrying must beat."""
    torch.manual_seed(seed)
    embed, rnn, head = torch.nn.Embedding(vocab, 64), torch.nn.GRU(64, hidden), torch.nn.Linear(hidden, vocab)
    opt = torch.optim.Adam([*embed.parameters(), *rnn.parameters(), *head.parameters()], lr=3e-3)
    losses: list[float] = []
    source = load_source("tokens", str(path), eot=eot)  # one document a stream, one id a step
    with StreamLoader(source, batch_size, time_steps, num_workers=num_workers, seed=seed) as loader:
        state = RowState()  # each row's GRU state, by document; detached every batch
        start = shown = time.monotonic()
        while len(losses) < steps:  # as many epochs as it takes
            for batch in loader:
                x = batch["tokens"][..., 0]  # (T, B) int64 ids: what nn.Embedding takes
                hx, is_first = (state.begin(batch), state.is_first) if carry else (None, batch.is_first)
                out, hn = run_rnn(rnn, embed(x), is_first, batch.valid, hx)
                if carry:
                    state.update(hn)
                keep = batch.valid[1:] & batch.valid[:-1] & ~batch.is_first[1:]  # within one document
                loss = F.cross_entropy(head(out[:-1])[keep], x[1:][keep])  # step t predicts step t+1
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.item())
                if progress_s > 0 and time.monotonic() - shown >= progress_s:
                    shown, recent = time.monotonic(), losses[-50:]
                    print(
                        f"step {len(losses)}: {len(losses) / (shown - start):.1f} batches/s, "
                        f"loss {sum(recent) / len(recent):.3f} nats/token",
                        flush=True,
                    )
                if len(losses) >= steps:
                    break
    return losses


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("path", nargs="?", help="a token file or folder (default: a byte-level corpus of the books)")
    ap.add_argument("--eot", type=int, default=None, help="the end-of-text id between documents (default: 256)")
    ap.add_argument("--vocab", type=int, default=BYTE_EOT + 1, help="the vocabulary's size (default: 257)")
    ap.add_argument("--steps", type=int, default=300, help="batches to train on")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--progress", type=float, default=5.0, help="seconds between progress lines (0: none)")
    ap.add_argument("--no-carry", action="store_true", help="reset the state every batch (the baseline)")
    args = ap.parse_args(argv)
    if args.steps < 1:
        ap.error(f"--steps {args.steps} must be at least 1")
    with tempfile.TemporaryDirectory(prefix="train_tokens_") as tmp:
        path = args.path or write_byte_corpus(Path(tmp) / "tokens" / "train.bin")
        eot = args.eot if args.path else (BYTE_EOT if args.eot is None else args.eot)
        losses = train(path, eot=eot, vocab=args.vocab, steps=args.steps, num_workers=args.workers,
                       carry=not args.no_carry, progress_s=args.progress)  # fmt: skip
    tail = losses[-max(1, len(losses) // 10) :]
    print(f"{len(losses)} batches, loss over the last {len(tail)}: {sum(tail) / len(tail):.3f} nats/token")


if __name__ == "__main__":  # required with workers: each worker process imports this module again (spawn)
    main()
