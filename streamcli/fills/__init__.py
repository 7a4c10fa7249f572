"""Who fills a batch (``planned.Filler``, in a worker or in the main process), following the schedule: the epoch's
writer policy (``writers``, ``balanced``), the flags (``flags``), and the reader of each source's data (``iterators``
for streams, ``windows`` for random-access sources). ``docs/life-of-a-batch.md`` walks the path."""
