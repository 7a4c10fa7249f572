"""The engine: where a batch is born and carried. Internal; the public API is ``streamcli``'s ``__all__``.

- ``epoch``: an epoch's streams in ticket order (segments, the seeded shuffle, this rank's share).
- ``plan``: how many batches an epoch holds, from the streams' lengths alone.
- ``cursor``: the record of where a batch row stands between two batches; ``state``: those records and the
  tickets as a resumable, fingerprinted ``state_dict``; ``seek``: the state at any batch, from lengths alone.
- ``ring``: the shared-memory segment of batch slots and its control block (one owner, the loader).
- ``produce``: producers step their rows' streams into a slot, in canonical order (born).
- ``worker`` and ``pool``: the two sides of the worker processes (carried).
- ``guards``: checks on what the user gives (fields, a script's main guard); ``torchio``: the signal-safe torch
  import, pinned memory and slot chores of the loader.
"""
