"""``streamcli preview``'s terminal UI, one concept per module.

- ``ansi``: the ANSI encoder (half-block images as pre-built strings, sparklines, widths);
- ``fields``: how one field is shown (its ``Field.display`` hint or an inferred kind) and its text forms;
- ``frame``: batch -> frame, each row's current step copied out of shared memory;
- ``grid``: the cell of one row and the grid layout;
- ``panel``: the statistics panel, the live dashboard and the piped summary;
- ``sheet``: the PNG contact sheet.

Part of the CLI layer: the library never prints and never imports Rich.
"""

from __future__ import annotations

from streamcli.cli.preview.ansi import AnsiLines, half_block_lines, spark
from streamcli.cli.preview.fields import as_rgb, event_rgb, field_kind, field_kinds, resize_nearest
from streamcli.cli.preview.frame import Frame, RowView, frame_from_batch
from streamcli.cli.preview.grid import CellLayout, cell_lines, choose_layout, grid_lines
from streamcli.cli.preview.panel import dashboard, stats_panel, text_summary
from streamcli.cli.preview.sheet import contact_sheet, snapshot_png

__all__ = [
    "AnsiLines",
    "CellLayout",
    "Frame",
    "RowView",
    "as_rgb",
    "cell_lines",
    "choose_layout",
    "contact_sheet",
    "dashboard",
    "event_rgb",
    "field_kind",
    "field_kinds",
    "frame_from_batch",
    "grid_lines",
    "half_block_lines",
    "resize_nearest",
    "snapshot_png",
    "spark",
    "stats_panel",
    "text_summary",
]
