"""The export folder (or URL) as an export finds it: what it holds, whether this export may write there, and
each shard's identity.

Separate from ``exports`` because the CLI's ``streamcli export`` asks the same questions before it builds its
loader (and words the refusals with its own flags). Nothing here writes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from streamcli.errors import ConfigError, ShardError
from streamcli.storage import urls


def check_out_dir(
    name: str,
    present: Mapping[str, Any],
    *,
    overwrite: bool,
    resume: bool,
    what: str = "out_dir",
    spell: Callable[[str], str] = lambda flag: f"{flag}=True",
    hint: str = "",
) -> None:
    """Refuse an export folder holding ``present`` (``listing``) that this export may not write into: a file no
    export wrote (whatever ``overwrite`` says), or an earlier export without ``overwrite`` or ``resume``.
    ``what``, ``spell`` and ``hint`` word the ``ShardError`` for the caller (the CLI names OUT_DIR and its flags)."""
    theirs = None if resume else foreign_file(present)
    if theirs is not None:
        raise ShardError(
            f"{what} {name!r} holds {theirs!r}, which no export wrote; {spell('overwrite')} deletes only an export's "
            f"own files, so pick an empty folder or remove {theirs!r}{hint}"
        )
    if present and not (overwrite or resume):
        raise ShardError(
            f"{what} {name!r} is not empty; pass {spell('overwrite')} to replace it or {spell('resume')} to continue "
            f"it{hint}"
        )


def listing(out_dir: str | Path) -> dict[str, Any]:
    """The names in the export folder, or under the URL but its lock object (a killed export's, or a live one's
    that the writer names) -> their fsspec info (locally None)."""
    from streamcli.shards.format import LOCK

    if isinstance(out_dir, str):
        from streamcli.storage.remote import Remote

        return {n: i for n, i in Remote(out_dir).listing().items() if n != LOCK}
    return {p.name: None for p in out_dir.iterdir()} if out_dir.is_dir() else {}  # a local lock file counts


def foreign_file(names: Mapping[str, Any]) -> str | None:
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


def resolve(out_dir: str | os.PathLike[str]) -> str | Path:
    """A URL as a string (checked that fsspec serves it), a local folder as a ``Path`` that can be a folder."""
    if isinstance(out_dir, str) and urls.is_remote(out_dir):
        urls.check(out_dir)  # UnsupportedURLError naming the package, before any work
        return out_dir
    path = Path(urls.local_path(out_dir))
    if path.exists() and not path.is_dir():
        raise ConfigError(f"out_dir {str(out_dir)!r} exists and is not a folder; pick a folder")
    blocker = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        raise ConfigError(f"out_dir {str(out_dir)!r} cannot be created: {str(blocker)!r} is a file, not a folder")
    return path
