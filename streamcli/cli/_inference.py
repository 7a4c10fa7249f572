"""Which plugin a bare PATH implies: the one that can open most of its files, documentation left out of the vote.

A folder of clips with a README.txt is video, not text; a folder of books with a README.md is text. Each plugin's
``can_open`` is asked about the folder (may it open it at all?) and then about each file in it (which of them?).
A plugin that opens the folder but none of its files (an export: ``manifest.json`` and shards) reads a folder
format, which wins. The choice is named on stderr with what it counted and what it leaves out.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from streamcli.cli._common import UsageFailure, count
from streamcli.cli._spec import did_you_mean
from streamcli.plugins import load_factory
from streamcli.source import can_open
from streamcli.storage import urls

# Names that document a folder rather than hold its data (README.txt, LICENSE, CHANGELOG.md...).
_DOC_STEMS = ("README", "LICENSE", "LICENCE", "COPYING", "CHANGELOG", "CHANGES", "NOTICE", "AUTHORS", "CONTRIBUTING")
_DOC_SUFFIXES = {".md", ".rst", ".markdown"}
_NOUNS = {"video": "clip", "audio": "recording", "text": "text file", "events": "recording"}
_MAX_FILES = 5000  # enough to tell what a folder holds; a huge tree is not listed to the end


def is_doc(name: str) -> bool:
    """A documentation file by its name: README*, LICENSE*, ... or any .md/.rst."""
    return name.upper().startswith(_DOC_STEMS) or Path(name).suffix.lower() in _DOC_SUFFIXES


def _files(folder: str) -> list[Path]:
    out: list[Path] = []
    for root, dirs, names in os.walk(folder, followlinks=True):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        out += [Path(root, n) for n in sorted(names) if not n.startswith(".")]
        if len(out) >= _MAX_FILES:
            break
    return out


def _opens(factory: Any, path: str) -> bool:
    try:
        return can_open(factory, path)
    except Exception:  # a broken plugin must not stop inference with the others
        return False


def _names(paths: Sequence[Path], folder: str) -> str:
    shown = [os.path.relpath(p, folder) for p in paths[:3]]
    more = f" and {len(paths) - 3} more" if len(paths) > 3 else ""
    return ", ".join(shown) + more


def infer_plugin(path: str, names: Sequence[str]) -> tuple[str, str | None]:
    """The plugin for a bare ``path``, and for a folder the line that names the choice (None for a file).

    Raises ``UsageFailure`` for a URL (its plugin must be named), a missing path, or a path no plugin opens.
    """
    if urls.is_remote(path):
        urls.check(path)
        raise UsageFailure(f"name the source of a URL, e.g. streamcli preview shards {path} (or text, audio)")
    path = str(urls.local_path(path))
    if not Path(path).exists():
        msg = f"{path!r} is neither an installed plugin nor an existing path; plugins: {', '.join(names)}"
        raise UsageFailure(did_you_mean(msg, path, names))
    candidates: list[tuple[str, Any]] = []
    for name in names:
        try:
            factory = load_factory(name)
        except Exception:
            continue
        if _opens(factory, path):
            candidates.append((name, factory))
    if not candidates:
        raise UsageFailure(f"no plugin can open {path!r}; name one, e.g. streamcli preview video {path}")
    if not Path(path).is_dir():
        return candidates[0][0], None
    files = _files(path)
    opened = {name: [f for f in files if _opens(factory, str(f))] for name, factory in candidates}
    formats = [name for name, _ in candidates if not opened[name]]
    # max() keeps the first of equals: a tie goes to the plugin first by name, as before
    chosen = formats[0] if formats else max(opened, key=lambda n: sum(not is_doc(f.name) for f in opened[n]))
    mine = opened[chosen]
    data = [f for f in mine if not is_doc(f.name)]
    ignored = [f for f in files if f not in mine]
    read_too = [f for f in mine if is_doc(f.name)]
    what = count(len(data), _NOUNS.get(chosen, "file")) if not formats else "a folder it reads whole"
    notes = [what]
    if ignored:
        notes.append(f"{_names(ignored, path)} ignored")
    if read_too:
        notes.append(f"{_names(read_too, path)} read as well, not counted")
    return chosen, f"reading {path.rstrip(os.sep)}/ with the {chosen} plugin ({'; '.join(notes)})"
