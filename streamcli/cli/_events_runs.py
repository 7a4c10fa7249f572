"""What ``streamcli events-from-video`` leaves in OUT_DIR and how it cleans up: the run's manifest, which names its
recordings (``--overwrite`` deletes those and nothing else), and the removal of a failed run's files. Apart from
the command so that the rules about a user's folder read in one place."""

from __future__ import annotations

import json
import re
from pathlib import Path

from streamcli.cli._common import UsageFailure

FORMATS = {"evt3": (".raw", "EVT 3.0"), "aedat4": (".aedat4", "AEDAT4"), "npy": (".npy", "numpy")}
"""``--to`` choices: the file suffix the ``events`` source reads, and the format's name."""

MANIFEST = "events-from-video.json"
"""The record of a run's files in OUT_DIR: --overwrite deletes what it names and nothing else."""
_RECORDING = re.compile(r"^\d{5}-[A-Za-z0-9._-]+(" + "|".join(re.escape(s) for s, _ in FORMATS.values()) + r")$")


def earlier_run(out_dir: Path) -> list[str] | None:
    """The recordings the manifest in ``out_dir`` names, or None where there is none (nor a folder).

    Names are checked to be recordings in the folder itself: a manifest edited to name ``../x`` or a user's file
    of another shape is refused rather than obeyed."""
    path = out_dir / MANIFEST
    if not path.is_file():
        return None
    fix = f"; remove it if no events-from-video run wrote {str(out_dir)!r}, or pick another OUT_DIR"
    try:
        files = json.loads(path.read_text())["files"]
    except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError) as exc:
        raise UsageFailure(f"{str(path)!r} is not a manifest events-from-video wrote ({exc}){fix}") from None
    if not isinstance(files, list) or not all(isinstance(n, str) and _RECORDING.match(n) for n in files):
        raise UsageFailure(f"{str(path)!r} names files events-from-video does not write{fix}")
    return [str(n) for n in files]


def ours_of(names: list[str]) -> set[str]:
    """Every name in OUT_DIR a run with these recordings may have written: them, their temporary names, the
    manifest and its temporary name."""
    from streamcli_sources.events.simulate import temporary_names

    return {MANIFEST, f".{MANIFEST}.tmp", *names, *(t for n in names for t in temporary_names(n))}


def is_folder(p: Path) -> bool:
    return p.is_dir() and not p.is_symlink()


def unlink_ours(p: Path) -> None:
    """Remove a file of ours; a folder of that name is the user's (refused earlier where it is in the way)."""
    if not is_folder(p):
        p.unlink(missing_ok=True)


def remove_run(out_dir: Path, names: list[str], created: bool) -> None:
    """Remove what a failed run wrote and what it was replacing (--overwrite had deleted some of it already), its
    manifest last (it names what is left until then); the folder too if this run created it and it is empty."""
    for n in sorted(ours_of(names) - {MANIFEST, f".{MANIFEST}.tmp"}):
        unlink_ours(out_dir / n)
    (out_dir / MANIFEST).unlink(missing_ok=True)
    if created and not any(out_dir.iterdir()):
        out_dir.rmdir()
