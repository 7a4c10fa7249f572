"""One conformance check of exact resume, used for every source: cut, save, reload elsewhere, compare.

``check_resume`` runs an uninterrupted reference (the rest of one epoch and all of the next), then for each cut
point runs a loader with ``workers_before`` up to that batch, round-trips ``state_dict()`` through JSON, and
continues on a fresh loader with ``workers_after``. The batches after the cut, in both epochs, must equal the
reference's field for field and flag for flag.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from _invariants import to_numpy

from streamcli import StreamLoader, StreamSource

Batches = list[dict[str, np.ndarray]]


def run_epochs(loader: StreamLoader, epochs: int, stop_after: int | None = None) -> Batches:
    """``epochs`` epochs (fewer if ``stop_after`` batches come first) as numpy copies, in (T, B) layout."""
    out: Batches = []
    for _ in range(epochs):
        for batch in loader:
            out.append(to_numpy(batch))
            del batch
            if stop_after is not None and len(out) >= stop_after:
                return out
    return out


def assert_same(want: Batches, got: Batches, where: str) -> None:
    assert len(got) == len(want), f"{where}: {len(got)} batches, the uninterrupted run has {len(want)}"
    for i, (a, b) in enumerate(zip(want, got, strict=True)):
        assert a.keys() == b.keys(), where
        for key in a:
            assert a[key].dtype == b[key].dtype, f"{where}: batch {i} {key} dtype"
            assert np.array_equal(a[key], b[key]), f"{where}: batch {i} differs in {key!r}"


def check_resume(
    make_source: Callable[[], StreamSource],
    batch_size: int,
    time_steps: int,
    *,
    cuts: Sequence[int],
    workers_before: int = 0,
    workers_after: int = 0,
    **loader_kw: Any,
) -> Batches:
    """Assert exact resume at every cut (a count of batches into the run); returns the reference."""
    with StreamLoader(make_source(), batch_size, time_steps, **loader_kw) as ref_loader:
        reference = run_epochs(ref_loader, 2)
    if not reference:
        return reference  # nothing to cut: an all-empty source (the property test generates these)
    for cut in cuts:
        cut = max(1, min(cut, len(reference)))
        with StreamLoader(make_source(), batch_size, time_steps, num_workers=workers_before, **loader_kw) as a:
            head = run_epochs(a, 2, stop_after=cut)
            state = json.loads(json.dumps(a.state_dict()))
        assert_same(reference[:cut], head, f"before the cut at {cut}")
        epochs_left = 2 - state["epoch"]
        with StreamLoader(make_source(), batch_size, time_steps, num_workers=workers_after, **loader_kw) as b:
            b.load_state_dict(state)
            tail = run_epochs(b, epochs_left)
        assert_same(reference[cut:], tail, f"after resuming at batch {cut} ({workers_before}->{workers_after} workers)")
    return reference
