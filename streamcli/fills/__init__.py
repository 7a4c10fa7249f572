"""Who fills a batch: producers, in worker processes or in the main process.

``engine.Engine`` is the one producer the worker loop and the in-process path drive; ``writers`` is the epoch's
writer policy (whole batches round-robin, fixed row blocks, or balanced), chosen once per epoch.

Every policy runs on the schedule: ``planned.Filler`` follows the ``scheduled.schedule``; ``windows`` fills whole
batches from random-access sources, ``iterators`` is the reader of step and block sources (one open stream per
row; streams of unknown length read as the schedule plans them), ``turns`` shares the claims of such streams between
producers, ``balanced`` moves rows to an idle producer (one protocol, whether lengths are known or not),
``flags`` writes the flags and summaries, ``faults`` reports a source that fails or breaks
its promise. ``checks``: each step or block against the declared fields (the plugin contract).
"""
