"""``mix NAME=WEIGHT:SOURCE[:PATH] ...``: several sources mixed by weight (``streamcli.mix``) on the command line.

Each spec names a mixed source, its weight and the source as ``preview`` takes it: a plugin name and its argument
(``books=0.7:text:books/``), a plugin alone (``cam=1:camera``), or a path whose plugin is inferred
(``books=0.7:books/``). ``-s key=value`` goes to every mixed source, ``-s NAME.key=value`` to one of them, and
``-s until=first|restream`` to the mix itself. Every problem is a ``UsageFailure`` (exit 2) naming the spec.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from streamcli.cli._common import UsageFailure
from streamcli.cli._spec import SourceSpec, check_option_syntax, did_you_mean
from streamcli.plugins import list_plugins
from streamcli.source import StreamSource

MIX = "mix"
EXAMPLE = "books=0.7:text:books/"


@dataclass(frozen=True)
class MixPart:
    """One ``NAME=WEIGHT:SOURCE[:PATH]``: the name, the weight and the source's ``[SOURCE] [PATH]`` arguments."""

    name: str
    weight: float
    args: tuple[str, ...]


def is_mix(args: Sequence[str] | None) -> bool:
    """Whether ``[SOURCE] [PATH]`` asks for a mix (``mix`` first, unless a plugin of that name is installed)."""
    return bool(args) and args[0] == MIX and MIX not in {p.name for p in list_plugins()}  # type: ignore[index]


def parse_part(text: str, plugins: Sequence[str]) -> MixPart:
    """Parse ``NAME=WEIGHT:SOURCE[:PATH]`` or raise ``UsageFailure`` naming what is wrong and the form."""
    form = f"must be NAME=WEIGHT:SOURCE[:PATH], e.g. {EXAMPLE}"
    name, sep, rest = text.partition("=")
    if not sep or not name.isidentifier():
        raise UsageFailure(f"mix spec {text!r} {form}")
    weight_text, sep, src = rest.partition(":")
    try:
        weight = float(weight_text)
    except ValueError:
        weight = math.nan
    if not math.isfinite(weight) or weight <= 0:
        raise UsageFailure(f"mix spec {text!r}: the weight {weight_text!r} must be a positive number, e.g. {EXAMPLE}")
    if not sep or not src:
        raise UsageFailure(f"mix spec {text!r} names no source; it {form}")
    plugin, sep, path = src.partition(":")
    if plugin in plugins:
        return MixPart(name, weight, (plugin, path) if path else (plugin,))
    if sep and not Path(src).exists() and "/" not in plugin and not path.startswith("//"):  # an unknown PLUGIN
        msg = f"mix spec {text!r}: no plugin named {plugin!r}; installed plugins: {', '.join(plugins) or 'none'}"
        raise UsageFailure(did_you_mean(msg, plugin, plugins))
    return MixPart(name, weight, (src,))  # a path (or URL): the plugin is inferred


def parse_parts(args: Sequence[str]) -> list[MixPart]:
    """Every spec after ``mix``; at least one, with distinct names."""
    if not args:
        raise UsageFailure(f"mix needs one or more NAME=WEIGHT:SOURCE[:PATH], e.g. mix {EXAMPLE} code=0.3:text:src/")
    plugins = [p.name for p in list_plugins()]
    parts = [parse_part(a, plugins) for a in args]
    seen: set[str] = set()
    for p in parts:
        if p.name in seen:
            raise UsageFailure(f"mix names {p.name!r} twice; give every mixed source its own name")
        seen.add(p.name)
    return parts


def split_options(raw: Sequence[str], names: Sequence[str]) -> tuple[str, list[str], dict[str, list[str]]]:
    """``-s`` values as (until, options for every source, options per source name)."""
    until = "first"
    common: list[str] = []
    per: dict[str, list[str]] = {n: [] for n in names}
    for item in raw:
        key, _, value = item.partition("=")
        key = key.strip()
        prefix, dot, sub = key.partition(".")
        if key == "until":
            if value not in ("first", "restream"):
                raise UsageFailure(f"-s until={value} must be first or restream")
            until = value
        elif dot and prefix in per:
            per[prefix].append(f"{sub}={value}")
        elif dot:
            raise UsageFailure(f"-s {item!r}: no mixed source named {prefix!r}; the mix has {', '.join(names)}")
        else:
            common.append(item)
    return until, common, per


def check_mix_input(args: Sequence[str], check_input: Callable[[Sequence[str]], None]) -> None:
    """The cheap checks of a mix, before anything slow: the specs parse, and their paths exist and can be read
    (``check_input``, the checks of one source)."""
    for part in parse_parts(args):
        try:
            check_input(part.args)
        except UsageFailure as exc:
            raise UsageFailure(f"mix {part.name}: {exc}") from None


def resolve_mix(
    args: Sequence[str],
    raw_options: Sequence[str] | None,
    resolve_source: Callable[[Sequence[str], Sequence[str]], SourceSpec],
) -> SourceSpec:
    """The ``SourceSpec`` of a mix: every part resolved as ``preview`` resolves one source (``resolve_source``),
    then mixed."""
    from streamcli.mix import mix

    parts = parse_parts(args)
    check_option_syntax(raw_options)
    until, common, per = split_options(raw_options or [], [p.name for p in parts])
    sources: dict[str, StreamSource] = {}
    for part in parts:
        try:
            built = resolve_source(part.args, common + per[part.name]).source
        except UsageFailure as exc:
            raise UsageFailure(f"mix {part.name}: {exc}") from None
        assert built is not None
        sources[part.name] = built
    try:
        mixed = mix(sources, {p.name: p.weight for p in parts}, until=until)
        mixed.items()  # an empty source or a mix of empty streams is refused here (MixError), as bad input
    except ValueError as exc:
        raise UsageFailure(str(exc).replace("until='restream'", "-s until=restream")) from None
    return SourceSpec(MIX, " ".join(args), {"until": until, "options": list(raw_options or [])}, mixed)
