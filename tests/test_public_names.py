"""``import streamcli`` is lazy (each public name loads its module on first use); every public name is what it
says, whichever order the names and the submodules are loaded in."""

from __future__ import annotations

import sys
import types

import streamcli


def test_a_submodule_named_as_a_public_name_does_not_replace_it() -> None:
    # What the import system does after it has run streamcli/mix.py (whoever imports it, the first time):
    # bind the submodule to its name in the package. `from streamcli import Mix, mix` gave the module.
    import streamcli.mix

    setattr(streamcli, "mix", sys.modules["streamcli.mix"])  # noqa: B010
    assert streamcli.mix is sys.modules["streamcli.mix"].mix
    from streamcli import Mix, mix

    assert isinstance(mix, types.FunctionType) and Mix is sys.modules["streamcli.mix"].Mix


def test_no_public_name_is_a_module() -> None:
    modules = [name for name in streamcli.__all__ if isinstance(getattr(streamcli, name), types.ModuleType)]
    assert modules == []
