"""streamcli: temporally coherent (T, B, ...) batches of many streams, assembled in shared memory.

Write an iterator over one stream (a source plugin); ``StreamLoader`` runs many of them in worker processes
and yields batches in which row ``b`` continues the same stream from one batch to the next.

The public API is defined here and only here. Importing streamcli does not import torch: the names that need it
(``RowState``, ``run_rnn`` from ``streamcli.tbptt``) load on first use.
"""

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

from streamcli._version import __version__

if TYPE_CHECKING:
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
    from streamcli.tbptt import RowState, run_rnn

# Each public name loads its module on first use: a worker process imports streamcli.workers.worker, which runs
# this file first, and should pay for the fill engine and numpy, not for export, bench, the plugins' registry
# or torch (streamcli.tbptt).
_WHERE = {
    "FLAGS": "batch",
    "Batch": "batch",
    "BenchResult": "bench",
    "run_benchmark": "bench",
    "LoaderConfig": "config",
    "ExportSummary": "exports",
    "export": "exports",
    "StreamLoader": "loader",
    "Mix": "mix",
    "mix": "mix",
    "PluginInfo": "plugins",
    "list_plugins": "plugins",
    "load_source": "plugins",
    "ShardReader": "shards",
    "ShardWriter": "shards",
    "BaseSource": "source",
    "Field": "source",
    "StreamSource": "source",
    "LoaderStats": "stats",
    "RowState": "tbptt",
    "run_rnn": "tbptt",
}
_WHERE.update(
    dict.fromkeys(
        [
            "ConfigError",
            "ExportBusyError",
            "PluginLoadError",
            "PluginNotFoundError",
            "ShardError",
            "SharedMemoryError",
            "SourceError",
            "StateError",
            "StepSpecError",
            "StorageError",
            "StreamcliError",
            "TransformError",
            "UnsupportedURLError",
            "WorkerError",
        ],
        "errors",
    )
)


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        value = getattr(importlib.import_module(f"streamcli.{_WHERE[name]}"), name)
        globals()[name] = value  # the next lookup is a plain attribute
        return value
    raise AttributeError(f"module 'streamcli' has no attribute {name!r}")


class _Package(types.ModuleType):
    """Importing the submodule ``streamcli.mix`` binds it to the name ``mix`` here, over the function of that
    name (``from streamcli import Mix, mix`` gave the module): a submodule named as a public name binds that name."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and _WHERE.get(name) == name:
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


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
assert sorted(__all__) == __all__ and set(__all__) == {*_WHERE, "__version__"}
