"""The shard format: an export folder of ``.npz`` shards and an ``index.json`` manifest.

- ``format``: names, member names and dtypes, the header and manifest, the partial record, ``tidy``.
- ``npz``: shard files on disk: atomic aligned writing, memory-mapped or decompress-once reading.
- ``codec``: how members are compressed (none, deflate, zstd) and the zstd frames' safe reading.
- ``writer``: ``ShardWriter`` and ``export`` (resumable, byte-identical).
- ``reader``: ``ShardReader`` (bit-identical replay) and ``verify``.
- ``lock``: ``FolderLock``, the OS lock an export holds on its folder (one export per folder at a time).

Wherever a folder is taken, a URL (``s3://bucket/run``) is too: ``streamcli.storage`` serves it through fsspec.
"""

from streamcli.shards.format import (
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    PARTIAL,
    SHARD_RE,
    ShardInfo,
    batch_nbytes,
    expected_shapes,
    load_manifest,
    make_header,
    member_names,
    shard_name,
    shard_path,
    tidy,
)
from streamcli.shards.npz import open_shard
from streamcli.shards.reader import ShardReader, verify
from streamcli.shards.writer import ShardWriter, export, iter_limit

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "MANIFEST",
    "PARTIAL",
    "SHARD_RE",
    "ShardInfo",
    "ShardReader",
    "ShardWriter",
    "batch_nbytes",
    "expected_shapes",
    "export",
    "iter_limit",
    "load_manifest",
    "make_header",
    "member_names",
    "open_shard",
    "shard_name",
    "shard_path",
    "tidy",
    "verify",
]
assert sorted(__all__) == __all__
