"""The plugin contract as every producer of a loader sees it: its fixed facts (``FillSpec``), each step or block
checked against the declared fields (``step_field``, ``block_arrays``: the slow path of the reader's own check), and
how it reports a source that fails or breaks its promised length (``Faults``, ``Skip``). A step that breaks the
declared fields raises ``StepSpecError`` naming the plugin, item, step and field, with the fix: it is the plugin's
bug, never skipped nor wrapped."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from streamcli.config import LoaderConfig
from streamcli.errors import SourceError, StepSpecError
from streamcli.index_stamps import Stamps
from streamcli.source import Field, StreamSource, item_name

SOURCE_ERRORS = (Exception, SystemExit)  # ``sys.exit()`` inside a source is an error of the source too


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
    file: str = ""  # the item's file, when it names one (``item_file``)

    def describe(self) -> str:
        """``'name' (stream 3, file /data/x.mp4) at step 5: ValueError: ...``: what was skipped, where, why."""
        where = f"stream {self.item}" + (f", file {self.file}" if self.file and self.file != self.name else "")
        return f"{self.name!r} ({where}) at step {self.step}: {self.error}"


def item_file(item: Any) -> str | None:
    """The file behind an item, to name in a message: the item when it is a path, or a tuple's first member."""
    first = item[0] if isinstance(item, (tuple, list)) and item else item
    if not isinstance(first, (str, os.PathLike)):
        return None
    path = os.fspath(first)
    if not isinstance(path, str) or len(path) > 4096 or "\n" in path:
        return None
    return path if "://" in path or os.path.exists(path) else None


def short_repr(value: object, width: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


Spec = Sequence[tuple[str, tuple[int, ...], np.dtype[Any]]]  # (name, shape, dtype) per field, in field order


def step_field(
    step: Any, name: str, shape: tuple[int, ...], dtype: np.dtype[Any], where: Callable[[], str]
) -> np.ndarray:
    """Field ``name`` of one step as an array of ``shape`` and ``dtype`` (scalars and lists converted), or raise
    ``StepSpecError``; ``where()`` says "plugin ... item ... step N"."""
    a = _array(step, name, where, "step", "yield a dict with every declared field")
    if a.shape != shape or a.dtype != dtype:
        raise StepSpecError(
            f"{where()}: field {name!r} is {a.dtype.name}{list(a.shape)} but the source declared "
            f"{dtype.name}{list(shape)}; make the step match fields() (e.g. resize or .astype)"
        )
    return a


def block_arrays(block: Any, spec: Spec, where: Callable[[], str]) -> list[np.ndarray]:
    """A block's arrays in field order, each ``(n, *shape)`` with the same ``n >= 1``, or raise ``StepSpecError``
    naming the field that is missing, mis-shaped or of another step count than the rest (``where()`` says
    "plugin ... item ... block at step N")."""
    out: list[np.ndarray] = []
    try:  # the usual block: exact arrays, checked in a few comparisons each
        for name, shape, dtype in spec:
            a = block[name]
            if type(a) is not np.ndarray and isinstance(a, np.ndarray):
                a = a.view(np.ndarray)  # a memmap's slice: slicing it again makes more memmaps, slower to make
            n = len(out[0]) if out else len(a)
            if type(a) is not np.ndarray or a.shape[1:] != shape or a.dtype != dtype or not n or len(a) != n:
                break
            out.append(a)
        else:
            return out
    except (KeyError, TypeError, IndexError):
        pass
    out = []
    for name, shape, dtype in spec:  # the full check: converts array-likes, and names what is wrong
        fix = "with block_steps=True yield a dict of (n, *shape) arrays, one per declared field"
        a = _array(block, name, where, "block", fix)
        if a.ndim != len(shape) + 1 or a.shape[1:] != shape or a.dtype != dtype or len(a) < 1:
            raise StepSpecError(
                f"{where()}: field {name!r} is {a.dtype.name}{list(a.shape)} but a block of n >= 1 steps must be "
                f"{dtype.name}[n, {', '.join(map(str, shape))}]; make the block match fields()"
            )
        if out and len(a) != len(out[0]):
            raise StepSpecError(
                f"{where()}: fields of one block must have the same n steps; {name!r} has {len(a)}, another has "
                f"{len(out[0])}"
            )
        out.append(a)
    return out


def _array(got: Any, name: str, where: Callable[[], str], what: str, fix: str) -> np.ndarray:
    """Field ``name`` of a step or block (``what``) as an array (scalars and lists converted), or raise naming it."""
    try:
        a = got[name]
    except (KeyError, TypeError, IndexError):
        raise StepSpecError(f"{where()}: the {what} has no field {name!r} (got {type(got).__name__}); {fix}") from None
    return a if type(a) is np.ndarray else np.asarray(a)


@dataclass
class Faults:
    """The reporting context of one producer; ``k`` is the batch being filled."""

    plugin: str
    source: StreamSource
    items: Sequence[Any]
    on_error: str
    on_skip: Callable[[Skip], None]
    k: int = 0
    stamps: Stamps | None = None

    def check_data(self, item: int) -> None:
        """Refuse item ``item`` if it changed since the loader's index measured it (the index is stale: no skip)."""
        if self.stamps is not None:
            self.stamps.check(item)

    def name(self, item: int) -> str:
        return item_name(self.source, self.items[item])

    def fail(self, item: int, pos: int, exc: BaseException, doing: str) -> None:
        """The source raised ``exc`` while ``doing`` item ``item`` at step ``pos``: skip it, or raise."""
        if isinstance(exc, StepSpecError):
            raise exc
        name, file = self.name(item), item_file(self.items[item])
        if self.on_error == "skip":
            error = f"{type(exc).__name__}: {exc}"
            self.on_skip(Skip(batch=self.k, item=item, name=name, step=pos, error=error, file=file or ""))
            return
        where = f"stream {item}, file {file}" if file and file != name else f"stream {item}"
        raise SourceError(
            f"plugin {self.plugin!r} failed {doing} item {name!r} ({where}) at step {pos}: "
            f"{type(exc).__name__}: {exc}; on_error='skip' skips an item that fails"
        ) from exc

    def mismatch(self, item: int, pos: int, expect: int, what: str) -> None:
        name = self.name(item)
        msg = f"item {name!r} (stream {item}): length() said {expect} steps but it {what}"
        self.on_skip(Skip(batch=self.k, item=item, name=name, step=pos, error=msg, kind="length"))

    def where(self, item: int, pos: int, what: str) -> str:
        """Where a step broke the contract: "plugin ... item ... step N" (or "block at step N")."""
        return f"plugin {self.plugin!r} item {self.name(item)!r} {what} {pos}"
