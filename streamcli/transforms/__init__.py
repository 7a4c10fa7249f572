"""Augmentation that stays the same along a stream: the transform contract and the built-in frame transforms.

A transform runs in the producers (the workers, or the main process when ``num_workers=0``) on each block of
steps as it is read, before it is written into the batch::

    def transform(block: dict[str, np.ndarray], ctx: Context) -> dict[str, np.ndarray]: ...

``block`` maps every field to an array of shape ``(n, *field.shape)``. ``ctx.seed`` is fixed for one stream
(item) in one epoch: draws made from ``np.random.default_rng(ctx.seed)`` are the same at every call for that
stream, whatever the chunking into blocks and batches, the worker count, a resume or a rank. A transform that
changes a field's shape or dtype says so with an optional ``fields(fields) -> fields`` member; the ring, the
batch and the export then use its output fields. The block's arrays are read-only (they may be views of the
source's data): return new arrays, or views of them. Transforms are pickled to spawned workers: make them
module-level classes holding plain options. A replayed stream (``epoch_end="restream"``) gets its epoch's draw
again.

The built-ins (``RandomCrop``, ``HorizontalFlip``, ``ColorJitter``, ``Resize``, chained by ``Compose``) work on
the image fields (``Field.display == "image"``, or the one named by ``field=``), HW, HWC or CHW, on the whole
block at once; every image field of a step gets the same draw. Other fields pass unchanged: ground truth that
depends on the image's geometry (the camera source's ``homography``) no longer matches a cropped or flipped
frame. ``parse_transform("crop=112,flip,brightness=0.2")`` builds a ``Compose`` from the CLI's spelling.

- ``contract``: ``Context``, the ``Transform`` protocol, ``stream_seed`` and ``output_fields``;
- ``image``: the built-in image transforms;
- ``compose``: ``Compose``;
- ``spec``: the CLI's spelling, ``parse_transform`` and ``resolve``.
"""

from streamcli.transforms.compose import Compose
from streamcli.transforms.contract import Context, Transform, output_fields, stream_seed
from streamcli.transforms.image import ColorJitter, HorizontalFlip, RandomCrop, Resize
from streamcli.transforms.spec import parse_transform, resolve

__all__ = [
    "ColorJitter",
    "Compose",
    "Context",
    "HorizontalFlip",
    "RandomCrop",
    "Resize",
    "Transform",
    "output_fields",
    "parse_transform",
    "resolve",
    "stream_seed",
]
assert sorted(__all__) == __all__
