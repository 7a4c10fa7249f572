"""A source error inside a Ray task reaches the driver as the same ``SourceError``, with the task's traceback."""

from __future__ import annotations

import pytest

from streamcli import SourceError
from streamcli.errors import RemoteTraceback
from streamcli.shards.on_ray import task_error


def test_a_source_error_in_a_ray_task_is_raised_as_itself_with_the_tasks_traceback() -> None:
    exceptions = pytest.importorskip("ray.exceptions")
    tb = 'Traceback (most recent call last):\n  File "text.py"\nFileNotFoundError: b1.txt\n'
    got = exceptions.RayTaskError("export_range", tb, SourceError("plugin 'text' failed measuring item 'b1.txt'"))
    # What ``ray.get`` raises: an instance of both, whose message is Ray's whole traceback.
    raised = got.as_instanceof_cause()
    assert isinstance(raised, SourceError) and str(raised) != str(raised.cause)  # Ray's traceback, many lines
    err = task_error(raised)
    assert type(err) is SourceError and str(err) == "plugin 'text' failed measuring item 'b1.txt'"
    assert isinstance(err.__cause__, RemoteTraceback) and "FileNotFoundError: b1.txt" in err.__cause__.tb


def test_other_task_errors_stay_rays() -> None:
    exceptions = pytest.importorskip("ray.exceptions")
    raised = exceptions.RayTaskError("export_range", "tb", KeyError("x")).as_instanceof_cause()
    assert task_error(raised) is raised
