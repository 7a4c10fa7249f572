"""What an export will do, worked out before it writes: the ``--shard-size`` and ``--compress`` flags, the batches
it will write, and what OUT_DIR already holds (told apart after a resumed run)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from streamcli.cli._common import UsageFailure
from streamcli.errors import ShardError

_SIZE_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9}


def parse_size(text: str) -> int:
    """``64MB``, ``500k``, ``1g`` or a byte count."""
    t = text.strip().lower().replace("ib", "b")
    num = t.rstrip("kmgb")
    unit = t[len(num) :]
    try:
        value = float(num)
    except ValueError:
        value = -1
    if value <= 0 or unit not in _SIZE_UNITS:
        raise UsageFailure(f"--shard-size {text!r} must be a size like 64MB, 500kB or 1GB")
    return int(value * _SIZE_UNITS[unit])


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


def listing(out_dir: str | Path) -> dict[str, Any]:
    """The names in the export folder, or under the URL but its lock object (a killed export's, or a live one's
    that the writer names) -> their fsspec info (locally None)."""
    from streamcli.shards.format import LOCK

    if isinstance(out_dir, str):
        from streamcli.storage.remote import Remote

        return {n: i for n, i in Remote(out_dir).listing().items() if n != LOCK}
    return {p.name: None for p in out_dir.iterdir()} if out_dir.is_dir() else {}  # a local lock file counts


def foreign_file(names: dict[str, Any]) -> str | None:
    """The first of ``listing``'s names that no export writes (a user's ``mynotes.md``, a folder), or None.

    The writer refuses to overwrite a folder holding one; this finds it before any work starts."""
    from streamcli.shards.format import LOCK, is_export_file

    return next((n for n in sorted(names) if n != LOCK and ("/" in n or not is_export_file(n))), None)


def shard_files(out_dir: str | Path) -> dict[str, tuple[Any, ...]]:
    """Each shard file's identity (inode, size, mtime): a shard written again gets a new one (rename into place).
    For an object: size, ETag and modification time."""
    from streamcli.shards.format import SHARD_RE

    if isinstance(out_dir, str):
        return {
            n: (i.get("size"), i.get("ETag"), str(i.get("LastModified")))
            for n, i in listing(out_dir).items()
            if SHARD_RE.match(n)
        }
    if not out_dir.is_dir():
        return {}
    out = {}
    for p in out_dir.iterdir():
        if SHARD_RE.match(p.name):
            st = p.stat()
            out[p.name] = (st.st_ino, st.st_size, st.st_mtime_ns)
    return out


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
