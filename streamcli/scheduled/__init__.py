"""Where a batch is scheduled: which stream goes in which row, from which step. Pure functions of the source's
lengths and the loader's settings (a length not known is found through the filler's ``Probe``); nothing here
touches shared memory.

- ``streams``: an epoch's streams in ticket order (segments, the seeded shuffle, a rank's share where ranks deal
  them); ``epochs``: each epoch's streams and batches, on one global batch shared by the ranks.
- ``claims``: the order of the claims, from lengths known or found (``ClaimOrder``), and how many batches an
  epoch holds; a length not known is an open bound that the schedule raises by reading (``Probe``).
- ``schedule``: every row's state as arrays, advanced a batch at a time into a ``BatchRuns`` (``plans``).
- ``cursor``: the record of where a row stands between two batches; ``state``: the resumable, fingerprinted
  ``state_dict``; ``seek``: the state at any batch, from lengths alone.
- ``resume``: a loader's state in and out (its fingerprint, and a loaded state kept for the next epoch);
  ``replan``: the rest of an epoch re-planned for another global batch; ``world``: every global row's cursor at
  any batch, for a rank that writes only its own rows.
"""
