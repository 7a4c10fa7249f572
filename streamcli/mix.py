"""``mix``: several sources as one, each epoch's streams drawn from them by weight.

The mixed source's items are ``(source index, item)`` pairs, and its ``stream_order`` hook orders each epoch's
streams (``scheduled.streams``; the order itself is ``mix_order``): each source's streams are shuffled by its own
seeded permutation (from the seed, the epoch and the source), then interleaved by *step deficit*: the next stream
comes from the source whose steps so far are furthest below its weight times the steps so far of all. A row that
needs a new stream therefore takes one from a source chosen by weight, and over any stretch of the epoch each
source's share of real steps stays within about one stream's length of its weight. The order is a pure function
of the seed, the epoch and the lengths, so resume, any worker count, ranks (split after the ordering) and
``segment=`` (the segments of an item are streams of the item's source) all work unchanged.

Epoch semantics (``until``):

- ``"first"`` (default): the epoch ends when the first source runs out of streams; the other sources' remaining
  streams are not in this epoch (the next epoch reshuffles, so others are left out then).
- ``"restream"``: smaller sources are restreamed (another pass, reshuffled) until every source has been
  covered once. Each pass is listed in ``items()`` (a source needing three passes lists its items three
  times), so ``batch.stream`` tells the passes apart and ``batch.source`` still names the source.

Shares are measured in steps when every length is known, else in streams.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from streamcli.errors import MixError
from streamcli.mix_order import deficit_order, restream_passes, source_size, stream_steps
from streamcli.source import (
    PLUGIN_ATTR,
    BaseSource,
    Field,
    Step,
    StreamSource,
    call_default_segment,
    call_item_name,
    call_prepare,
    call_setup_worker,
    call_window,
    check_source,
    has_costly_steps,
    has_window,
    uses_blocks,
)

UNTIL = ("first", "restream")


def mix(
    sources: Mapping[str, StreamSource], weights: Mapping[str, float] | None = None, *, until: str = "first"
) -> Mix:
    """A source whose epochs draw streams from ``sources`` by ``weights`` (equal by default); see ``Mix``.

    >>> mixed = mix({"books": books, "code": code}, weights={"books": 0.7, "code": 0.3})
    """
    return Mix(sources, weights, until=until)


class Mix(BaseSource):
    """Several sources with the same fields, mixed by weight (``streamcli.mix``).

    Args:
        sources: name -> source; the names are ``names``, in this order, and ``batch.source`` indexes them.
        weights: name -> a positive number (normalised to sum to 1); None: equal weights.
        until: "first" (the epoch ends when the first source runs out) or "restream" (smaller sources are
            restreamed until every source has been covered once).

    Raises ``ValueError`` naming the field and how it differs when the sources' fields do not match, and naming
    the weight or the option that is wrong.
    """

    def __init__(
        self, sources: Mapping[str, StreamSource], weights: Mapping[str, float] | None = None, *, until: str = "first"
    ) -> None:
        if not sources:
            raise ValueError("mix needs at least one source, e.g. mix({'books': books, 'code': code})")
        if until not in UNTIL:
            raise ValueError(f"until={until!r} must be 'first' or 'restream'")
        self.names: tuple[str, ...] = tuple(str(n) for n in sources)
        self.sources: tuple[StreamSource, ...] = tuple(check_source(s) for s in sources.values())
        self.weights: tuple[float, ...] = _weights(self.names, weights)
        self.until = until
        self._fields = _common_fields(self.names, [tuple(s.fields()) for s in self.sources])
        self.block_steps = any(uses_blocks(s) for s in self.sources)  # steps of the others become 1-step blocks
        self.costly_steps = any(has_costly_steps(s) for s in self.sources)
        if not all(has_window(s) for s in self.sources):
            self.window = None  # type: ignore[method-assign,assignment]  # random access only if every source has it
        segments = {call_default_segment(s) for s in self.sources}
        self._segment = segments.pop() if len(segments) == 1 else 0
        shown = ",".join(f"{n}={w:g}" for n, w in zip(self.names, self.weights, strict=True))
        # The plugin name is in a saved state's fingerprint: a state of another weighting is refused.
        setattr(self, PLUGIN_ATTR, f"mix({shown}{',until=restream' if until == 'restream' else ''})")
        self._items: list[tuple[int, Any]] | None = None
        self._source_of = np.zeros(0, np.int64)  # per item: the source index
        self._pass_of = np.zeros(0, np.int64)  # per item: the pass (0 unless restreamed)
        self._item_steps: list[int | None] = []
        self._cache: dict[tuple[Any, ...], np.ndarray] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_cache"] = {}  # workers never order streams
        return state

    # ----------------------------------------------------------------------------------------- contract
    def items(self) -> list[tuple[int, Any]]:
        if self._items is None:
            self._list_items()
        assert self._items is not None
        return self._items

    def fields(self) -> Sequence[Field]:
        return self._fields

    def open(self, item: tuple[int, Any], start: int = 0) -> Iterator[Step]:
        i, sub = item
        source = self.sources[i]
        if not self.block_steps or uses_blocks(source):
            yield from source.open(sub, start)
            return
        for step in source.open(sub, start):  # a step source among block sources: blocks of one step
            yield {k: np.asarray(v)[None] for k, v in step.items()}

    def length(self, item: tuple[int, Any]) -> int | None:
        i, sub = item
        n = self.sources[i].length(sub)
        return None if n is None else int(n)

    def item_name(self, item: tuple[int, Any]) -> str:
        i, sub = item
        return f"{self.names[i]}:{call_item_name(self.sources[i], sub)}"

    def window(self, item: tuple[int, Any]) -> Mapping[str, Any] | None:
        i, sub = item
        return call_window(self.sources[i], sub)

    def setup_worker(self) -> None:
        for s in self.sources:
            call_setup_worker(s)

    def default_segment(self) -> int:
        """The sources' common ``default_segment()``, or 0 when they differ."""
        return self._segment

    def prepare(self, progress: Callable[[int, int], None] | None = None) -> None:
        for s in self.sources:
            call_prepare(s, progress)

    # -------------------------------------------------------------------------------------------- hooks
    def source_table(self) -> np.ndarray:
        """For each item, the index into ``names`` of its source (``batch.source`` is looked up here)."""
        self.items()
        return self._source_of

    def stream_order(
        self, items: npt.NDArray[np.int64], steps: npt.NDArray[np.int64] | None, seed: int, epoch: int, shuffle: bool
    ) -> np.ndarray:
        """The epoch's ticket order (the ``stream_order`` hook, ``source.stream_order_of``): each source's streams
        by its own seeded permutation per pass, interleaved by step deficit, cut as ``until`` says."""
        key = (hash(items.tobytes()), None if steps is None else hash(steps.tobytes()), seed, epoch, shuffle)
        got = self._cache.get(key)
        if got is None:
            got = self._order(np.asarray(items, np.int64), steps, seed, epoch, shuffle)
            if len(self._cache) >= 8:
                self._cache.clear()
            self._cache[key] = got
        return got

    # -------------------------------------------------------------------------------------------- inside
    def _list_items(self) -> None:
        per = [list(s.items()) for s in self.sources]
        for name, its in zip(self.names, per, strict=True):
            if not its:
                raise MixError(f"mix: source {name!r} has no items; every mixed source needs at least one stream")
        lengths = [[self._sub_length(i, it) for it in its] for i, its in enumerate(per)]
        _check_steps(self.names, lengths, self.until)
        passes = [1] * len(per)
        if self.until == "restream":
            passes = restream_passes([source_size(ls) for ls in lengths], self.weights)
        items: list[tuple[int, Any]] = []
        source_of: list[int] = []
        pass_of: list[int] = []
        steps: list[int | None] = []
        for i, its in enumerate(per):
            for p in range(passes[i]):
                items += [(i, it) for it in its]
                source_of += [i] * len(its)
                pass_of += [p] * len(its)
                steps += lengths[i]
        self._items = items
        self._source_of = np.asarray(source_of, np.int64)
        self._pass_of = np.asarray(pass_of, np.int64)
        self._item_steps = steps

    def _sub_length(self, i: int, item: Any) -> int | None:
        try:
            n = self.sources[i].length(item)
        except Exception:  # the loader measures again, and reports it as the source's error
            return None
        return None if n is None else int(n)

    def _order(self, items: np.ndarray, steps: np.ndarray | None, seed: int, epoch: int, shuffle: bool) -> np.ndarray:
        self.items()
        n_steps = stream_steps(items, steps, self._item_steps)
        return deficit_order(
            items,
            self._source_of,
            self._pass_of,
            n_steps,
            self.weights,
            restream=self.until == "restream",
            seed=seed,
            epoch=epoch,
            shuffle=shuffle,
        )


