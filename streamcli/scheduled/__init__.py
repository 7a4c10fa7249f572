"""Where a batch is scheduled: which stream goes in which row, from which step, as pure functions of the lengths and
the settings (nothing here touches shared memory). ``streams``: an epoch's streams in ticket order; ``claims``: which
tickets each row takes; ``schedule`` (with ``plans``, ``crossings``): the plan of each batch; ``handed``: a
producer's own rows, each at its batch; ``cursor``: a row's record between batches; ``state`` and ``resume``: the
resumable state, in and out.
"""
