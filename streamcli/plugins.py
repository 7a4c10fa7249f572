"""Plugin discovery through the ``streamcli.plugins`` entry-point group.

Listing reads installed metadata only and imports no plugin code, so one broken plugin can never stop the
others from being listed or used. Built-in sources are registered by streamcli's own distribution through
the same group, exactly like a third party's.
"""

from __future__ import annotations

import difflib
import inspect
import os
import re
import typing
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from streamcli.errors import PluginArgumentError, PluginLoadError, PluginNotFoundError
from streamcli.plugin_refs import is_reference, load_reference
from streamcli.source import PLUGIN_ATTR, StreamSource, check_source

GROUP = "streamcli.plugins"
ALLOW_ENV = "STREAMCLI_LOAD_PLUGINS"  # comma list of plugin names to consider; unset = all


@dataclass(frozen=True)
class PluginInfo:
    """What the metadata says about one plugin, without importing it."""

    name: str
    value: str  # "module:attr"
    distribution: str | None
    version: str | None


def _entry_points() -> list[EntryPoint]:
    eps = list(entry_points(group=GROUP))
    allow = os.environ.get(ALLOW_ENV)
    if allow is not None:
        names = {n.strip() for n in allow.split(",") if n.strip()}
        eps = [ep for ep in eps if ep.name in names]
    # A name registered twice (e.g. an editable and a regular install) resolves to the first, stably.
    seen: dict[str, EntryPoint] = {}
    for ep in sorted(eps, key=lambda e: (e.name, e.value)):
        seen.setdefault(ep.name, ep)
    return list(seen.values())


def list_plugins() -> list[PluginInfo]:
    """Every installed plugin, sorted by name. Imports nothing."""
    out = []
    for ep in _entry_points():
        dist = ep.dist
        out.append(
            PluginInfo(
                name=ep.name,
                value=ep.value,
                distribution=dist.metadata["Name"] if dist is not None else None,
                version=dist.version if dist is not None else None,
            )
        )
    return out


