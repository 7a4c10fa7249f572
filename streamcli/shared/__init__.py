"""The shared memory that carries a batch: one segment of batch slots and a control block, owned by the loader.

- ``ring``: the batch slots and the control block laid out in the segment, as numpy views.
- ``ring_layout``: where each array sits in the segment (``RingSpec``), computed alike in every process.
- ``sizing``: how large a ring may be on this machine, checked before it is made, and its default depth.
- ``segment``: the shared-memory segment and its liveness (one owner; sweeps of stale segments).
- ``control``: the control block, the shared state of the loader and the producers, behind methods.
- ``slots``: which slot holds which batch; a slot lent to the consumer returns when its last view dies.
- ``tensors``: the signal-safe torch import, pinned memory and the slot chores around a batch.
"""
