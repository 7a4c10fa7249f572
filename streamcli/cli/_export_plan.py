"""What an export will do, worked out before it writes: the ``--shard-size`` and ``--compress`` flags, the batches
it will write, and what OUT_DIR already holds (told apart after a resumed run)."""

from __future__ import annotations

from typing import Any

from streamcli.cli._common import UsageFailure
from streamcli.errors import ConfigError, ShardError
from streamcli.export_dir import check_out_dir as check_out_dir
from streamcli.export_dir import foreign_file as foreign_file
from streamcli.export_dir import listing as listing
from streamcli.export_dir import shard_files as shard_files


def parse_size(text: str) -> int:
    """``64MB``, ``500k``, ``1GiB`` or a byte count (``streamcli.export``'s ``shard_size``)."""
    from streamcli.exports import parse_size as parse

    try:
        return parse(text)
    except ConfigError:
        raise UsageFailure(f"--shard-size {text!r} must be a size like 64MB, 500kB or 1GiB, or a byte count") from None


def check_compress(compress: str, level: int | None) -> None:
    """Refuse a codec or level that ``make_header`` would refuse, or zstd without zstandard, before any work."""
    from streamcli.shards import codec

    if compress not in codec.NAMES:
        raise UsageFailure(f"--compress {compress!r} must be one of {', '.join(codec.NAMES)}")
    if level is not None and compress != "zstd":
        raise UsageFailure(f"--level {level} needs --compress zstd (--compress {compress} has no level)")
    if level is not None and level not in codec.ZSTD_LEVELS:
        raise UsageFailure(f"--level {level} must be from {codec.ZSTD_LEVELS[0]} to {codec.ZSTD_LEVELS[-1]}")
    if compress == "zstd":
        try:
            codec.import_zstd()
        except ShardError as exc:
            raise UsageFailure(f"--compress zstd: {exc}") from None


def batches_to_write(loader: Any, epochs: int | None, batches: int | None) -> int | None:
    """Batches the export will write, if the lengths say; None when unknown."""
    try:
        per_epoch: list[int] | None = (
            [int(loader.batches_in_epoch(e)) for e in range(epochs)] if epochs is not None else None
        )
    except TypeError:
        return batches if epochs is None else None
    if per_epoch is None:
        return batches
    return min(batches or 1 << 62, sum(per_epoch))


def epochs_for(loader: Any, total: int) -> int:
    """The index of the epoch in which batch ``total`` falls (for --batches without --epochs)."""
    done, e = 0, 0
    while True:
        n = loader.batches_in_epoch(e)
        if n == 0 or done + n >= total:
            return e
        done += n
        e += 1
