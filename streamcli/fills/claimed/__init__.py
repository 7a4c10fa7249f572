"""The balanced policy's producers: rows move to an idle producer, and claim their next stream at run time, in
canonical key order (every other policy runs on the schedule, ``fills.planned``; ``benchmarks/ENGINE.md``).

- ``rows``: a producer's facts (the fill spec every producer shares, the rows it owns and what each is doing).
- ``produce``: what a producer does next: claims, runs, and rows that move to an idle producer.
- ``write``: a row's claim and its runs of checked steps; ``notes``: how a piece of work lands in the slot.
"""
