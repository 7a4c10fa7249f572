"""The plugin contract: what a stream source is.

A source is a family of streams. It turns the user's argument (a folder, a file, a count) into a list of
*items*, one per stream, declares the fields of one step, and opens one item as an iterator of steps.
streamcli runs many items at once in worker processes and assembles time-major batches from their steps.

Rules a source must follow:

- The object is pickled to every worker (spawn), so keep it light: paths and options, no open handles.
- ``items()`` is called once, in the main process. Items must be picklable and cheap (paths, ints).
- ``open(item, start=k)`` must yield exactly the steps a fresh ``open(item)`` yields from step ``k`` on.
- Every step is a mapping from field name to an array whose shape and dtype match ``fields()`` exactly.
- Determinism is the source's job too: the same item must give the same steps every time it is opened.

Options: the factory's keyword parameters are the source's options (``-s key=value`` on the command line,
converted by their annotations). ``streamcli plugins NAME`` shows each one's description, taken from an
``Args:`` section (Google style, or numpydoc ``Parameters``) of the class's or ``__init__``'s docstring, or from
``Annotated[int, "description"]`` on the parameter. Where the signature's default is a "not given" marker
(``None``, ``0``, ``""``), a description saying ``Default: 50000.`` shows that default instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from streamcli.fields import DISPLAY_KINDS as DISPLAY_KINDS  # ``Field`` is part of the plugin contract
from streamcli.fields import Field as Field

Step = Mapping[str, "npt.ArrayLike"]
"""One time step of one stream: field name -> array (or scalar for shape ``()`` fields)."""


@runtime_checkable
class StreamSource(Protocol):
    """A family of streams whose steps have fixed-shape fields."""

    def items(self) -> Sequence[Any]:
        """One picklable item per stream, in a deterministic order."""
        ...

    def fields(self) -> Sequence[Field]:
        """The fields of one step."""
        ...

    def open(self, item: Any, start: int = 0) -> Iterator[Step]:
        """Iterate the steps of one item, beginning at step ``start`` (used for resume)."""
        ...

    def length(self, item: Any) -> int | None:
        """The number of steps of ``item`` if known without decoding it, else ``None``."""
        ...


class BaseSource:
    """Optional base class with the defaults of the contract's optional parts.

    Subclass it and implement ``items``, ``fields`` and ``open``. Override the rest when useful:

    - ``length(item)``: known lengths make ``len(loader)`` work, and let the loader plan the epoch's claims from
      them, so workers never wait on one another's streams (``scheduled.claims``). A length is a promise: a stream
      that runs past it is cut there, and one that ends before it (or fails under ``on_error="skip"``) leaves
      its row padding until then. A broken promise is reported as a length mismatch.
    - ``item_name(item)``: a short name shown in previews and error messages.
    - ``setup_worker()``: called once in each worker process before any ``open`` (e.g. thread limits).
    - ``can_open(arg)``: lets the CLI infer this plugin from a bare path.
    - ``default_segment()``: the loader's ``segment=`` when the user gives none (0: whole items).
    - ``block_steps = True`` (a class attribute): ``open(item, start)`` yields *blocks* instead of steps, each a
      mapping from field name to an array of shape ``(n, *field.shape)``, with the same ``n >= 1`` for every
      field of a block. Sources that read several steps at once (a text chunk, an audio buffer, a shard, a
      burst of frames) skip a Python round trip per step. The first block still starts at step ``start``; a
      block may cross a batch boundary (the loader splits it), and each is checked once
      (``StepSpecError``).
    - ``costly_steps = True`` (a class attribute): a step costs far more than its copy (decoding video, say), and
      streams cost unevenly. With workers, a row's next stream then goes to whichever worker is free, and a row
      moves to an idle worker when the others hold up the batch (a reopen at its position), as when lengths are
      unknown; by default each worker keeps a block of rows, which costs less per row when rows cost alike, until
      the loader measures costly, uneven steps (then it balances from the batch it is at). The attribute saves
      that measure and the batches read before it; the loader's ``balance=`` overrides both. Batches do not
      depend on it.
    - ``window(item)``: random access. Return a mapping from field name to an array-like of all the item's
      steps, shape ``(length, *field.shape)`` (an ``np.memmap``, an ``ndarray``, or any object with ``len()``
      and slicing ``a[pos:pos + n]``), of the field's dtype or of integers that cast to it safely (uint16 token
      ids for an int64 field: the copy into the batch casts them). With known lengths the loader then reads any
      ``(position, n)`` window directly: any worker fills any batch, and resume and segments open nothing.
      ``open`` is still required (``export``, ``iter_steps``, and sources of unknown length use it). Not defined on
      ``BaseSource``: define it only when every item supports it, or set ``self.window = None`` on an instance
      whose items do not (e.g. objects read by byte ranges).
    - ``prepare(progress)``: slow one-time work before ``items()`` (e.g. a length scan), reporting
      ``progress(done, total)`` so the CLI can show it.
    - ``stream_order(items, steps, seed, epoch, shuffle)``: the source orders each epoch's streams itself, in
      place of the loader's seeded permutation (``stream_order_of``); ``source_table()``: each item's index
      among mixed sources, which makes ``batch.source`` (``source_lookup``). ``streamcli.mix`` defines both.
    """

    def items(self) -> Sequence[Any]:
        raise NotImplementedError

    def fields(self) -> Sequence[Field]:
        raise NotImplementedError

    def open(self, item: Any, start: int = 0) -> Iterator[Step]:
        raise NotImplementedError

    def length(self, item: Any) -> int | None:
        return None

    def item_name(self, item: Any) -> str:
        return str(item)

    def setup_worker(self) -> None:
        return None

    @classmethod
    def can_open(cls, arg: str) -> bool:
        return False

    block_steps = False
    costly_steps = False

    def default_segment(self) -> int:
        return 0

    def prepare(self, progress: Callable[[int, int], None] | None = None) -> None:
        return None


# ----------------------------------------------------------------------------------------------------------
# Optional hooks, declared once with their defaults. Callers use these functions and never probe with
# ``getattr`` themselves (pytest's hookspecs are the model): a new hook is one function here.


def call_item_name(source: StreamSource, item: Any) -> str:
    """Hook ``source.item_name(item)``: a short name for previews and errors; default ``str(item)``."""
    fn = getattr(source, "item_name", None)
    return str(fn(item) if callable(fn) else item)


def call_setup_worker(source: StreamSource) -> None:
    """Hook ``source.setup_worker()``: once per worker process before any ``open``; default: nothing."""
    fn = getattr(source, "setup_worker", None)
    if callable(fn):
        fn()


def can_open(factory: Any, arg: str) -> bool:
    """Hook ``factory.can_open(arg)`` (a class method): may this plugin open a bare path? Default: no."""
    fn = getattr(factory, "can_open", None)
    return bool(fn(arg)) if callable(fn) else False


def call_default_segment(source: StreamSource) -> int:
    """Hook ``source.default_segment()``: the loader's ``segment=`` when the user gives none; default 0."""
    fn = getattr(source, "default_segment", None)
    return int(fn()) if callable(fn) else 0


