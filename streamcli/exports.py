"""``streamcli.export``: a loader's batches written to ``.npz`` shards in one call, and what the export did.

The CLI's ``streamcli export`` writes through the same ``streamcli.shards.exporting.export_loader`` and reports
from the same ``summarize``, so a Python export and a CLI export of the same batches hold the same shards (the
header's ``source`` record differs: the CLI records what was typed). Read the shards back with ``ShardReader``.
What the export folder already holds, and whether an export may write there, is ``export_dir``'s.
"""

from __future__ import annotations

import dataclasses
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streamcli.config import CONTENT
from streamcli.errors import ConfigError, LoaderClosedError, LoaderUsageError
from streamcli.export_dir import check_out_dir, listing, resolve, shard_files

_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9}
_UNITS |= {"kib": 2**10, "mib": 2**20, "gib": 2**30}
_SIZE = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*([a-z]*)")
# What decides the batches' content beside B and T, which the header records on their own (config.CONTENT).
_RECORDED = tuple(k for k in CONTENT if k not in ("batch_size", "time_steps"))


def parse_size(size: str | int) -> int:
    """Bytes from ``64MB``, ``500kB``, ``1GiB`` (binary), ``1.5g`` or a positive byte count."""
    if isinstance(size, int) and not isinstance(size, bool) and size > 0:
        return size
    m = _SIZE.fullmatch(size.strip().lower()) if isinstance(size, str) else None
    if m is None or m.group(2) not in _UNITS or float(m.group(1)) * _UNITS[m.group(2)] < 1:
        raise ConfigError(f"shard_size={size!r} must be a size like 64MB, 500kB or 1GiB, or a byte count like 65536")
    return int(float(m.group(1)) * _UNITS[m.group(2)])


@dataclass(frozen=True)
class ExportSummary:
    """What an export did, as ``streamcli export`` reports it.

    ``batches``, ``shards`` and ``bytes`` count the whole export; ``written_*`` what this call wrote (a resumed
    export keeps the complete shards of the interrupted one; an export already complete writes nothing).
    ``steps`` is the room the batches this call read have (batches x B x T: the written ones, unless a resume had
    to read kept ones again) and ``valid_steps`` the steps of real data in them (None if unknown: a Ray export),
    so ``useful_share`` is the share that is not padding. ``manifest`` is the export's ``index.json``.
    """

    out_dir: str
    batches: int
    shards: int
    bytes: int
    written_batches: int
    written_shards: int
    written_bytes: int
    steps: int
    valid_steps: int | None
    seconds: float
    compress: str
    level: int | None
    resumed: bool
    already_complete: bool
    hint: str | None = None
    manifest: Mapping[str, Any] = dataclasses.field(default_factory=dict, repr=False, compare=False)

    @property
    def useful_share(self) -> float | None:
        """``valid_steps / steps``; None when nothing was written or the steps are unknown."""
        return self.valid_steps / self.steps if self.steps and self.valid_steps is not None else None

    @property
    def mb_per_s(self) -> float | None:
        """Megabytes written per second by this call; None when nothing was written."""
        return self.written_bytes / 1e6 / self.seconds if self.written_bytes and self.seconds > 0 else None

    def to_json(self) -> dict[str, Any]:
        """The summary as plain JSON values, keyed as ``streamcli export --json`` prints it (``written`` holds what
        this call wrote; the manifest is left out: it is ``index.json``)."""
        return {
            "out_dir": self.out_dir,
            "batches": self.batches,
            "shards": self.shards,
            "bytes": self.bytes,
            "compression": self.compress,
            "level": self.level,
            "already_complete": self.already_complete,
            "resumed": self.resumed,
            "written": {"batches": self.written_batches, "shards": self.written_shards, "bytes": self.written_bytes},
            "steps": self.steps,
            "valid_steps": self.valid_steps,
            "seconds": self.seconds,
            "useful_share": self.useful_share,
            "mb_per_s": self.mb_per_s,
            "hint": self.hint,
        }


def summarize(
    manifest: Mapping[str, Any],
    out_dir: str | Path,
    before: Mapping[str, tuple[Any, ...]],
    *,
    seconds: float,
    valid_steps: int | None,
    resumed: bool,
    already_complete: bool,
    hint: str | None = None,
    batches_read: int | None = None,
) -> ExportSummary:
    """The summary of an export that ended with ``manifest``; ``before`` is ``shard_files`` taken before a
    resumed run (the shards it kept are those whose identity did not change), else empty. ``valid_steps`` and
    ``batches_read`` are the loader's count of real steps and batches in this call (``batches_read`` defaults to
    the batches written)."""
    now = shard_files(out_dir)
    shards = manifest["shards"]
    kept = [sh for sh in shards if sh["name"] in before and before[sh["name"]] == now.get(sh["name"])]
    total_bytes = sum(int(sh["bytes"]) for sh in shards)
    n = int(manifest["batches"])
    written = 0 if already_complete else n - sum(int(sh["batches"]) for sh in kept)
    room = int(manifest["batch_size"]) * int(manifest["time_steps"])  # steps a batch holds
    return ExportSummary(
        out_dir=str(out_dir),
        batches=n,
        shards=len(shards),
        bytes=total_bytes,
        written_batches=written,
        written_shards=0 if already_complete else len(shards) - len(kept),
        written_bytes=0 if already_complete else total_bytes - sum(int(sh["bytes"]) for sh in kept),
        steps=(written if batches_read is None else batches_read) * room,
        valid_steps=valid_steps,
        seconds=seconds,
        compress=str(manifest.get("compression") or "none"),
        level=manifest.get("compression_level"),
        resumed=resumed,
        already_complete=already_complete,
        hint=hint,
        manifest=dict(manifest),
    )


