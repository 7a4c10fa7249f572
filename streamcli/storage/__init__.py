"""Object storage: URLs wherever a path is given, through fsspec (``pip install 'streamcli[s3]'``).

- ``urls``: local path or URL (no fsspec import); ``file://`` is local; an unservable URL is an error.
- ``remote``: ``Remote``, the objects under one URL, with retries and backoff on transient errors.
- ``cache``: ``Cache``, remote objects as local files (size limit, least recently used evicted first).
- ``lock``: ``RemoteLock``, one export at a time per URL (a create-exclusive lock object with a heartbeat).
- ``shards``: reading and verifying an export at a URL (byte ranges, never whole shards unless checked).
- ``writer``: ``RemoteShardWriter``, the shard writer for a URL (shards, their records, then ``index.json``).

Limits, by design: a resumed export trusts the sizes and checksums its partial record gives for the shards
already uploaded (it downloads none of them; ``verify`` checks them all); the lock's takeover of a stale lock is
not atomic (``lock``); a cache hit checked in the last ``fresh_s`` seconds does not see an object replaced since;
and a URL is recorded in the manifest as given, so credentials belong in the environment, never in the URL.
"""
