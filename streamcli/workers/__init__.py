"""How workers run and fail: the pool in the main process, the worker loop in each worker process.

- ``pool``: start, watch (liveness, pipes, timeouts) and stop the workers; a dead one is a ``WorkerError``.
- ``failures``: how a worker's death, stall or slow start reads, and its own error raised again here.
- ``worker``: the worker process's loop, a plain function of its arguments.
- ``watchdog``: a worker dies with its loader, and unlinks an orphaned segment.
- ``guards``: checks on what the user gives (fields, a script's main guard).
"""
