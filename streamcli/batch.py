"""``Batch``: what the consumer receives. Every field and flag is a torch tensor.

Layout ``"TB"`` (the default) gives ``(T, B, ...)`` tensors and ``(T, B)`` flags; ``"BT"`` swaps the first two
axes of both. ``reset`` is always ``(B,)``.

Lifetime: with ``num_workers > 0`` the tensors are views into a shared-memory slot. The slot is recycled
only after the batch *and every tensor taken from it* have been garbage-collected, so a batch you hold is
never overwritten. Hold on to many batches at once and the loader hands out copies instead of views.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

FLAGS = ("is_first", "valid", "stream", "position", "replayed")
"""Per-step flag arrays carried next to the data, in every batch and every exported shard."""
FLAG_DTYPES: dict[str, str] = {
    "is_first": "|b1",
    "valid": "|b1",
    "stream": "<i8",
    "position": "<i8",
    "replayed": "|b1",
}
"""Each flag's numpy dtype, fixed so that shards and the shared ring can state it before the first batch."""


class Deferred:
    """A flag's array whose tensor is made when the flag is first read (``Flag``): most consumers never read
    ``stream``, ``position`` or ``replayed``, so the loader does not make their tensors, nor in process write their
    cells (``write``, once), for every batch."""

    __slots__ = ("array", "write")

    def __init__(self, array: Any, write: Callable[[], None] | None = None) -> None:
        self.array, self.write = array, write

    def tensor(self) -> torch.Tensor:
        import torch  # (loaded already: the loader made the batch's other tensors)

        if self.write is not None:
            self.write()
        return torch.from_numpy(self.array)


class Flag:
    """A ``Batch`` field that holds a tensor, or a ``Deferred`` array made into one (once) when first read."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name, self.key = name, "_" + name

    def __get__(self, obj: Any, owner: Any = None) -> torch.Tensor:
        if obj is None:  # (so that the dataclass sees no default)
            raise AttributeError(self.name)
        value = obj.__dict__[self.key]
        if type(value) is Deferred:
            value = obj.__dict__[self.key] = value.tensor()
        return value  # type: ignore[no-any-return]

    def __set__(self, obj: Any, value: torch.Tensor | Deferred) -> None:
        obj.__dict__[self.key] = value


@dataclass
class Batch(Mapping[str, "torch.Tensor"]):
    """One ``(T, B)`` block of steps; row ``b`` continues the same stream from one batch to the next.

    ``batch["frame"]`` is a data field. The flags:

    - ``is_first`` bool (T, B): this step begins a stream (reset the hidden state before it).
    - ``reset`` bool (B,): row b begins a new stream at this batch's first step.
    - ``valid`` bool (T, B): False on padding.
    - ``stream`` int64 (T, B): the item index within the source's ``items()``, or -1 on padding.
    - ``position`` int64 (T, B): the step's index within its stream, or -1 on padding.
    - ``replayed`` bool (T, B): the step belongs to a replayed stream (``epoch_end="restream"``).
    - ``source`` int64 (T, B), only from a mixed source (``streamcli.mix``), else None: the index into
      ``mix.names`` of the source a step's stream came from, or -1 on padding.
    - ``extras``: more about the batch. ``extras["writers"]``, where balancing moves rows between workers: the
      worker that wrote each row (a (B,) numpy array).
    """

    data: dict[str, torch.Tensor]
    is_first: torch.Tensor
    reset: torch.Tensor
    valid: torch.Tensor
    stream: Flag = Flag()  # (tensors: made when first read)
    position: Flag = Flag()
    replayed: Flag = Flag()
    epoch: int = 0
    index: int = 0
    layout: str = "TB"
    extras: dict[str, Any] = field(default_factory=dict)
    source: torch.Tensor | None = None

    @classmethod
    def assembled(
        cls,
        data: dict[str, torch.Tensor],
        is_first: torch.Tensor,
        reset: torch.Tensor,
        valid: torch.Tensor,
        later: tuple[torch.Tensor | Deferred, ...],
        epoch: int,
        index: int,
        layout: str,
        source: torch.Tensor | None,
    ) -> Batch:
        """The loader's batch, every field set at once (the generated ``__init__`` sets them one by one, each flag
        through its ``Flag``): ``later`` holds ``stream``, ``position`` and ``replayed``, made or deferred."""
        b = object.__new__(cls)
        stream, position, replayed = later
        b.__dict__.update(
            data=data, is_first=is_first, reset=reset, valid=valid, _stream=stream, _position=position,
            _replayed=replayed, epoch=epoch, index=index, layout=layout, extras={}, source=source,
        )  # fmt: skip
        return b

    def __getitem__(self, name: str) -> torch.Tensor:
        try:
            return self.data[name]
        except KeyError:
            raise KeyError(f"batch has no field {name!r}; fields: {', '.join(self.data)}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)

    @property
    def time_steps(self) -> int:
        return int(self.valid.shape[0 if self.layout == "TB" else 1])

    @property
    def batch_size(self) -> int:
        return int(self.reset.shape[0])

    def flags(self) -> dict[str, torch.Tensor]:
        """The per-step flags by name (see ``FLAGS``), plus ``reset``."""
        out = {name: getattr(self, name) for name in FLAGS}
        out["reset"] = self.reset
        return out

    def to(self, device: Any, non_blocking: bool = False) -> Batch:
        """A copy on ``device`` (the copy owns its memory; the shared slot can be recycled)."""

        def mv(t: torch.Tensor) -> torch.Tensor:
            return t.to(device, non_blocking=non_blocking)

        return Batch(
            data={k: mv(v) for k, v in self.data.items()},
            **{name: mv(getattr(self, name)) for name in (*FLAGS, "reset")},
            epoch=self.epoch,
            index=self.index,
            layout=self.layout,
            extras=dict(self.extras),
            source=None if self.source is None else mv(self.source),
        )

    def clone(self) -> Batch:
        """A private copy that does not pin a shared-memory slot."""
        return Batch(
            data={k: v.clone() for k, v in self.data.items()},
            **{name: getattr(self, name).clone() for name in (*FLAGS, "reset")},
            epoch=self.epoch,
            index=self.index,
            layout=self.layout,
            extras=dict(self.extras),
            source=None if self.source is None else self.source.clone(),
        )
