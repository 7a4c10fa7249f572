"""The shard format: an export folder of ``.npz`` shards and an ``index.json`` manifest, or the same at a URL.

- ``format``: names, member names and dtypes, the header and manifest, the partial record.
- ``records``: the folder's JSON files: ``index.json`` loaded, the partial record written and read, ``tidy``.
- ``npz``: shard files read: memory-mapped or decompress-once, every member checked before use.
- ``npz_write``: shard files written atomically with aligned members, and checked from their headers alone.
- ``runs``: format 2's flags, stored per run of a stream's steps, and its integers stored narrow (``as_steps`` reads
  them back as per-step flags and the fields' own dtypes, as format 1 stored them).
- ``constant``: format 3's folded fields, a field with one value on every real step of a shard stored once.
- ``codec``: how members are compressed (none, deflate, zstd) and the zstd frames' safe reading.
- ``writer``: ``ShardWriter``, batches rolled into the shards of a folder (resumable, byte-identical).
- ``exporting``: ``open_writer`` (a folder or a URL), ``export``, ``export_loader`` and ``iter_limit``.
- ``reader``: ``load_manifest``, ``open_shard``, ``ShardReader`` (bit-identical replay) and ``verify``.
- ``lock``: ``FolderLock``, the OS lock an export holds on its folder (one export per folder at a time).
- ``remote_reader``, ``remote_writer``, ``remote_lock``: the same at a URL (``s3://bucket/run``), over
  ``streamcli.storage``; the reader and ``open_writer`` pick them for a URL.
- ``on_ray``: an export cut into runs of shards, one Ray task each.
- ``ray_local``: a local Ray instance whose processes end with this one (``on_ray`` starts it).

Limits, by design: a resumed export at a URL trusts the sizes and checksums its partial record gives for the
shards already uploaded (it downloads none of them; ``verify`` checks them all), and the remote lock's takeover
of a stale lock is not atomic (``remote_lock``).
"""

from streamcli.shards.exporting import export, iter_limit, open_writer
from streamcli.shards.format import (
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    PARTIAL,
    SHARD_RE,
    ShardInfo,
    batch_nbytes,
    expected_shapes,
    make_header,
    member_names,
    shard_name,
    shard_path,
)
from streamcli.shards.reader import ShardReader, load_manifest, open_shard, verify
from streamcli.shards.records import tidy
from streamcli.shards.writer import ShardWriter

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
    "open_writer",
    "shard_name",
    "shard_path",
    "tidy",
    "verify",
]
assert sorted(__all__) == __all__
