"""One Lightning training run over the ``text`` source, as a script: tests/test_lightning.py runs it in a process
of its own every time, so that no Lightning state carries over from one run to the next.

It trains a tiny byte model with a real ``lightning.Trainer`` and writes, per rank, one line per training step:
the global step, ``trainer.current_epoch``, ``batch.epoch`` and a hash of everything the batch holds. With
``--every N`` a ``ModelCheckpoint`` saves every N steps (and ``--max-steps`` stops the run later, as a crash
would); with ``--resume`` the run continues from that checkpoint with ``trainer.fit(..., ckpt_path=...)``.
Under ``--devices 2`` Lightning's DDP strategy relaunches this script once per extra rank.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from streamcli_sources.text import TextSource

from streamcli import Batch, StreamLoader, load_source

# Small enough for a shared 2-core machine; segments give many streams, so rows reset mid-run.
B, T, WIDTH, SEGMENT, SEED = 4, 64, 16, 256, 7


class TextOfUnknownLength(TextSource):
    """The text source, but like a live feed it does not tell its streams' lengths: ``len(loader)`` is unknown."""

    def length(self, item: str) -> int | None:
        return None


def batch_hash(batch: Batch) -> str:
    h = hashlib.sha256()
    for name, t in [*sorted(batch.data.items()), *sorted(batch.flags().items())]:
        h.update(name.encode())
        h.update(t.contiguous().numpy().tobytes())
    h.update(str(batch.epoch).encode())
    return h.hexdigest()


def row_hashes(batch: Batch) -> list[str]:
    """A hash of each row (a global batch is every rank's rows side by side)."""
    out = []
    for b in range(batch.valid.shape[1]):  # (T, B) layout
        h = hashlib.sha256()
        for name, t in [*sorted(batch.data.items()), *sorted(batch.flags().items())]:
            h.update(name.encode())
            h.update((t[b] if t.dim() == 1 else t[:, b]).contiguous().numpy().tobytes())
        out.append(h.hexdigest())
    return out


class Recorder(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(256, 8)
        self.head = torch.nn.Linear(8, 256)
        self.seen: list[dict[str, Any]] = []

    def training_step(self, batch: Batch, batch_idx: int) -> torch.Tensor:
        self.seen.append(
            {
                "step": self.global_step,
                "trainer_epoch": self.current_epoch,
                "batch_epoch": batch.epoch,
                "hash": batch_hash(batch),
                "rows": row_hashes(batch),
                "real": int(batch.valid.sum()),
            }
        )
        x = batch["text"].long()[..., 0]  # the first byte of each step: (T, B)
        logits = self.head(self.emb(x[:-1]))
        return torch.nn.functional.cross_entropy(logits.reshape(-1, 256), x[1:].reshape(-1))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--out", required=True, help="folder for rank<r>.json and the checkpoints")
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--devices", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=B, help="rows per rank")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--max-steps", type=int, default=-1)
    p.add_argument("--every", type=int, default=0, help="checkpoint every N steps")
    p.add_argument("--resume", default=None, help="checkpoint to resume from")
    p.add_argument("--unknown-lengths", action="store_true", help="a source that does not tell lengths")
    a = p.parse_args()
    out = Path(a.out)
    callbacks: list[L.Callback] = []
    if a.every:
        callbacks.append(ModelCheckpoint(out, "{step}", every_n_train_steps=a.every, save_top_k=-1))
    ddp: dict[str, Any] = {}
    if a.devices > 1:
        # The default use_distributed_sampler=True stays: Lightning only replaces samplers of torch DataLoaders.
        ddp = {"strategy": L.pytorch.strategies.DDPStrategy(process_group_backend="gloo")}
    trainer = L.Trainer(
        accelerator="cpu", devices=a.devices, max_epochs=a.epochs, max_steps=a.max_steps, logger=False,
        enable_progress_bar=False, enable_model_summary=False, enable_checkpointing=bool(a.every),
        callbacks=callbacks, num_sanity_val_steps=0, **ddp,
    )  # fmt: skip
    source = TextOfUnknownLength(a.data, width=WIDTH) if a.unknown_lengths else load_source("text", a.data, width=WIDTH)
    # Before fit() the process group does not exist yet: the trainer already knows this process's rank.
    loader = StreamLoader(source, a.batch_size, T, num_workers=a.workers, seed=SEED, segment=SEGMENT,
                          rank=trainer.global_rank, world_size=trainer.world_size)  # fmt: skip
    model = Recorder()
    with loader:
        trainer.fit(model, train_dataloaders=loader, ckpt_path=a.resume)
    (out / f"rank{trainer.global_rank}.json").write_text(json.dumps(model.seen))
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        # Else gloo's threads may still run while the interpreter exits: "terminate called without an active
        # exception" and SIGABRT, now and then, after a run that went well.
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