def _check_steps(names: Sequence[str], lengths: Sequence[Sequence[int | None]], until: str) -> None:
    """Refuse a mix whose epoch could hold no step, or end before any, naming the empty sources: every stream of a
    source known to be empty (all its lengths reported, all 0)."""
    empty = [n for n, ls in zip(names, lengths, strict=True) if all(x == 0 for x in ls)]
    if len(empty) == len(names):
        raise MixError(
            f"mix: every stream of every source is empty ({', '.join(empty)}: 0 steps), so an epoch would hold "
            "nothing but padding; point the sources at data"
        )
    if empty and until == "first":
        n = len(lengths[names.index(empty[0])])
        streams = "its one stream is" if n == 1 else f"its {n} streams are"
        raise MixError(
            f"mix: source {empty[0]!r} has no steps ({streams} empty), so an until='first' epoch ends once it "
            "runs out, after next to nothing of the others; give it data, leave it out of the mix, or use "
            "until='restream'"
        )


def _weights(names: Sequence[str], weights: Mapping[str, float] | None) -> tuple[float, ...]:
    if weights is None:
        return tuple(1.0 / len(names) for _ in names)
    unknown = [n for n in weights if n not in names]
    if unknown:
        raise ValueError(f"mix: weights name {unknown[0]!r}, which is not a source; the sources are {', '.join(names)}")
    missing = [n for n in names if n not in weights]
    if missing:
        raise ValueError(f"mix: source {missing[0]!r} has no weight; give every source one, e.g. {missing[0]!r}: 0.5")
    out = []
    for n in names:
        try:
            value = float(weights[n])
        except (TypeError, ValueError):
            raise ValueError(f"mix: the weight of {n!r} must be a positive number, got {weights[n]!r}") from None
        if not math.isfinite(value) or value <= 0:
            raise ValueError(f"mix: the weight of {n!r} must be a positive number, got {weights[n]!r}")
        out.append(value)
    total = sum(out)
    return tuple(v / total for v in out)


