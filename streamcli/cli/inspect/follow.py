"""The followed stream's strip: which row holds it in which batch, at which positions, and where it moved."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from streamcli.cli.inspect.colours import stream_colour
from streamcli.inspection.strip import Piece, moves


def follow_text(stream: int, name: str, strip: list[Piece], current: int, *, complete: bool) -> Text:
    """The strip, one line per batch; the current batch marked. ``complete``: read from every batch it spans
    (else only from the batches read so far)."""
    colour = stream_colour(stream)
    out = Text()
    out.append(f"following stream {stream} ", style=f"bold {colour}")
    out.append(f"{name}: {len(strip)} pieces in {len({p.batch for p in strip})} batches")
    out.append("" if complete else " (only the batches read so far: lengths unknown)", style="dim")
    out.append("\n")
    for run in runs(strip):
        a, z = run[0], run[-1]
        here = "▶" if a.batch <= current <= z.batch else " "
        span = f"batch {a.batch}" if a.batch == z.batch else f"batches {a.batch}..{z.batch}"
        out.append(f"{here} row {a.row:>3}  {span:<17} positions {a.first}..{z.last}")
        if a.starts and a.first == 0:
            out.append("  begins", style="bold")
        elif a.starts:  # is_first past position 0: a segment's start, or a resume that re-planned the rows
            out.append(f"  begins here at position {a.first} (a segment, or moved by a resume)", style="bold yellow")
        out.append("\n")
    for batch, before, after in moves(strip):
        out.append(f"  moved from row {before} to row {after} at batch {batch}\n", style="bold yellow")
    return out


def runs(strip: list[Piece]) -> list[list[Piece]]:
    """The strip cut where the row changes, a batch is skipped or a stream begins again (a new segment)."""
    out: list[list[Piece]] = []
    for p in strip:
        last = out[-1][-1] if out else None
        if last is not None and p.row == last.row and p.batch == last.batch + 1 and not p.starts:
            out[-1].append(p)
        else:
            out.append([p])
    return out


class FollowPane(Static):
    """Empty until ``f``; then the followed stream's strip."""
