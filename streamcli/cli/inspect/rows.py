"""The rows table: per row its item, stream id, positions and how far through the item it is."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable

from streamcli.batch import Batch
from streamcli.cli.inspect.colours import stream_colour
from streamcli.inspection.record import row_record

COLUMNS = ("row", "stream", "item", "positions", "through the item", "worker")
BAR = 10


def progress(last: int, length: int | None) -> str:
    """``▇▇▇▇░░░░░░ 41%  81/193`` (how far the row's last step is through its item), or ``81/?``."""
    if not length:
        return f"{last + 1}/?"
    share = min(max((last + 1) / length, 0.0), 1.0)
    n = round(share * BAR)
    return f"{'▇' * n}{'░' * (BAR - n)} {share:4.0%}  {last + 1}/{length}"


def positions_span(positions: list[int], valid: list[bool]) -> str:
    live = [p for p, v in zip(positions, valid, strict=True) if v]
    if not live:
        return "padding"
    return f"{live[0]}..{live[-1]}" if len(live) > 1 else str(live[0])


def worker_label(worker: int | str | None) -> str:
    """``w1``, ``main`` (no workers), ``moves`` (balance), or ``-`` (not known: an export)."""
    if worker is None:
        return "-"
    return f"w{worker}" if isinstance(worker, int) else worker


class RowsTable(DataTable[Text | str]):
    """One line per batch row; the cursor is the selected row. ← and → go to the batches, not the columns."""

    BINDINGS = [  # noqa: RUF012  (Textual's own class attribute)
        Binding("left", "app.previous", "previous", show=False),
        Binding("right", "app.next", "next", show=False),
    ]

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.zebra_stripes = True
        self.add_columns(*COLUMNS)

    def show(
        self,
        batch: Batch,
        name_of: Callable[[int], str],
        length_of: Callable[[int], int | None],
        selected: int,
        workers: Sequence[int | str] | None = None,
    ) -> None:
        """The rows of ``batch``; ``workers``: the producer of each row (``LoaderBatches.workers_of``), or None
        (an export: not known)."""
        self.clear()
        for b in range(batch.batch_size):
            r = row_record(batch, b, name_of)
            sid = r["stream"]
            live = [p for p, v in zip(r["positions"], r["valid"], strict=True) if v]
            self.add_row(
                str(b),
                Text(str(sid) if sid >= 0 else "-", style=stream_colour(sid)),
                r["item"] or "(padding)",
                positions_span(r["positions"], r["valid"]),
                progress(live[-1], length_of(sid)) if live else "",
                worker_label(None if workers is None else workers[b]),
                key=str(b),
            )
        self.move_cursor(row=min(selected, batch.batch_size - 1))
