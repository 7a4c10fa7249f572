"""The engine: where a batch is born and carried. Internal; the public API is ``streamcli``'s ``__all__``.

- ``epoch``: an epoch's streams in ticket order (segments, the seeded shuffle, this rank's share).
- ``plan``: how many batches an epoch holds, from the streams' lengths alone.
- ``cursor``: the record of where a batch row stands between two batches; ``state``: those records and the
  tickets as a resumable, fingerprinted ``state_dict``; ``seek``: the state at any batch, from lengths alone.
- ``ring``: the shared-memory segment of batch slots and its control block (one owner, the loader);
  ``control``: the control block's layout and methods, the shared state of the loader and the producers.
- ``producer``: a producer's facts: the plan every producer shares, the rows it owns and what each is doing.
- ``produce``: what a producer does next: claims in canonical order, rows that move, balanced work (born).
  ``claims``: the claims planned from known lengths;
- ``write``: a row's claim of its next stream and its runs of checked steps into a slot; ``slots``: how a
  piece of work lands in the slot (data at once; flags, cursors and completion at its end); ``checks``: each step
  or block against the declared fields (the plugin contract).
- ``worker`` and ``pool``: the two sides of the worker processes (carried); ``ahead``: the thread that prepares
  the next batches while the consumer works.
- ``leases``: which slot holds which batch; a slot lent to the consumer returns only when its last view dies.
- ``guards``: checks on what the user gives (fields, a script's main guard); ``torchio``: the signal-safe torch
  import, pinned memory and slot chores of the loader.
"""
