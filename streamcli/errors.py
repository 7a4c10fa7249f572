"""Typed errors. The library raises these and never prints; the CLI turns them into one-line messages."""

from __future__ import annotations


class StreamcliError(Exception):
    """Base class of every error streamcli raises on purpose."""


class ConfigError(StreamcliError, ValueError):
    """A loader setting is out of range or of the wrong type (the message names the value and the limit)."""


class PluginNotFoundError(StreamcliError, LookupError):
    """No plugin of that name is installed."""


class PluginLoadError(StreamcliError, ImportError):
    """A plugin is installed but failed to import or construct."""


class PluginArgumentError(PluginLoadError, TypeError):
    """A source cannot be built from the arguments given: one it requires is missing, or it has none of that name.

    ``missing`` and ``unknown`` name them; ``argument`` is the required positional one (a path, a count) if that
    is what is missing, which the CLI takes after the plugin's name rather than as ``-s``.
    """

    def __init__(
        self, message: str, *, missing: tuple[str, ...] = (), unknown: tuple[str, ...] = (), argument: str | None = None
    ) -> None:
        super().__init__(message)
        self.missing, self.unknown, self.argument = missing, unknown, argument


class SourceError(StreamcliError):
    """A source raised while opening or reading a stream (in a worker or in-process)."""


class EventFileError(SourceError, ValueError):
    """An event recording is truncated, corrupted, or not the format its suffix says (names the file and the fix)."""


class MixError(ConfigError, SourceError):
    """A mix that cannot give an epoch: a source lists no items, every stream is empty, or an ``until='first'``
    mix has an empty source. The user's settings, not a failing source: it passes the loader unwrapped."""


class StateError(StreamcliError, ValueError):
    """A loader state cannot be loaded: from another source or settings, another version, or tampered with."""


class StepSpecError(StreamcliError, ValueError):
    """A step's field is missing, or its shape or dtype differs from what the source declared."""


class TransformError(StepSpecError):
    """A transform (``StreamLoader(transform=...)``) raised, or returned a block that differs from its fields."""


class LoaderUsageError(StreamcliError, RuntimeError):
    """A loader or one of its helpers is used out of order: iterated after ``close()``, through an iterator a newer
    ``iter(loader)`` replaced, or a ``RowState``/transform step skipped. The message names the fix. Also a
    ``RuntimeError``, as these were before they had a class of their own."""


class LoaderClosedError(LoaderUsageError):
    """The ``StreamLoader`` is closed (``close()``, or its ``with`` block ended): create a new one."""


class StaleIteratorError(LoaderUsageError):
    """A newer ``iter(loader)`` started another epoch, so this older iterator gives no more batches."""

    def __init__(self, message: str = "") -> None:
        super().__init__(
            message
            or "this iterator was superseded by a newer iter(loader), which started another epoch; take batches from "
            "the newest iterator (one `for batch in loader` per epoch), or build a second StreamLoader to read two "
            "epochs at once"
        )


class WorkerError(StreamcliError):
    """A worker process died or stopped answering."""


class SharedMemoryError(StreamcliError, MemoryError):
    """The batch ring does not fit in the shared memory there is (``/dev/shm``)."""


class ShardError(StreamcliError):
    """An export directory or shard is missing, truncated, corrupted or unsafe."""


class ExportBusyError(ShardError):
    """Another export holds the lock of the export folder (its message names the holder)."""


class StorageError(StreamcliError):
    """Object storage failed for good (not found, access denied, or still failing after the retries); names the URL."""


class CacheTooSmallError(StorageError, ValueError):
    """An object is larger than the local cache's limit (names the limit and ``STREAMCLI_CACHE_BYTES``)."""


class UnsupportedURLError(StorageError, ValueError):
    """A URL streamcli cannot serve: its scheme is unknown or its fsspec backend is not installed (names the fix)."""


class IndexFileError(StreamcliError, ValueError):
    """An index file (``streamcli index``) is missing, damaged, or cannot be written for this source; names it."""


class StaleIndexError(IndexFileError):
    """An index was written by another source or with other settings; names the index and the command to rebuild."""


class RemoteTraceback(Exception):
    """Carries a traceback formatted in another process; set as ``__cause__`` of the error raised here."""

    def __init__(self, tb: str) -> None:
        super().__init__(tb)
        self.tb = tb

    def __str__(self) -> str:
        return f'\n"""\n{self.tb}"""'
