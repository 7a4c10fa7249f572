"""Object storage: URLs wherever a path is given, through fsspec (``pip install 'streamcli[s3]'``).

- ``urls``: local path or URL (no fsspec import); ``file://`` is local; an unservable URL is an error.
- ``remote``: ``Remote``, the objects under one URL, with retries and backoff on transient errors.
- ``cache``: ``Cache``, remote objects as local files (size limit, least recently used evicted first).
- ``lock``: ``RemoteLock``, one export at a time per URL (a create-exclusive lock object with a heartbeat).
- ``shards``: reading and verifying an export at a URL (byte ranges, never whole shards unless checked).
- ``writer``: ``RemoteShardWriter``, the shard writer for a URL (shards, their records, then ``index.json``).
"""
