"""Field names from the names data carries (HDF5 datasets, npz arrays, table columns): dotted identifiers.

A field name is Python identifiers joined by dots (``streamcli.fields.valid_name``, as LeRobot names its features:
``observation.state`` stays itself), so within each dotted part every other character becomes ``_``
(``acc-x`` -> ``acc_x``), a part starting with a digit gets a leading ``_``, and the prefix ``flag.`` (an export's
flags) becomes ``flag_``. Two names that map to the same field are refused, never merged.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from streamcli.fields import RESERVED_PREFIX

_OTHER = re.compile(r"\W", re.ASCII)


def identifier(name: str) -> str:
    """``name`` as a field name: in each dotted part, each character that cannot be in an identifier replaced by
    ``_``."""
    parts = [_OTHER.sub("_", part) or "_" for part in name.split(".")]
    out = ".".join(f"_{p}" if p[0].isdigit() else p for p in parts)
    return f"flag_{out[5:]}" if out.startswith(RESERVED_PREFIX) else out


def identifiers(names: Sequence[str], where: str) -> list[str]:
    """Each of ``names`` as a field name; ``ValueError`` naming ``where`` if two of them map to one."""
    out = [identifier(n) for n in names]
    seen: dict[str, str] = {}
    for name, field in zip(names, out, strict=True):
        if field in seen:
            raise ValueError(
                f"{where}: {seen[field]!r} and {name!r} would both be the field {field!r} (field names are dotted "
                "identifiers, other characters become '_'); pick one of them with fields="
            )
        seen[field] = name
    return out


def pick(wanted: Sequence[str], names: Sequence[str], where: str, kind: str = "array") -> list[str]:
    """The ``names`` that ``wanted`` asks for, by their own name or their field name, in ``wanted``'s order;
    ``ValueError`` naming ``where`` and listing the names there for one that is not."""
    by_field = {identifier(n): n for n in names}
    out = []
    for w in wanted:
        got = w if w in names else by_field.get(w)
        if got is None:
            raise ValueError(f"{where} has no {kind} {w!r}; it has: {', '.join(names) or 'none'}")
        out.append(got)
    return out
