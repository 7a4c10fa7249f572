"""streamcli: temporally coherent (T, B, ...) batches of many streams, assembled in shared memory.

Write an iterator over one stream (a source plugin); ``StreamLoader`` runs many of them in worker processes
and yields batches in which row ``b`` continues the same stream from one batch to the next.

The public API is defined here and only here. Importing streamcli does not import torch: the names that need it
(``RowState``, ``run_rnn`` from ``streamcli.tbptt``) load on first use.
"""

from typing import TYPE_CHECKING, Any

from streamcli._version import __version__
from streamcli.batch import FLAGS, Batch
from streamcli.bench import BenchResult, run_benchmark
from streamcli.config import LoaderConfig
from streamcli.errors import (
    ConfigError,
    ExportBusyError,
    PluginLoadError,
    PluginNotFoundError,
    ShardError,
    SharedMemoryError,
    SourceError,
    StateError,
    StepSpecError,
    StorageError,
    StreamcliError,
    TransformError,
    UnsupportedURLError,
    WorkerError,
)
from streamcli.exports import ExportSummary, export
from streamcli.loader import StreamLoader
from streamcli.mix import Mix, mix
from streamcli.plugins import PluginInfo, list_plugins, load_source
from streamcli.shards import ShardReader, ShardWriter
from streamcli.source import BaseSource, Field, StreamSource
from streamcli.stats import LoaderStats

if TYPE_CHECKING:
    from streamcli.tbptt import RowState, run_rnn

_NEEDS_TORCH = {"RowState": "streamcli.tbptt", "run_rnn": "streamcli.tbptt"}


def __getattr__(name: str) -> Any:
    if name in _NEEDS_TORCH:
        import importlib

        return getattr(importlib.import_module(_NEEDS_TORCH[name]), name)
    raise AttributeError(f"module 'streamcli' has no attribute {name!r}")


__all__ = [
    "BaseSource",
    "Batch",
    "BenchResult",
    "ConfigError",
    "ExportBusyError",
    "ExportSummary",
    "FLAGS",
    "Field",
    "LoaderConfig",
    "LoaderStats",
    "Mix",
    "PluginInfo",
    "PluginLoadError",
    "PluginNotFoundError",
    "RowState",
    "ShardError",
    "ShardReader",
    "ShardWriter",
    "SharedMemoryError",
    "SourceError",
    "StateError",
    "StepSpecError",
    "StorageError",
    "StreamLoader",
    "StreamSource",
    "StreamcliError",
    "TransformError",
    "UnsupportedURLError",
    "WorkerError",
    "__version__",
    "export",
    "list_plugins",
    "load_source",
    "mix",
    "run_benchmark",
    "run_rnn",
]
assert sorted(__all__) == __all__