def load_factory(name: str) -> Any:
    """Import the callable registered under ``name``; errors name the plugin and the cause.

    A name that no plugin is registered under may be a reference to an uninstalled one, ``module:Class``
    (imported with the current folder on ``sys.path``) or ``path/to/file.py:Class`` (``streamcli.plugin_refs``).
    """
    eps = _entry_points()
    if is_reference(name) and not any(ep.name == name for ep in eps):
        return load_reference(name)
    for ep in eps:
        if ep.name == name:
            try:
                return ep.load()
            except Exception as exc:
                raise PluginLoadError(
                    f"plugin {name!r} ({ep.value}) failed to import: {type(exc).__name__}: {exc}"
                ) from exc
    names = [p.name for p in list_plugins()]
    close = difflib.get_close_matches(name, names, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    known = ", ".join(names) or "none installed"
    raise PluginNotFoundError(f"no plugin named {name!r}{hint}; installed plugins: {known}")


def load_source(name: str, *args: Any, **options: Any) -> StreamSource:
    """Load plugin ``name`` and construct its source with the user's argument(s) and options.

    ``load_source("text", ["a b c", "d e"], width=4)`` calls ``TextSource(["a b c", "d e"], width=4)``.
    Arguments the constructor cannot take (a required one missing, an unknown name) raise
    ``PluginArgumentError`` (a ``TypeError``) naming them; bad values raise ``ValueError``/``TypeError`` from the
    plugin unchanged, so callers can report them.
    """
    factory = load_factory(name)
    check_arguments(name, factory, args, options)
    source = check_source(factory(*args, **options))
    try:  # so errors name the plugin ("text"), not the class ("TextSource")
        setattr(source, PLUGIN_ATTR, name)
    except (AttributeError, TypeError):  # __slots__ or frozen: the class name will do
        pass
    return source


def check_arguments(name: str, factory: Any, args: tuple[Any, ...], options: dict[str, Any]) -> None:
    """Raise ``PluginArgumentError`` naming what ``factory(*args, **options)`` lacks or cannot take, before it runs.

    Checked against the signature, so the message names the argument and how to pass it, not the plugin's
    ``__init__``; a factory without a readable signature is left to fail on its own.
    """
    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):
        return
    params = sig.parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        unknown: list[str] = []
    else:
        unknown = [k for k in options if k not in params or params[k].kind is inspect.Parameter.POSITIONAL_ONLY]
    if unknown:
        valid = [k for k, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        raise PluginArgumentError(
            f"the {name} source has no argument {', '.join(map(repr, unknown))}; its arguments: "
            f"{', '.join(valid) or 'none'}",
            unknown=tuple(unknown),
        )
    try:
        sig.bind(*args, **options)
        return
    except TypeError as exc:
        problem = str(exc)
    try:
        bound = sig.bind_partial(*args, **options).arguments
    except TypeError:  # too many positional arguments, or one given twice
        raise PluginArgumentError(f"the {name} source cannot take these arguments: {problem}") from None
    required = [p for p in params.values() if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    missing = [p for p in required if p.name not in bound]
    if not missing:
        raise PluginArgumentError(f"the {name} source cannot take these arguments: {problem}")
    first = next(iter(params.values()))
    argument = first.name if missing[0] is first and first.kind is not first.KEYWORD_ONLY else None
    how = [
        f"{p.name!r} (pass {p.name}=...)" if p.name != argument else f"{p.name!r} (its first argument)" for p in missing
    ]
    raise PluginArgumentError(
        f"the {name} source needs {', '.join(how)}", missing=tuple(p.name for p in missing), argument=argument
    )


_SECTION = re.compile(r"^(Args|Arguments|Parameters|Options|Keyword Args|Keyword Arguments):?\s*$")
_GOOGLE = re.compile(r"^(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")
_NUMPY = re.compile(r"^(\*{0,2}\w+)\s*(:.*)?$")


def option_docs(factory: Any) -> dict[str, str]:
    """Each option's one-line description, as ``streamcli plugins NAME`` shows it.

    Taken, per option, from ``Annotated[T, "description"]`` on the factory's (or its ``__init__``'s) parameter,
    else from an ``Args:`` section (Google style; ``Parameters`` with a dashed underline, numpydoc, too) of the
    factory's docstring or its ``__init__``'s. Options documented nowhere are left out.
    """
    docs: dict[str, str] = {}
    target = factory.__init__ if inspect.isclass(factory) else factory
    for doc in (inspect.getdoc(target) if inspect.isclass(factory) else None, _own_doc(factory)):
        if doc:
            docs |= _doc_sections(doc)
    try:
        hints = typing.get_type_hints(target, include_extras=True)
    except Exception:  # unresolvable annotations: the docstring's descriptions stand
        hints = {}
    for name, hint in hints.items():
        extra = getattr(hint, "__metadata__", ())
        text = next((m for m in extra if isinstance(m, str) and m.strip()), None)
        if text is not None:
            docs[name] = " ".join(text.split())
    return docs


def _own_doc(factory: Any) -> str | None:
    """The factory's own docstring, never a base class's."""
    own = factory.__dict__.get("__doc__") if inspect.isclass(factory) else getattr(factory, "__doc__", None)
    return inspect.cleandoc(own) if isinstance(own, str) else None


def _doc_sections(doc: str) -> dict[str, str]:
    out: dict[str, str] = {}
    lines = doc.splitlines()
    i = 0
    while i < len(lines):
        if not _SECTION.match(lines[i].strip()):
            i += 1
            continue
        numpy = i + 1 < len(lines) and set(lines[i + 1].strip()) == {"-"}
        i += 2 if numpy else 1
        base: int | None = None
        name: str | None = None
        while i < len(lines):
            line = lines[i]
            if not line.strip():
                i += 1
                if i < len(lines) and lines[i].strip() and base is not None and _indent(lines[i]) < base:
                    break
                continue
            ind = _indent(line)
            if base is None:
                base = ind
            if ind < base or (ind == base and _SECTION.match(line.strip())):
                break
            if ind == base:
                m = (_NUMPY if numpy else _GOOGLE).match(line.strip())
                if m is None:
                    break
                name = m.group(1).lstrip("*")
                out[name] = "" if numpy else m.group(3).strip()
            elif name is not None:
                out[name] = (out[name] + " " + line.strip()).strip()
            i += 1
    return out


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


_DEFAULT = re.compile(r"\bDefault:\s*([^;,()]+?)(?:\s*\(|[.;,]\s|[.;,]?$)")


def shown_default(default: Any, description: str) -> Any:
    """The default ``streamcli plugins NAME`` shows: the signature's, unless that is a "not given" marker (None,
    0, "") and the description names the one that applies ("Default: 50000."), which is shown instead."""
    if default in (None, 0, "") and default is not False:
        m = _DEFAULT.search(description)
        if m is not None and len(m.group(1)) <= 24:
            text = m.group(1).strip()
            for kind in (int, float):  # a number as a number, as the signature's would be
                try:
                    return kind(text.replace("_", ""))
                except ValueError:
                    pass
            return text
    return default
