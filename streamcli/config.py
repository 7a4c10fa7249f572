"""The loader's configuration, declared and validated once: ``LoaderConfig``, and the mode vocabulary
(``MODES``) from which the CLI builds its choices. The loader, its plan, the ring, the resume fingerprint and
the export header all derive from one ``LoaderConfig``."""

from __future__ import annotations

import math
import multiprocessing as mp
import operator
import os
import sys
from dataclasses import asdict, dataclass
from typing import Any

from streamcli.errors import ConfigError

# Workers fork from one clean server process on Linux (``workers.start``), as CPython does by default from 3.14;
# macOS keeps spawn, as CPython does there.
DEFAULT_START_METHOD = "forkserver" if sys.platform.startswith("linux") else "spawn"

MODES: dict[str, tuple[str, ...]] = {
    "boundary": ("pad", "pack"),
    "epoch_end": ("pad", "restream", "drop"),
    "layout": ("TB", "BT"),
    "on_error": ("raise", "skip"),
}
"""Option name -> allowed values; the first value is the default."""

CONTENT = (
    "batch_size",
    "time_steps",
    "seed",
    "shuffle",
    "boundary",
    "epoch_end",
    "layout",
    "on_error",
    "segment",
    "batches_per_epoch",
    "rank",
    "world_size",
)
"""The settings that decide the batches' content (the worker count, prefetch and the like do not)."""


WORKERS_PER_CORE = 4
"""Worker processes a loader may start per usable CPU core (see ``max_workers``)."""


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity, not the machine's total)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def max_workers() -> int:
    """The most worker processes one loader may start: ``WORKERS_PER_CORE`` per usable core.

    Each worker is a process of its own that imports torch, which takes CPU time and memory, so
    beyond a few per core they only queue for the cores and fill memory; a source that waits on I/O gains
    from a few more than one per core, not from hundreds. A thousand workers on a small machine spend
    minutes starting and look like a hang.
    """
    return WORKERS_PER_CORE * usable_cores()


def _check_int(name: str, value: Any, low: int, fix: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"{name}={value!r} must be an integer >= {low}; {fix}")


@dataclass(frozen=True)
class LoaderConfig:
    """Every ``StreamLoader`` setting (see its docstring for their meaning), validated on construction.

    ``rank`` and ``world_size`` are resolved here (argument, process group, environment, else 0 of 1).
    """

    batch_size: int
    time_steps: int
    num_workers: int = 0
    seed: int = 0
    shuffle: bool = True
    boundary: str = "pad"
    epoch_end: str = "pad"
    layout: str = "TB"
    on_error: str = "raise"
    pin_memory: bool = False
    prefetch: int | None = None  # None: ``shared.sizing.default_prefetch``
    timeout: float | None = None
    mp_context: str = DEFAULT_START_METHOD
    segment: int = 0
    batches_per_epoch: int | None = None
    rank: int | None = None
    world_size: int | None = None
    balance: bool | None = None  # None: the loader decides (the source's ``costly_steps``, then measured)

    def __post_init__(self) -> None:
        _check_int("batch_size", self.batch_size, 1, "e.g. batch_size=16")
        _check_int("time_steps", self.time_steps, 1, "e.g. time_steps=8")
        _check_int("num_workers", self.num_workers, 0, "use 0 to run in-process")
        if self.prefetch is not None:
            _check_int("prefetch", self.prefetch, 1, "e.g. prefetch=4, or None for the default")
        if self.num_workers > self.batch_size:
            raise ConfigError(
                f"num_workers={self.num_workers} exceeds batch_size={self.batch_size}; each worker owns whole "
                f"rows, so use num_workers <= {self.batch_size}"
            )
        limit = max_workers()
        if self.num_workers > limit:
            raise ConfigError(
                f"num_workers={self.num_workers} exceeds {limit}, the limit of {WORKERS_PER_CORE} worker processes "
                f"per usable CPU core ({usable_cores()} here): more only queue for the cores and fill memory; "
                f"use num_workers <= {limit}"
            )
        _check_seed(self.seed)
        for name, allowed in MODES.items():
            value = getattr(self, name)
            if value not in allowed:
                raise ConfigError(f"{name}={value!r} is not one of {', '.join(map(repr, allowed))}")
        if self.mp_context not in mp.get_all_start_methods():
            raise ConfigError(f"mp_context={self.mp_context!r}; use one of {mp.get_all_start_methods()}")
        t = self.timeout
        if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t < math.inf):
            raise ConfigError(
                f"timeout={t!r} must be a finite number of seconds > 0 (e.g. timeout=60), or None to wait without "
                "limit (a stall is then named in a warning after STALL_WARN_S seconds)"
            )
        if self.timeout is not None and self.num_workers == 0:
            raise ConfigError(
                f"timeout={self.timeout} needs num_workers >= 1: in-process, a source that hangs cannot be stopped "
                "safely; use num_workers=1 (a hung worker is reported and stopped) or timeout=None"
            )
        _check_int("segment", self.segment, 0, "use 0 for whole items, or e.g. segment=128")
        if self.balance is not None and not isinstance(self.balance, bool):
            raise ConfigError(f"balance={self.balance!r} must be True, False or None (None: the source's costly_steps)")
        if self.batches_per_epoch is not None:
            _check_int("batches_per_epoch", self.batches_per_epoch, 1, "or None for the natural length")
        rank, world_size = resolve_rank(self.rank, self.world_size)
        object.__setattr__(self, "rank", rank)
        object.__setattr__(self, "world_size", world_size)
        object.__setattr__(self, "seed", operator.index(self.seed))
        object.__setattr__(self, "shuffle", bool(self.shuffle))

    def content(self) -> dict[str, Any]:
        """What decides the batches' content, as plain data (for fingerprints and export headers)."""
        return {k: v for k, v in asdict(self).items() if k in CONTENT}


def _check_seed(seed: Any) -> None:
    """A seed is a non-negative integer (numpy's generators refuse the rest, but only once an epoch starts)."""
    try:
        value = operator.index(seed)
    except TypeError:
        raise ConfigError(f"seed={seed!r} must be a non-negative integer, e.g. seed=0") from None
    if isinstance(seed, bool) or value < 0:
        raise ConfigError(f"seed={seed!r} must be a non-negative integer, e.g. seed={abs(value)}")


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
                raise ConfigError(
                    f"RANK={os.environ['RANK']!r} and WORLD_SIZE={os.environ['WORLD_SIZE']!r} must be integers"
                ) from None
        else:
            found = (0, 1)
        rank = found[0] if rank is None else rank
        world_size = found[1] if world_size is None else world_size
    for name, value in (("rank", rank), ("world_size", world_size)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{name}={value!r} must be an integer")
    if world_size < 1 or not 0 <= rank < world_size:
        raise ConfigError(f"rank={rank} must be in 0..world_size-1 (world_size={world_size})")
    return rank, world_size