def uses_blocks(source: StreamSource) -> bool:
    """Hook ``source.block_steps``: does ``open`` yield blocks of steps? Default: no (one step at a time)."""
    return bool(getattr(source, "block_steps", False))


def has_costly_steps(source: StreamSource) -> bool:
    """Hook ``source.costly_steps``: do steps cost far more than their copy, and unevenly? Default: no."""
    return bool(getattr(source, "costly_steps", False))


def iter_steps(source: StreamSource, item: Any, start: int = 0) -> Iterator[Step]:
    """One item's steps from ``start`` on, one at a time, whether the source yields steps or blocks."""
    if not uses_blocks(source):
        yield from source.open(item, start)
        return
    for block in source.open(item, start):
        arrays = {k: np.asarray(v) for k, v in block.items()}
        n = len(next(iter(arrays.values())))
        for j in range(n):
            yield {k: a[j] for k, a in arrays.items()}


def has_window(source: StreamSource) -> bool:
    """Hook ``source.window``: is the source random-access (``window(item)``)? Default: no."""
    return callable(getattr(source, "window", None))


def call_window(source: StreamSource, item: Any) -> Mapping[str, Any] | None:
    """Hook ``source.window(item)``: the item's steps as array-likes, one per field (see ``BaseSource``)."""
    fn = getattr(source, "window", None)
    return fn(item) if callable(fn) else None


StreamOrder = Callable[["npt.NDArray[np.int64]", "npt.NDArray[np.int64] | None", int, int, bool], "npt.ArrayLike"]
"""``stream_order(items, steps, seed, epoch, shuffle)``: see ``stream_order_of``."""


def stream_order_of(source: StreamSource) -> StreamOrder | None:
    """Hook ``source.stream_order``: the source orders each epoch's streams itself; default None (the loader's
    seeded permutation, ``scheduled.streams.shuffled``).

    Called as ``stream_order(items, steps, seed, epoch, shuffle)`` with every stream of the run before any
    shuffle: ``items[j]`` is stream j's index into ``items()``, ``steps[j]`` its promised steps (None when some
    length is unknown). It returns the epoch's ticket order as indices into those streams; it may leave streams
    out (they are not in that epoch). It must be a pure function of its arguments, as resume and ranks
    recompute it (``streamcli.mix`` interleaves its sources' streams by weight this way)."""
    fn = getattr(source, "stream_order", None)
    return fn if callable(fn) else None


def source_lookup(source: StreamSource) -> np.ndarray | None:
    """Hook ``source.source_table()``: for each item, the index of the mixed source it comes from
    (``streamcli.mix``); default None (no ``batch.source``). Returned with ``-1`` appended, so that
    ``lookup.take(batch_stream)`` maps padding (stream -1) to -1 in one ``take``."""
    fn = getattr(source, "source_table", None)
    if not callable(fn):
        return None
    return np.append(np.asarray(fn(), np.int64), np.int64(-1))


def close_stream(it: object) -> None:
    """Close an iterator ``open()`` returned, if it can be closed (a generator releases its files at once);
    what its close raises is ignored: the stream is over either way."""
    fn = getattr(it, "close", None)
    if callable(fn):
        try:
            fn()
        except Exception:
            pass


def call_prepare(source: StreamSource, progress: Callable[[int, int], None] | None = None) -> None:
    """Hook ``source.prepare(progress)``: slow one-time work before ``items()``; default: nothing."""
    fn = getattr(source, "prepare", None)
    if callable(fn):
        fn(progress)


PLUGIN_ATTR = "_streamcli_plugin"
"""Set by ``load_source`` on the sources it builds: the plugin name that error messages should use."""


def plugin_name(source: object) -> str:
    """The plugin name ``load_source`` recorded on ``source``, else its class name."""
    return str(getattr(source, PLUGIN_ATTR, type(source).__name__))


item_name = call_item_name  # the name the loader already uses


def check_source(source: object) -> StreamSource:
    """Return ``source`` if it follows the contract, else raise ``TypeError`` naming what is missing."""
    missing = [m for m in ("items", "fields", "open", "length") if not callable(getattr(source, m, None))]
    if missing:
        raise TypeError(
            f"{type(source).__name__} is not a stream source: it lacks {', '.join(missing)}; "
            "subclass streamcli.BaseSource or implement the StreamSource protocol"
        )
    return source  # type: ignore[return-value]
