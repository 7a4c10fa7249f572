"""Any batch of a run, read alone: the library under ``streamcli inspect``.

- ``plan``: the loader's state before batch K from the streams' lengths alone (``Planner``);
- ``positioned``: ``LoaderBatches``, the loader positioned at batch K (or replaying to it without lengths);
- ``exported``: ``ExportBatches``, an export's batch K from its shard;
- ``record``: a batch as plain data (``--batch K --json``).
"""

from __future__ import annotations

from streamcli.inspection.exported import ExportBatches
from streamcli.inspection.plan import Planner, RunEnded
from streamcli.inspection.positioned import LoaderBatches
from streamcli.inspection.record import batch_record, row_record

__all__ = ["ExportBatches", "LoaderBatches", "Planner", "RunEnded", "batch_record", "row_record"]
