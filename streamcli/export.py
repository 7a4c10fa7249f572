"""Kept for old imports: the shard format now lives in ``streamcli.shards``."""

from streamcli.shards.format import FORMAT, FORMAT_VERSION, MANIFEST, PARTIAL, ShardInfo, batch_nbytes, make_header
from streamcli.shards.writer import ShardWriter, export, iter_limit

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "MANIFEST",
    "PARTIAL",
    "ShardInfo",
    "ShardWriter",
    "batch_nbytes",
    "export",
    "iter_limit",
    "make_header",
]
