"""``--trace FILE``, the one option of preview, bench, export and inspect that asks the loader for a trace."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

TraceFile = Annotated[
    Path | None,
    typer.Option(
        "--trace",
        help="Write a Chrome / Perfetto trace of the workers and the consumer to FILE when the loader closes "
        "(fills split into open, read and write; waits, stalls, row moves); open it at https://ui.perfetto.dev.",
        dir_okay=False,
        metavar="FILE",
        show_default=False,
    ),
]


def trace_kw(trace: Path | None) -> dict[str, Any]:
    """The loader keyword for ``--trace`` (none when it is not given)."""
    return {} if trace is None else {"trace": str(trace)}