def _common_fields(names: Sequence[str], fields: Sequence[tuple[Field, ...]]) -> tuple[Field, ...]:
    """The first source's fields, if every source declares the same names, shapes and dtypes (the display hint
    and the order may differ); else ``ValueError`` naming the field and how it differs."""
    first = {f.name: f for f in fields[0]}
    for name, theirs in zip(names[1:], fields[1:], strict=True):
        other = {f.name: f for f in theirs}
        for f in fields[0]:
            g = other.get(f.name)
            if g is None:
                raise ValueError(f"mix: field {f.name!r} of source {names[0]!r} is missing from source {name!r}")
            if g.shape != f.shape:
                raise ValueError(
                    f"mix: field {f.name!r} has shape {list(f.shape)} in source {names[0]!r} but {list(g.shape)} in "
                    f"source {name!r}; mixed sources need the same fields (e.g. the same size= or width=)"
                )
            if g.np_dtype != f.np_dtype:
                raise ValueError(
                    f"mix: field {f.name!r} is {f.np_dtype.name} in source {names[0]!r} but {g.np_dtype.name} in "
                    f"source {name!r}; mixed sources need the same fields"
                )
        extra = [n for n in other if n not in first]
        if extra:
            raise ValueError(f"mix: field {extra[0]!r} of source {name!r} is missing from source {names[0]!r}")
    return tuple(fields[0])


def names_of(source: object) -> tuple[str, ...] | None:
    """The mixed sources' names, if ``source`` is a mix (what ``batch.source`` indexes)."""
    return source.names if isinstance(source, Mix) else None
