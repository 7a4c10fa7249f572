"""An export folder's JSON files on disk: ``index.json`` loaded and validated, JSON written atomically, the partial
record (``.partial.json``) written and read back, and ``tidy``, which removes what an interrupted finish left.

Their bytes (``json_bytes``) are the same wherever they are written, so a resumed export is byte-identical; a
remote export writes the same bytes through ``remote_writer``.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from streamcli.errors import ShardError
from streamcli.shards.format import MANIFEST, PARTIAL, is_temp_name, validate_manifest
from streamcli.storage import urls


def read_regular(path: Path) -> bytes:
    """The bytes of ``path``, which must be a regular file: a FIFO or a device is refused without blocking.

    ``O_NONBLOCK`` makes opening a FIFO return at once; ``fstat`` then shows what was opened.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ShardError(f"{str(path)!r} is not a regular file (a named pipe or a device?); refusing to read it")
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read()
    finally:
        os.close(fd)


def _json_object(path: Path, fix: str) -> dict[str, Any]:
    """``path`` parsed as a JSON object, or ``ShardError`` naming the file, the problem and ``fix``."""
    try:
        obj = json.loads(read_regular(path))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ShardError(f"{str(path)!r} is not valid JSON ({exc}){fix}") from None
    except RecursionError:
        raise ShardError(f"{str(path)!r} is nested too deeply to be a manifest{fix}") from None
    if not isinstance(obj, dict):
        raise ShardError(f"{str(path)!r} must hold a JSON object{fix}")
    return obj


def load_folder_manifest(out_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Parse and validate a folder's ``index.json``; raise ``ShardError`` naming the file and the problem.

    The result carries ``"_fields"``, the fields as ``Field`` objects. ``load_manifest`` takes a URL too.
    """
    out_dir = urls.local_path(out_dir)
    path = Path(out_dir) / MANIFEST
    if not path.exists():
        hint = " (an interrupted export? rerun it with --resume)" if (Path(out_dir) / PARTIAL).exists() else ""
        raise ShardError(f"{str(path)!r} does not exist{hint}")
    if path.resolve().parent != Path(out_dir).resolve():
        raise ShardError(f"{str(path)!r} is a link to {str(path.resolve())!r}, outside the export folder; refusing it")
    m = _json_object(path, "")
    validate_manifest(m, out_dir, where=repr(str(path)))
    return m


def json_bytes(obj: Any) -> bytes:
    """The bytes of a manifest or partial record, the same wherever it is written (a resumed export is identical)."""
    return (json.dumps(obj, indent=1, sort_keys=True) + "\n").encode()


def write_json(path: Path, obj: Any) -> None:
    """Write ``obj`` as JSON atomically: a temporary name, then a rename; the temp file never outlives a failure."""
    tmp = path.with_name(f".{path.name}.tmp")
    data = json_bytes(obj)
    try:
        tmp.unlink(missing_ok=True)  # a leftover, or a link planted at the temporary name: never written through
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_partial(out_dir: Path, header: Mapping[str, Any], records: Iterable[Mapping[str, Any]]) -> None:
    """Save the state of an unfinished export: its header and one record per completed shard, in order.

    A record is a manifest entry (``name``, ``batches``, ``bytes``, ``sha256``) plus ``state``: JSON data
    the caller gave with the last batch of that shard (``None`` if none).
    """
    write_json(out_dir / PARTIAL, {"header": dict(header), "shards": [dict(r) for r in records]})


def read_partial(out_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]] | None] | None:
    """The header and shard records of ``.partial.json``, or None if there is none.

    A partial record from before per-shard records (just the header) gives None for the records.
    """
    path = out_dir / PARTIAL
    if not path.exists():
        return None
    obj = _json_object(path, "; rerun the export with --overwrite")
    if "header" not in obj:
        return obj, None
    records = obj.get("shards")
    if not isinstance(obj["header"], dict) or not isinstance(records, list):
        raise ShardError(f"{str(path)!r} is malformed; rerun the export with --overwrite")
    return obj["header"], [r for r in records if isinstance(r, dict)]


def tidy(out_dir: str | os.PathLike[str]) -> list[str]:
    """Remove what an interrupted finish left beside a complete export; return a line per file removed.

    Only acts when ``index.json`` exists (the export is complete): then ``.partial.json`` is stale, and the
    writer's temporary files (``is_temp_name``: its exact names, never a user's ``.notes.tmp``) are writes that
    never completed. ``export --resume`` calls it; ``verify`` never does (it changes nothing).
    """
    root = Path(out_dir)
    if not (root / MANIFEST).is_file():
        return []
    done = []
    for p in sorted(root.iterdir()):
        if p.name == PARTIAL or (is_temp_name(p.name) and p.is_file()):
            p.unlink(missing_ok=True)
            why = "state of a finished export" if p.name == PARTIAL else "an unfinished write"
            done.append(f"removed {p.name!r} ({why})")
    return done