def _count(name: str, value: int | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name}={value!r} must be a whole number of at least 1, or None")
    return value


def _check_unused(loader: Any) -> None:
    """Refuse a closed loader, or one that has handed out batches (its next ``iter`` would start elsewhere than
    the run's first batch, and supersede the iterator in use)."""
    if getattr(loader, "closed", False):
        raise LoaderClosedError("export(loader): this StreamLoader is closed; pass a new one (nothing was written)")
    state = loader.state_dict()
    epoch, batch = int(state.get("epoch", 0)), int(state.get("batch", 0))
    if epoch or batch or state.get("tickets"):
        done = f"{batch} batches of epoch {epoch}" if batch else f"{epoch} epoch(s)"
        raise LoaderUsageError(
            f"export(loader) writes the loader's run from its first batch, but this loader has handed out {done} "
            "(or holds a loaded state there): the export would leave them out and restart the loader under the "
            "iterator in use. Pass a new StreamLoader with the same settings (nothing was written); to continue an "
            "interrupted export, pass resume=True with a new loader"
        )


def export(
    loader: Any,
    out_dir: str | os.PathLike[str],
    *,
    batches: int | None = None,
    epochs: int | None = None,
    compress: str = "none",
    level: int = 3,
    shard_size: str | int = "64MB",
    resume: bool = False,
    overwrite: bool = False,
) -> ExportSummary:
    """Write a ``StreamLoader``'s batches to ``out_dir`` as ``.npz`` shards with an ``index.json`` manifest.

    Args:
        loader: a ``StreamLoader`` that has handed out no batch yet (the export writes its run from the first
            batch; it stays open). A loader already iterated, or closed, is refused before anything is written:
            an export from the middle of an epoch would silently leave out what was handed out before.
        out_dir: a folder (created if missing) or a URL (``s3://bucket/run``; ``pip install 'streamcli[s3]'``).
        batches: write this many batches, running as many epochs as that takes (capped by ``epochs``).
        epochs: write at most this many epochs. Default: one, or as many as ``batches`` needs.
        compress: ``"none"``, ``"zstd"`` (``pip install 'streamcli[zstd]'``) or ``"deflate"``.
        level: the zstd level, 1 (fastest) to 22 (smallest); only ``compress="zstd"`` has levels.
        shard_size: roll shards over at about this size: ``"64MB"``, ``"1GiB"`` or a byte count.
        resume: continue an interrupted export from its last complete shard (byte-identical to an
            uninterrupted one; nothing before that shard is read again). An export already complete is left as
            it is (``already_complete``).
        overwrite: replace an export already in ``out_dir`` (a folder holding other files is still refused).

    Returns the ``ExportSummary``. Raises ``LoaderUsageError`` for a loader that handed out batches (or
    ``LoaderClosedError``, closed), ``ConfigError`` for a bad argument and ``ShardError`` for an
    ``out_dir`` that holds something this call may not replace; ``streamcli.shards.verify(out_dir)`` (or
    ``streamcli verify``) checks the result.
    """
    from streamcli.shards import MANIFEST, make_header
    from streamcli.shards.codec import NAMES
    from streamcli.shards.exporting import export_loader

    if not all(hasattr(loader, a) for a in ("fields", "config", "state_dict", "stream_length")):
        raise ConfigError(f"loader={loader!r} must be a StreamLoader (streamcli.StreamLoader(source, B, T))")
    _check_unused(loader)
    batches, epochs = _count("batches", batches), _count("epochs", epochs)
    if overwrite and resume:
        raise ConfigError("overwrite=True and resume=True exclude each other; pick one")
    if compress not in NAMES:
        raise ConfigError(f"compress={compress!r} must be one of {', '.join(map(repr, NAMES))}")
    if compress != "zstd" and level != 3:
        raise ConfigError(f"level={level!r} is for compress='zstd' only; compress={compress!r} has no level")
    shard_bytes = parse_size(shard_size)
    place = resolve(out_dir)
    present = listing(place)
    check_out_dir(str(place), present, overwrite=overwrite, resume=resume)
    try:
        header = make_header(
            fields=loader.fields,
            batch_size=loader.batch_size,
            time_steps=loader.time_steps,
            layout=loader.layout,
            source={"plugin": loader.plugin, "arg": None, "options": {}},
            loader={
                **{k: getattr(loader.config, k) for k in _RECORDED},
                "epochs": epochs,
                "batches": batches,
            },
            shard_bytes=shard_bytes,
            compress=compress,
            level=level if compress == "zstd" else None,
            streams=[loader.stream_name(i) for i in range(loader.num_streams)],
            stream_lengths=[loader.stream_length(i) for i in range(loader.num_streams)],
        )
    except ValueError as exc:  # the codec's refusal of a level
        raise ConfigError(str(exc)) from None
    n_epochs = epochs if epochs is not None else None if batches is not None else 1
    mode = "resume" if resume else "overwrite" if overwrite else "new"
    was_complete = resume and MANIFEST in present
    before = shard_files(place) if resume else {}
    before_stats = loader.stats
    t0 = time.perf_counter()
    manifest = export_loader(loader, place, header, epochs=n_epochs, batches=batches, mode=mode)
    seconds = time.perf_counter() - t0
    stats = loader.stats
    return summarize(
        manifest,
        place,
        before,
        seconds=seconds,
        valid_steps=stats.steps - before_stats.steps,
        batches_read=stats.batches - before_stats.batches,
        resumed=resume,
        already_complete=was_complete,
        hint=stats.padding_hint() or None,
    )
