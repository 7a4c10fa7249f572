"""``events``: event-camera recordings cut into windows, one window per step (``EventsSource``).

One module per concept: ``formats`` reads files as sliceable ``x, y, t, p`` columns (and says why faery reads
the vendor formats), ``decoded`` decodes vendor files once into the cache and writes them, ``readers`` picks the
reader for a file by its suffix, ``cache`` is the cache folder, ``windows`` cuts recordings into windows and
indexes them, ``sensor`` settles the grid the recordings share, ``represent`` turns windows into tensors,
``source`` is the plugin, and ``simulate`` makes events from video (``video`` or ``camera`` streams).
"""

from streamcli_sources.events.source import EventsSource as EventsSource

__all__ = ["EventsSource"]
