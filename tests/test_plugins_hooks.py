"""Optional plugin hooks, declared once in streamcli.source, and the plugin name recorded by load_source."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

from streamcli.plugins import load_source
from streamcli.source import (
    PLUGIN_ATTR,
    BaseSource,
    Field,
    Step,
    call_item_name,
    call_setup_worker,
    can_open,
    plugin_name,
)


class Bare:
    """A protocol source with none of the optional hooks."""

    def items(self) -> Sequence[Any]:
        return [1, 2]

    def fields(self) -> Sequence[Field]:
        return [Field("x", (), "int32")]

    def open(self, item: Any, start: int = 0) -> Iterator[Step]:
        yield {"x": item}

    def length(self, item: Any) -> int | None:
        return 1


class Hooked(BaseSource):
    calls: ClassVar[list[str]] = []

    def item_name(self, item: Any) -> str:
        return f"item-{item}"

    def setup_worker(self) -> None:
        self.calls.append("setup")

    @classmethod
    def can_open(cls, arg: str) -> bool:
        return arg.endswith(".hook")


def test_hook_defaults_for_a_source_without_them() -> None:
    assert call_item_name(Bare(), 7) == "7"  # type: ignore[arg-type]
    call_setup_worker(Bare())  # type: ignore[arg-type]  # no hook: nothing happens
    assert can_open(Bare, "x.hook") is False


def test_hooks_are_called_when_present() -> None:
    src = Hooked()
    assert call_item_name(src, 3) == "item-3"
    call_setup_worker(src)
    assert Hooked.calls == ["setup"]
    assert can_open(Hooked, "a.hook") and not can_open(Hooked, "a.txt")


def test_load_source_records_the_plugin_name() -> None:
    src = load_source("text", ["a b c"], strings=True)
    assert getattr(src, PLUGIN_ATTR) == "text" and plugin_name(src) == "text"
    assert plugin_name(Bare()) == "Bare"


def test_loader_errors_name_the_plugin_not_the_class() -> None:
    from streamcli.loader import StreamLoader

    with StreamLoader(load_source("text", ["a b c"], strings=True), 1, 2) as loader:
        assert loader.plugin == "text" and "StreamLoader(text" in repr(loader)
