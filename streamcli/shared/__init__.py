"""The shared memory that carries a batch: one segment of batch slots and a control block, owned by the loader
(``ring``, ``control``, ``slots``; ``segment`` and ``sizing`` under them)."""
