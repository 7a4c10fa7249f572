"""The CLI's spelling of a transform, ``crop=112,flip,brightness=0.2,resize=64``, parsed to a ``Compose``."""

from __future__ import annotations

from typing import Any

from streamcli.transforms.compose import Compose
from streamcli.transforms.image import ColorJitter, HorizontalFlip, RandomCrop, Resize

SPELLINGS = {
    "crop": "crop=SIZE (random crop; SIZE is N or HxW)",
    "flip": "flip[=P] (horizontal flip with probability P, default 0.5)",
    "brightness": "brightness=F (scale by 1 +- F)",
    "contrast": "contrast=F (scale around the mean by 1 +- F)",
    "resize": "resize=SIZE (N or HxW)",
}


def _parse_size(token: str, value: str) -> tuple[int, int]:
    parts = value.lower().split("x")
    try:
        hw = [int(p) for p in parts]
    except ValueError:
        hw = []
    if len(hw) == 1:
        hw = hw * 2
    if len(hw) != 2 or min(hw) < 1:
        raise ValueError(f"transform {token!r}: the size must be N or HxW with positive ints, e.g. 112 or 112x160")
    return hw[0], hw[1]


def _parse_float(token: str, value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"transform {token!r}: {value!r} is not a number, e.g. 0.2") from None


def parse_transform(spec: str) -> Compose:
    """``"crop=112,flip,brightness=0.2,resize=64"`` -> a ``Compose`` of the built-ins, in that order.

    Raises ``ValueError`` naming the bad token and the valid spellings."""
    valid = "; ".join(SPELLINGS.values())
    tokens = [t.strip() for t in spec.split(",")]
    if not spec.strip() or any(not t for t in tokens):
        raise ValueError(f"transform {spec!r} has an empty entry; give a comma-separated list of: {valid}")
    out: list[Any] = []
    for token in tokens:
        name, eq, value = token.partition("=")
        name = name.strip().lower()
        if name not in SPELLINGS:
            raise ValueError(f"unknown transform {token!r}; valid: {valid}")
        if name != "flip" and not eq:
            raise ValueError(f"transform {token!r} needs a value: {SPELLINGS[name]}")
        try:
            if name == "crop":
                out.append(RandomCrop(_parse_size(token, value)))
            elif name == "resize":
                out.append(Resize(_parse_size(token, value)))
            elif name == "flip":
                out.append(HorizontalFlip(_parse_float(token, value) if eq else 0.5))
            elif name == "brightness":
                out.append(ColorJitter(brightness=_parse_float(token, value)))
            else:
                out.append(ColorJitter(contrast=_parse_float(token, value)))
        except ValueError as exc:
            msg = str(exc)
            raise ValueError(msg if f"transform {token!r}" in msg else f"transform {token!r}: {msg}") from None
    return Compose(out)


def resolve(transform: Any) -> Any:
    """``StreamLoader(transform=...)``: a callable as given, or a CLI spelling such as ``"crop=112,flip"``."""
    return parse_transform(transform) if isinstance(transform, str) else transform
