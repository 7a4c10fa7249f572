"""``-s key=value``: a source's options, converted with its factory's signature annotations."""

from __future__ import annotations

import inspect
import os
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from streamcli.cli._common import UsageFailure
from streamcli.cli._spec import check_option_syntax


def parse_options(factory: Any, raw: Sequence[str], plugin: str) -> dict[str, Any]:
    params, hints, open_kwargs = option_signature(factory)
    check_option_syntax(raw)
    out: dict[str, Any] = {}
    for item in raw:
        key, _, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if key not in params and not open_kwargs:
            valid = ", ".join(params) or "none"
            raise UsageFailure(f"the {plugin} source has no option {key!r}; valid options: {valid}")
        param = params.get(key)
        ann = hints.get(key, inspect.Parameter.empty)
        default = param.default if param is not None else inspect.Parameter.empty
        try:
            out[key] = convert(value, ann, default)
        except ValueError as exc:
            raise UsageFailure(f"-s {key}={value}: {exc}") from None
    return out


def option_signature(factory: Any) -> tuple[dict[str, inspect.Parameter], dict[str, Any], bool]:
    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):
        return {}, {}, True
    target = factory.__init__ if inspect.isclass(factory) else factory
    try:
        hints = typing.get_type_hints(target)
    except Exception:  # unresolvable annotations: fall back to the defaults' types
        hints = {}
    params = list(sig.parameters.values())
    open_kwargs = any(p.kind is p.VAR_KEYWORD for p in params)
    named = [p for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]
    first = named[0] if named else None
    if (
        first is not None
        and first.kind is first.POSITIONAL_OR_KEYWORD
        and first.default in (inspect.Parameter.empty, None)
    ):
        named = named[
            1:
        ]  # the source's argument (PATH, given after its name), not an option: as plugins NAME lists them
    return {p.name: p for p in named}, hints, open_kwargs


def convert_argument(factory: Any, arg: str) -> Any:
    """The positional argument as its annotated number type (``streamcli preview camera 4``), else as given."""
    try:
        params = list(inspect.signature(factory).parameters.values())
        target = factory.__init__ if inspect.isclass(factory) else factory
        ann = typing.get_type_hints(target).get(params[0].name) if params else None
    except Exception:
        return arg
    if ann in (int, float):
        try:
            return convert(arg, ann)
        except ValueError:
            return arg
    return arg


_TRUE = {"1", "true", "yes", "on", "y"}
_FALSE = {"0", "false", "no", "off", "n"}


def convert(value: str, ann: Any, default: Any = inspect.Parameter.empty) -> Any:
    """Convert ``value`` to the annotated type: int, float, bool, str, tuples like ``64x64`` or ``64,64``."""
    if ann is inspect.Parameter.empty or ann is Any:
        if default is inspect.Parameter.empty or default is None:
            return value
        ann = type(default)
    origin = typing.get_origin(ann)
    if origin in (typing.Union, types.UnionType):
        choices = [a for a in typing.get_args(ann) if a is not type(None)]
        if value.lower() == "none" and len(choices) < len(typing.get_args(ann)):
            return None
        errors = []
        for choice in sorted(choices, key=lambda a: a is str):  # try str last
            try:
                return convert(value, choice)
            except ValueError as exc:
                errors.append(str(exc))
        raise ValueError("; ".join(errors))
    if origin is typing.Literal:
        allowed = [str(a) for a in typing.get_args(ann)]
        if value not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return value
    if ann is bool:
        if value.lower() in _TRUE:
            return True
        if value.lower() in _FALSE:
            return False
        raise ValueError("must be true or false")
    if ann is int:
        try:
            return int(value)
        except ValueError:
            raise ValueError(f"{value!r} is not an integer") from None
    if ann is float:
        try:
            return float(value)
        except ValueError:
            raise ValueError(f"{value!r} is not a number") from None
    if ann in (str, Path) or (isinstance(ann, type) and issubclass(ann, os.PathLike)):
        return value
    if origin in (tuple, list) or ann in (tuple, list):
        args = typing.get_args(ann)
        sep = "x" if "x" in value and "," not in value else ","
        parts = [p.strip() for p in value.split(sep) if p.strip()]
        elem = args[0] if args else str
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(parts) != len(args):
                raise ValueError(f"needs {len(args)} values, like {'x'.join(['64'] * len(args))}")
            return tuple(convert(p, a) for p, a in zip(parts, args, strict=True))
        conv = [convert(p, elem) for p in parts]
        return tuple(conv) if origin is tuple or ann is tuple else conv
    return value
