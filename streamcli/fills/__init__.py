"""Who fills a batch: producers, in worker processes or in the main process.

The planned path (every length known): ``planned.Filler`` follows the ``scheduled.schedule``; ``windows``
fills whole batches from random-access sources, ``iterators`` fills rows from step and block sources,
``flags`` writes the flags and summaries, ``faults`` reports a source that fails or breaks its promise.
``checks``: each step or block against the declared fields (the plugin contract).

``claimed``: streams of unknown length, claimed at run time in canonical key order.
"""
