"""The B x T grid of flags: one line per row, one cell per step, in its stream's colour."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from streamcli.batch import Batch
from streamcli.cli.inspect.colours import stream_colour
from streamcli.inspection.record import time_major

STEP, FIRST, PAD = "■", "◆", "·"
LEGEND = f"{STEP} step (its stream's colour)  {FIRST} is_first (a stream begins)  {PAD} padding"


def grid_text(batch: Batch, selected: int) -> Text:
    """The grid as text: a time ruler, then row ``b``'s steps; the selected row's label reversed."""
    valid, ids, first = (time_major(batch, n) for n in ("valid", "stream", "is_first"))
    steps, rows = valid.shape
    out = Text()
    out.append("row  " + "".join(str(t % 10) for t in range(steps)) + "  t\n", style="dim")
    for b in range(rows):
        out.append(f"{b:>3}  ", style="bold reverse" if b == selected else "dim")
        for t in range(steps):
            if not valid[t, b]:
                out.append(PAD, style="grey42")
            else:
                out.append(FIRST if first[t, b] else STEP, style=stream_colour(int(ids[t, b])))
        out.append("\n")
    out.append(LEGEND, style="dim")
    return out


class FlagGrid(Static):
    """The grid widget; ``show`` redraws it for a batch and a selected row."""

    def show(self, batch: Batch, selected: int) -> None:
        self.update(grid_text(batch, selected))
