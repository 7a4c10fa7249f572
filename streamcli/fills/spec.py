"""What every producer of a loader shares: its fixed facts (``FillSpec``), and what it reports (``Skip``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streamcli.config import LoaderConfig
from streamcli.index_stamps import Stamps
from streamcli.source import Field


@dataclass(frozen=True)
class FillSpec:
    """The facts every producer shares, picklable: the plugin's name, the fields written into the batch and the
    loader's configuration. With a ``transform``, producers read ``source_fields`` and write ``fields``."""

    plugin: str
    fields: tuple[Field, ...]
    config: LoaderConfig
    transform: Any = None
    source_fields: tuple[Field, ...] | None = None
    trace: str | None = None  # a trace file (``streamcli.trace``): each worker records its events for it
    stamps: Stamps | None = None  # the loader's index's: an item changed since is refused where it is opened


@dataclass(frozen=True)
class Skip:
    """An item skipped under on_error="skip" (``kind="skip"``), or a stream whose length differs from what
    ``length()`` promised (``kind="length"``), reported with the batch in which it happened."""

    batch: int
    item: int
    name: str
    step: int
    error: str
    kind: str = "skip"
    file: str = ""  # the item's file, when it names one (``faults.item_file``)

    def describe(self) -> str:
        """``'name' (stream 3, file /data/x.mp4) at step 5: ValueError: ...``: what was skipped, where, why."""
        where = f"stream {self.item}" + (f", file {self.file}" if self.file and self.file != self.name else "")
        return f"{self.name!r} ({where}) at step {self.step}: {self.error}"
