"""How a loader's parts are built and joined: declared fields and items, their lengths and epochs, the ring that
carries the batches, the producers that fill it, the hand-out to the consumer and the epochs' run.

``StreamLoader`` (``loader``) is the façade that holds them; this module is the one place that knows the order in
which they are made, and what is torn down if one of them fails.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from streamcli.config import LoaderConfig
from streamcli.declared import Declared
from streamcli.fills.spec import FillSpec, Skip
from streamcli.handout import READY_DEPTH, HandOut
from streamcli.index import for_loader
from streamcli.iteration import Iteration
from streamcli.lengths import Lengths
from streamcli.scheduled.resume import Resume
from streamcli.scheduled.streams import Epochs
from streamcli.shared.ring import Ring
from streamcli.shared.sizing import loader_ring
from streamcli.shared.tensors import import_torch, split_rows
from streamcli.source import Field, StreamSource, has_window, source_lookup, stream_order_of
from streamcli.stats import Tally
from streamcli.trace import Tracer
from streamcli.workers.pool import shutdown
from streamcli.workers.producers import InProcess, Workers


@dataclass
class Parts:
    """A loader's parts, as ``build`` joined them."""

    plugin: str
    fields: tuple[Field, ...]
    items: Sequence[Any]
    lengths: Lengths
    prefetch: int
    epochs: Epochs
    fill_spec: FillSpec
    ring: Ring
    resume: Resume
    finalizer: weakref.finalize[Any, Any]
    producers: InProcess | Workers
    handout: HandOut
    iteration: Iteration


def build(
    owner: object,
    source: StreamSource,
    config: LoaderConfig,
    transform: Callable[..., Any] | str | None,
    index: str | os.PathLike[str] | None,
    trace: str | os.PathLike[str] | None = None,
) -> Parts:
    """The parts of a loader ``owner`` (whose collection frees the ring and stops the workers)."""
    batch_size, time_steps, num_workers = config.batch_size, config.time_steps, config.num_workers
    # An index (``streamcli index``) holds the items and lengths: then no listing and no length() here.
    found = for_loader(source, index)
    declared = Declared.read(source, transform, None if found is None else found.items)
    indexed = None if found is None else found.length_list()
    lengths = Lengths(source, declared.plugin, declared.items, config.on_error, indexed)
    # Slots: ``prefetch`` being filled, plus the one the consumer holds, one being assembled and those prepared
    # ahead of it. A ring too large for this machine is refused here, before torch's import, the items' lengths and
    # any memory or process.
    extra = 2 + (READY_DEPTH if num_workers else 0)
    prefetch, ring_args = loader_ring(declared.fields, config, config.prefetch, extra, len(declared.items))
    import_torch()  # before any process or segment, so a signal during it finds nothing to clean up
    epochs = Epochs(config, len(declared.items), lengths.all, declared.plugin, stream_order_of(source))
    fill_spec = FillSpec(
        plugin=declared.plugin,
        fields=declared.fields,
        config=config,
        transform=declared.transform,
        source_fields=None if declared.transform is None else declared.source_fields,
        trace=None if trace is None else os.fspath(trace),
        stamps=None if found is None else found.stamps,
    )
    tracer = None if trace is None else Tracer(trace, "consumer")
    if tracer is not None:
        tracer.clear_parts()
    ring = Ring.create({**ring_args, "num_streams": len(epochs.all)})
    finalizer = weakref.finalize(owner, shutdown, None, ring)
    bounds = split_rows(batch_size, max(num_workers, 1))
    resume = Resume(plugin=declared.plugin, fields=declared.fields, items=declared.items, config=config, epochs=epochs)
    tally = Tally(sum(f.nbytes for f in declared.fields) * batch_size * time_steps)
    pending: dict[int, list[Skip]] = {}

    # A closure over data, not a bound method: the finalizer holds the pool, and must not hold the loader.
    def on_skip(skip: Skip) -> None:
        pending.setdefault(skip.batch, []).append(skip)

    producers: InProcess | Workers
    try:
        if num_workers:
            producers = Workers(fill_spec, source, declared.items, ring, bounds, config.mp_context, on_skip)
            finalizer.detach()
            finalizer = weakref.finalize(owner, shutdown, producers.pool, ring)
        else:
            producers = InProcess(fill_spec, source, declared.items, ring, on_skip, tracer)
    except BaseException:
        finalizer()  # nothing outlives the error
        raise
    handout = HandOut(ring, declared.fields, config, producers, prefetch, source_lookup(source))
    handout.pending = pending
    # Whether a measure may turn balance on: iterator streams (a random-access source's batches are shared whole)
    # with workers to share them, and balance left to the loader.
    adaptive = config.balance is None and num_workers >= 2 and not has_window(source)
    iteration = Iteration(config, epochs, ring, handout, producers, bounds, resume, tally, finalizer, adaptive=adaptive)
    handout.tracer = iteration.tracer = tracer
    return Parts(
        declared.plugin,
        declared.fields,
        declared.items,
        lengths,
        prefetch,
        epochs,
        fill_spec,
        ring,
        resume,
        finalizer,
        producers,
        handout,
        iteration,
    )
