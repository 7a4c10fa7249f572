"""A byte-level GRU language model in a LightningModule, trained with truncated backprop through time (TBPTT).

Each of the B rows of a batch continues the same text stream as in the previous batch, so the GRU's hidden state
is carried from one batch to the next. ``streamcli.tbptt`` does the bookkeeping:

- ``RowState`` keeps each row's state by stream: zeros where a stream begins (``is_first``), detached from the
  previous batch's graph so gradients stop at the batch boundary (the truncation), and restored in its stream's
  new row after a resume on another batch size;
- ``run_rnn`` runs the GRU over all T steps in one call, resetting at ``is_first`` and leaving the state unchanged
  over padding (``batch.valid``); ``out[:-1]`` is scored against ``x[1:]``, so the state handed on has seen every
  step. (Running over ``x[:-1]`` would hand on a state that never saw the last step: one step lost per batch.)

``RowState.state_dict()`` goes into the checkpoint, so a resumed run continues with it (Lightning restores the
loader's position by itself: it saves any loader that has ``state_dict``/``load_state_dict``).

Carrying the state learns faster than resetting it every batch: ``python benchmarks/learning.py`` measures the
margin on tests/data/text over several seeds (``benchmarks/RESULTS.md``).

Run: ``python examples/lightning_tbptt.py`` (``--help`` for the options, ``--no-carry`` for the baseline).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from torch import nn

from streamcli import Batch, RowState, StreamLoader, load_source, run_rnn

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "text"


class ByteGRU(L.LightningModule):
    def __init__(self, hidden: int = 128, lr: float = 3e-3, carry: bool = True) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.embed = nn.Embedding(256, 32)
        self.gru = nn.GRU(32, hidden)  # time-major, like the loader's (T, B) batches
        self.head = nn.Linear(hidden, 256)
        self.state = RowState()  # each row's (1, B, hidden) state, carried across batches by stream
        self.losses: list[float] = []

    def training_step(self, batch: Batch, batch_idx: int) -> torch.Tensor:
        x = batch["text"][..., 0].long()  # (T, B): one byte per step (width=1)
        if self.hparams["carry"]:
            hx, is_first = self.state.begin(batch), self.state.is_first  # zeros where a stream begins
        else:  # the baseline: every batch starts from zeros
            hx, is_first = None, batch.is_first
        out, h = run_rnn(self.gru, self.embed(x), is_first, batch.valid, hx)
        if self.hparams["carry"]:
            self.state.update(h)  # detached: the next batch's gradients stop here
        logits = self.head(out[:-1])  # step t predicts step t+1
        mask = batch.valid[1:] & batch.valid[:-1] & ~batch.is_first[1:]
        loss = nn.functional.cross_entropy(logits[mask], x[1:][mask])
        self.losses.append(float(loss.detach()))  # a float of a tensor that needs grad warns
        self.log("loss", loss, prog_bar=True)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.hparams["lr"])

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["rnn_state"] = self.state.state_dict()

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        if "rnn_state" in checkpoint:
            self.state.load_state_dict(checkpoint["rnn_state"])


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("data", nargs="?", default=str(DATA), help="a text file or a folder of .txt files")
    p.add_argument("--batch-size", "-b", type=int, default=16, help="B: rows (streams at once)")
    p.add_argument("--time-steps", "-t", type=int, default=16, help="T: bytes per row per batch")
    p.add_argument("--segment", type=int, default=2048, help="cut the texts into streams of this many bytes")
    p.add_argument("--steps", type=int, default=800, help="training steps")
    p.add_argument("--workers", "-w", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="CPU threads for torch: more only slow a model this small")
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--no-carry", dest="carry", action="store_false", help="reset the state every batch instead")
    p.add_argument("--save-every", type=int, default=0, help="checkpoint into ./checkpoints every N steps (0: off)")
    p.add_argument("--ckpt-path", default=None, help="resume from this Lightning checkpoint")
    return p.parse_args(argv)


def train(args: argparse.Namespace) -> ByteGRU:
    torch.set_num_threads(args.threads)
    L.seed_everything(args.seed, verbose=False)
    model = ByteGRU(args.hidden, args.lr, carry=args.carry)
    source = load_source("text", args.data, width=1)
    trainer = L.Trainer(
        accelerator="cpu", max_steps=args.steps, max_epochs=-1, gradient_clip_val=1.0, logger=False,
        enable_checkpointing=bool(args.save_every), enable_model_summary=False, enable_progress_bar=False,
        callbacks=[ModelCheckpoint(every_n_train_steps=args.save_every, save_top_k=-1)] if args.save_every else None,
    )  # fmt: skip
    with StreamLoader(source, args.batch_size, args.time_steps, num_workers=args.workers, seed=args.seed,
                      segment=args.segment) as loader:  # fmt: skip
        trainer.fit(model, train_dataloaders=loader, ckpt_path=args.ckpt_path)
    return model


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    model = train(args)
    tail = model.losses[-100:]
    print(f"mean loss over the last {len(tail)} steps: {sum(tail) / max(1, len(tail)):.3f} nats/byte")


if __name__ == "__main__":
    main()
