"""The loader's mode vocabulary, declared once: the library validates against it and the CLI builds its choices
from it, so a mode is never spelt in two places."""

from __future__ import annotations

MODES: dict[str, tuple[str, ...]] = {
    "boundary": ("pad", "pack"),
    "epoch_end": ("pad", "restream", "drop"),
    "layout": ("TB", "BT"),
    "on_error": ("raise", "skip"),
}
"""Option name -> allowed values; the first value is the default."""


def resolve_rank(rank: int | None, world_size: int | None) -> tuple[int, int]:
    """Rank and world size: as given, else from an initialised ``torch.distributed`` process group, else from the
    ``RANK`` and ``WORLD_SIZE`` environment variables (as torchrun sets them), else rank 0 of 1."""
    if rank is None or world_size is None:
        import os
        import sys

        dist = sys.modules.get("torch.distributed")
        if dist is not None and dist.is_available() and dist.is_initialized():
            found = (int(dist.get_rank()), int(dist.get_world_size()))
        elif "RANK" in os.environ and "WORLD_SIZE" in os.environ:
            try:
                found = (int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
            except ValueError:
                raise ValueError(
                    f"RANK={os.environ['RANK']!r} and WORLD_SIZE={os.environ['WORLD_SIZE']!r} must be integers"
                ) from None
        else:
            found = (0, 1)
        rank = found[0] if rank is None else rank
        world_size = found[1] if world_size is None else world_size
    for name, value in (("rank", rank), ("world_size", world_size)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{name}={value!r} must be an integer")
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank={rank} must be in 0..world_size-1 (world_size={world_size})")
    return rank, world_size
