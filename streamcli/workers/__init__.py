"""How workers run and fail: the pool in the main process, the worker loop in each worker process.

- ``pool``: start, watch (liveness, pipes, timeouts) and stop the workers; a dead one is a ``WorkerError``.
- ``failures``: how a worker's death, stall or slow start reads, and its own error raised again here.
- ``worker``: the worker process's loop, a plain function of its arguments.
- ``watchdog``: a worker dies with its loader, and unlinks an orphaned segment.
- ``start``: how a worker process starts (a fork server by default on Linux, spawn elsewhere).
- ``main_guard``: a script that builds a loader with workers must guard its main block; checked before any start.
- ``producers``: who fills the batches, the same way: the worker processes, or the loader's own process.
"""
