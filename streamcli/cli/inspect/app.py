"""``InspectApp``: the Textual app of ``streamcli inspect``, over any batch source with ``batch(k)``.

Batches are read on a worker thread (going to a batch may seek, or replay when lengths are unknown), one at a
time under a lock; the screen shows ``loading batch K`` meanwhile, with the replay's progress.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import DataTable, Footer, Input, Static

from streamcli.batch import Batch
from streamcli.cli.inspect.detail import DetailPane, detail
from streamcli.cli.inspect.follow import FollowPane, follow_text
from streamcli.cli.inspect.grid import FlagGrid
from streamcli.cli.inspect.help import HelpScreen
from streamcli.cli.inspect.rows import RowsTable
from streamcli.inspection.strip import around, first_valid, span_around, strip_of


class Batches(Protocol):
    """What the app reads: ``LoaderBatches`` or ``ExportBatches`` (``streamcli.inspection``)."""

    seeks: bool

    def batch(self, k: int) -> Batch: ...
    def scan(self, first: int, end: int) -> Any: ...
    def wait(self, k: int) -> float | None: ...
    def stream_name(self, stream: int) -> str: ...
    def stream_length(self, stream: int) -> int | None: ...
    def workers_of(self, k: int, batch: Batch) -> Sequence[int | str] | None: ...


class InspectApp(App[None]):
    """Any batch of a run: its flags grid, its rows, the selected row's fields and a followed stream."""

    TITLE = "streamcli inspect"
    CSS = """
    #status { height: 1; background: $boost; padding: 0 1; }
    #grid { height: auto; max-height: 50%; padding: 0 1; }
    #panes { height: 1fr; }
    #rows { width: 3fr; }
    #side { width: 2fr; border-left: solid $accent; padding: 0 1; }
    #goto { dock: bottom; display: none; }
    #goto.open { display: block; }
    """
    BINDINGS = [  # noqa: RUF012  (Textual's own class attribute)
        Binding("question_mark", "help", "help"),
        Binding("n,right", "next", "next"),
        Binding("p,left", "previous", "previous"),
        Binding("g", "goto", "go to"),
        Binding("f", "follow", "follow"),
        Binding("q", "quit", "quit"),
    ]

    def __init__(
        self,
        batches: Batches,
        *,
        start: int = 0,
        label: str = "",
        displays: Mapping[str, str] | None = None,
        tokenizer: Any = None,
    ) -> None:
        super().__init__()
        self.batches, self.label = batches, label
        self.displays, self.tokenizer = dict(displays or {}), tokenizer
        self.k, self.selected = start, 0
        self.batch: Batch | None = None
        self.status_line = ""
        self.following: int | None = None
        self._lock = threading.Lock()
        if hasattr(batches, "progress"):
            batches.progress = self._progress

    def compose(self) -> ComposeResult:
        yield Static(id="status")
        yield FlagGrid(id="grid")
        with Horizontal(id="panes"):
            yield RowsTable(id="rows")
            with VerticalScroll(id="side"):
                yield DetailPane(id="detail")
                yield FollowPane(id="follow")
        yield Input(placeholder="go to batch K, then Enter (escape cancels)", id="goto", restrict=r"[0-9]*")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(RowsTable).focus()
        self.go(self.k)

    # ------------------------------------------------------------------------------------------ loading
    def go(self, k: int) -> None:
        if k < 0:
            self._say(f"batch {self.k}: there is no batch before batch 0")
            return
        self._say(f"loading batch {k}..." + ("" if self.batches.seeks else " (lengths unknown: replaying the run)"))
        self.run_worker(lambda: self._load(k), thread=True, exclusive=True, group="load")

    def _load(self, k: int) -> None:
        try:
            with self._lock:
                batch = self.batches.batch(k)
        except (IndexError, ValueError) as exc:  # past the run's end (RunEnded), or the export's
            self.call_from_thread(self._say, f"batch {self.k}: {exc}")
            return
        self.call_from_thread(self._show, k, batch)

    def _progress(self, done: int, total: int) -> None:
        self.call_from_thread(self._say, f"lengths unknown: replaying the run... {done}/{total} batches read")

    def _say(self, line: str) -> None:
        self.status_line = line
        self.query_one("#status", Static).update(line)

    def _show(self, k: int, batch: Batch) -> None:
        self.k, self.batch = k, batch
        self.selected = min(self.selected, batch.batch_size - 1)
        wait = self.batches.wait(k)
        parts = [f"batch {k}", f"epoch {batch.epoch} (its batch {batch.index})"]
        parts.append(f"wait {wait * 1e3:.1f} ms" if wait is not None else "from the export")
        parts.append("any batch is read alone" if self.batches.seeks else "lengths unknown: going back replays")
        self._say("  ·  ".join([*parts, self.label] if self.label else parts))
        self.query_one(FlagGrid).show(batch, self.selected)
        workers = self.batches.workers_of(self.k, batch)
        self.query_one(RowsTable).show(
            batch, self.batches.stream_name, self.batches.stream_length, self.selected, workers
        )
        self._detail()
        if self.following is not None:
            stream = self.following
            self.run_worker(lambda: self._follow(stream), thread=True, exclusive=True, group="follow")

    def _detail(self) -> None:
        if self.batch is not None:
            self.query_one(DetailPane).update(detail(self.batch, self.selected, self.displays, self.tokenizer))

    # ------------------------------------------------------------------------------------------ actions
    def action_next(self) -> None:
        self.go(self.k + 1)

    def action_previous(self) -> None:
        self.go(self.k - 1)

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_goto(self) -> None:
        box = self.query_one("#goto", Input)
        box.value = ""
        box.add_class("open")
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._close_goto()
        if event.value.strip():
            self.go(int(event.value))

    def on_key(self, event: Any) -> None:
        if event.key == "escape" and self.query_one("#goto", Input).has_class("open"):
            self._close_goto()

    def _close_goto(self) -> None:
        self.query_one("#goto", Input).remove_class("open")
        self.query_one(RowsTable).focus()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if self.batch is None or event.cursor_row == self.selected:
            return
        self.selected = event.cursor_row
        self.query_one(FlagGrid).show(self.batch, self.selected)
        self._detail()

    def action_follow(self) -> None:
        if self.batch is None:
            return
        here = first_valid(self.batch, self.selected)
        if here is None:
            self._say(f"batch {self.k}: row {self.selected} is padding here; select a row that holds a stream")
            return
        self.following = here[0]
        self.run_worker(lambda: self._follow(here[0]), thread=True, exclusive=True, group="follow")

    def _follow(self, stream: int) -> None:
        view = self._follow_view(stream)
        self.call_from_thread(self.query_one(FollowPane).update, view)

    def _follow_view(self, stream: int) -> Any:
        batch = self.batch
        if batch is None:
            return ""
        here = [at for b in range(batch.batch_size) if (at := first_valid(batch, b)) is not None and at[0] == stream]
        position = here[0][1] if here else 0
        first, end = span_around(self.k, position, self.batches.stream_length(stream), batch.time_steps)
        t0 = time.perf_counter()
        with self._lock:
            strip = around(strip_of(self.batches.scan(first, end), stream), self.k)
        self.log(f"strip of stream {stream}: {len(strip)} pieces in {time.perf_counter() - t0:.3f} s")
        return follow_text(stream, self.batches.stream_name(stream), strip, self.k, complete=self.batches.seeks)
