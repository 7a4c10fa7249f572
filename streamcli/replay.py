"""Kept for old imports: the shard format now lives in ``streamcli.shards``."""

from streamcli.shards.format import expected_shapes, load_manifest, shard_path
from streamcli.shards.reader import ShardReader, verify

__all__ = ["ShardReader", "expected_shapes", "load_manifest", "shard_path", "verify"]
