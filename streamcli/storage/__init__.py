"""Object storage: URLs wherever a path is given, through fsspec (``pip install 'streamcli[s3]'``).

- ``urls``: local path or URL (no fsspec import); ``file://`` is local; an unservable URL is an error.
- ``retries``: which errors are transient, and ``retry``: backoff within a number of tries and a deadline.
- ``remote``: ``Remote``, the objects under one URL, every request through ``retry``.
- ``cache``: ``Cache``, remote objects as local files (size limit, least recently used evicted first).

This package knows nothing of shards: an export at a URL is ``streamcli.shards``' ``remote_*`` modules, over it.
Limits, by design: a cache hit checked in the last ``fresh_s`` seconds does not see an object replaced since,
and a URL is recorded in the manifest as given, so credentials belong in the environment, never in the URL.
"""
