"""``--dist loadgroup`` under pytest 9.2: the ``xdist_group`` marks take effect again.

pytest-xdist (3.8) puts a test in its group by appending ``@name`` to the test's node id on the worker, through
``item._nodeid``; pytest 9.2 builds the node id from ``item._id`` (a ``NodeId``) and no longer reads ``_nodeid``. So
every group was ignored: the Ray tests ran on both workers at once (two Ray instances sharing two cores), and each
worker made the module fixtures of the docs' and Lightning's tests again. This sets the id the way xdist meant.
"""

from __future__ import annotations

import pytest


def name_xdist_groups(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Append ``@group`` to the node id of each test in an ``xdist_group`` where xdist's own suffix did not take."""
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        names = sorted(
            {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")}
        )
        if not names or item.nodeid.rfind("@") > item.nodeid.rfind("]"):  # no group, or xdist's suffix took
            continue
        nodeid = f"{item.nodeid}@{'_'.join(names)}"
        if hasattr(item, "_id"):  # pytest >= 9.2
            from _pytest.nodeid import NodeId

            item._id = NodeId.parse(nodeid)
        else:
            item._nodeid = nodeid
