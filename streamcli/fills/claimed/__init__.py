"""Producers for streams of unknown length: a row claims its next stream at run time, in canonical key order.

- ``rows``: a producer's facts (the fill spec every producer shares, the rows it owns and what each is doing).
- ``produce``: what a producer does next: claims, runs, and rows that move to an idle producer.
- ``write``: a row's claim and its runs of checked steps; ``notes``: how a piece of work lands in the slot.
"""
