"""Heavy streams first: with several producers, a stream known to cost far more per step than the rest starts as
early as the window allows.

A row is a chain: its streams follow each other, and a stream's steps are read in order by one producer at a
time. Near an epoch's end the last heavy stream then runs alone while every other row is dry: one clip can decode
30 times slower than another, and the epoch ends when it does. The earlier it starts, the sooner that is: longest
work first, the classic rule for the shortest schedule, which an ideal scheduler with the loader's window follows
(``benchmarks/workloads.windowed_figure``, its "chain" order).

With planned claims (``engine.claims``: every length known) a producer knows, for each row, which stream it
claims next, and a waiting row may claim whatever the other rows are doing. So a producer

- takes the heaviest waiting claim first (``costliest_claim``), even ahead of its own rows;
- runs a row of its own ahead of the others when the stream it claims next is heavy (``lead_row``), so that the
  row reaches that claim early.

"Heavy" means at least ``HEAVIER`` times the steady cost per step of every row the producer holds. Costs are what
the producers measured (``Control.note_cost``: the least seconds per step of a stream's pieces between its first,
which pays the open or seek, and its last, whose first step was read ahead; noted from the fourth such piece on,
or at the end of a shorter stream, and the least over every stream of the item), so the rules act once an item
has been read, in an earlier segment or epoch. The loader looks at the costs every few batches and sets one flag
in the control block once some item costs ``HEAVIER`` times the median item at three looks in a row
(``Control.uneven``); only then do producers weigh costs, and the hand-out window deepens. A busy host only
slows a measurement: taking the least, and looking three times, keeps it from making streams of even cost look
uneven. Where streams cost about the same per step, as in most text, audio and shard sources, the claims go in
key order and nothing here runs. Who writes a row, and when, never changes its content.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from streamcli.engine.producer import Producer, Row

HEAVIER = 4.0  # times the costliest held row's seconds per step that make a stream heavy
UNKNOWN = -2  # ``Row.next_item`` not looked up yet (done when first needed, so even costs never pay for it)


def bar(p: Producer) -> float:
    """Seconds per step from which a stream counts as heavy for producer ``p`` (infinite with nothing measured)."""
    rates = [r.rate for r in p.rows.values() if r.rate]
    return HEAVIER * max(rates) if rates else math.inf


def next_item(p: Producer, row: Row) -> int:
    """The item of the stream ``row`` claims next (at ``row.claim_q``), or -1 if it goes dry or is unknown."""
    plan = p.claims
    if plan is None or not plan.pending() or row.claim_q < 0:
        return -1
    key = row.claim_q * p.B + row.b
    try:
        got = plan.peek(row.b, key, p.ring.control.written_min() * p.T * p.B)
    except RuntimeError:  # no such claim planned (the row goes dry before it)
        return -1
    if got.dry:
        return -1
    return p.ring.control.stream(got.first + got.count - 1)[0]


def costliest_claim(p: Producer, b: int, key: int, top: int) -> tuple[int, int, bool]:
    """The claim to make among the rows waiting for one in batches handed out (below ``top``): the heaviest
    stream's, with True, if any is heavy; else the earliest, row ``b`` at ``key``, with False."""
    control, plan = p.ring.control, p.claims
    assert plan is not None
    limit = bar(p)
    if limit == math.inf:
        return b, key, False
    best: tuple[float, int, int] | None = None
    done_below = control.written_min() * p.T * p.B
    for key_, b_ in control.waiting_below(top * p.T * p.B):
        try:
            got = plan.peek(b_, key_, done_below)
        except RuntimeError:  # stale: another producer made that claim and the row moved on
            continue
        if got.dry:
            continue
        ticket = got.first + got.count - 1
        per_step = control.item_cost(control.stream(ticket)[0])
        work = per_step * plan.steps_of(ticket)
        if per_step >= limit and (best is None or work > best[0]):
            best = (work, b_, key_)
    if best is None:
        return b, key, False
    return best[1], best[2], True


def lead_row(p: Producer, k_run: int, top: int) -> Row | None:
    """A row of ``p`` whose next stream is heavy, in a batch handed out: run it alone and before the others (the
    one furthest behind, if several), so that it runs ahead of them to that claim. None if there is none."""
    limit = bar(p)
    if limit == math.inf:
        return None
    control, T = p.ring.control, p.T
    lead: Row | None = None
    for row in p.rows.values():
        k = row.q // T
        if not k_run <= k < top:
            continue
        if row.next_item == UNKNOWN:
            row.next_item = next_item(p, row)
        heavy = row.next_item >= 0 and control.item_cost(row.next_item) >= limit
        if heavy and (lead is None or row.q < lead.q):
            lead = row
    return lead
