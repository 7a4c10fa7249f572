"""The ``?`` screen: every key of ``streamcli inspect``."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import Static

KEYS = (
    ("?", "this help (any of ? q escape closes it)"),
    ("n  →", "the next batch"),
    ("p  ←", "the previous batch"),
    ("g K Enter", "go to batch K (escape cancels)"),
    ("↑  ↓", "select a row"),
    ("f", "follow the selected row's stream: the rows and batches it spans"),
    ("q", "quit"),
)


def help_table() -> Table:
    table = Table(title="streamcli inspect: keys", show_header=False, box=None, padding=(0, 2))
    for key, what in KEYS:
        table.add_row(f"[bold]{key}[/]", what)
    table.caption = "batch K counts every batch the loader hands out, across epochs, from 0"
    return table


class HelpScreen(ModalScreen[None]):
    """The keys, over the app; closes on ``?``, ``q`` or escape."""

    BINDINGS = [  # noqa: RUF012  (Textual's own class attribute)
        Binding("question_mark,q,escape", "dismiss", "close", show=False),
    ]
    DEFAULT_CSS = "HelpScreen { align: center middle; } #help { width: auto; border: round $accent; padding: 1 2; }"

    def compose(self) -> ComposeResult:
        yield Static(help_table(), id="help")

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)
