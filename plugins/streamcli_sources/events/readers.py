"""A reader for any event file the ``events`` source takes, chosen by its suffix.

Above both kinds of reader: ``formats`` reads ``.npy`` and HDF5 directly, ``decoded`` decodes the vendor formats
once into the cache and reads them as the same columns.
"""

from __future__ import annotations

from streamcli.errors import EventFileError
from streamcli_sources.events.decoded import open_decoded
from streamcli_sources.events.formats import SUFFIXES, Hdf5Reader, Reader, kind, open_npy


def open_reader(path: str, cache_option: str = "") -> Reader:
    """A reader for ``path``, chosen by its suffix (vendor formats decode into the cache on first use)."""
    k = kind(path)
    if k == "npy":
        return open_npy(path)
    if k == "hdf5":
        return Hdf5Reader(path)
    if k == "decoded":
        return open_decoded(path, cache_option)
    raise EventFileError(f"{path}: not an event file the events source reads (suffixes: {', '.join(SUFFIXES)})")
