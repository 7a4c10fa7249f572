"""``streamcli inspect``'s terminal app (Textual), one widget per module.

- ``app``: ``InspectApp``, the keys and the loading of batches on a worker thread;
- ``grid``: the B x T grid of flags;
- ``rows``: the rows table (item, stream, positions, how far through the item);
- ``detail``: the selected row's fields by kind;
- ``follow``: a followed stream's strip across batches;
- ``help``: the ``?`` screen;
- ``colours``: a stream's colour.

Part of the CLI layer; the batches come from ``streamcli.inspection``.
"""

from __future__ import annotations

from streamcli.cli.inspect.app import InspectApp

__all__ = ["InspectApp"]
