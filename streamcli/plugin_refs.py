"""Plugins named by reference instead of by an installed entry point: ``module:attr`` or ``path/to/file.py:attr``.

As with uvicorn's ``module:app``, a module is imported with the current folder on ``sys.path``; a file is imported
as a module named after it, with its folder on ``sys.path`` (under a private name if that name is taken by another
module). Workers unpickle the source by reference to its class, and a worker forked from a fork server started
before this import has neither folder on its ``sys.path``: so every class of such a module is registered with
``copyreg`` to pickle as a ``ClassRef``, which imports the module again wherever it is unpickled.
"""

from __future__ import annotations

import copyreg
import difflib
import hashlib
import importlib
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from streamcli.errors import PluginLoadError, PluginNotFoundError


def is_reference(name: str) -> bool:
    """``module:attr`` or ``file.py:attr`` (``attr`` may be dotted); never a URL or a plain plugin name."""
    target, sep, attr = name.rpartition(":")
    if not sep or not target or "://" in name or not all(part.isidentifier() for part in attr.split(".")):
        return False
    is_file = target.endswith(".py") or "/" in target or os.sep in target
    return is_file or all(part.isidentifier() for part in target.split("."))


@dataclass(frozen=True)
class ClassRef:
    """Where a class of a referenced module comes from, so that any process can import it again."""

    module: str
    root: str  # the folder put on sys.path to import ``module``
    file: str | None  # set when ``module`` is a private name for a file: loaded from the file itself
    qualname: str

    def load(self) -> Any:
        mod = sys.modules.get(self.module)
        if mod is None:
            mod = _load_file(self.file, self.module) if self.file else _import(self.module, self.root)
        obj: Any = mod
        for part in self.qualname.split("."):
            obj = getattr(obj, part)
        return obj


def _rebuild(ref: ClassRef, args: tuple[Any, ...]) -> Any:
    cls = ref.load()
    return cls.__new__(cls, *args)


def _call(ref: ClassRef, args: tuple[Any, ...]) -> Any:
    return ref.load()(*args)


_NEWOBJ = getattr(copyreg, "__newobj__")  # noqa: B009  (what object.__reduce_ex__ returns; not in the stubs)


def _reducer(ref: ClassRef) -> Any:
    def reduce(obj: Any) -> Any:
        rv = obj.__reduce_ex__(4)
        if not isinstance(rv, tuple):
            return rv
        fn, args, *rest = rv
        if fn is _NEWOBJ and args and args[0] is type(obj):
            return (_rebuild, (ref, tuple(args[1:])), *rest)
        if fn is type(obj):
            return (_call, (ref, tuple(args)), *rest)
        return rv

    return reduce


def _register(mod: ModuleType, root: str, file: str | None) -> None:
    for value in list(vars(mod).values()):
        if isinstance(value, type) and value.__module__ == mod.__name__:
            copyreg.pickle(value, _reducer(ClassRef(mod.__name__, root, file, value.__qualname__)))


def _on_path(root: str) -> None:
    if root not in sys.path:
        sys.path.insert(0, root)


def _import(module: str, root: str) -> ModuleType:
    _on_path(root)
    return importlib.import_module(module)


def _load_file(file: str, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise PluginLoadError(f"{file!r} cannot be imported as Python; name a .py file, e.g. path/to/file.py:Class")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return mod


def _module_of_file(path: Path, given: str) -> ModuleType:
    if not path.is_file():
        raise PluginNotFoundError(
            f"{given!r} does not exist (from {os.getcwd()}); give the path of the .py file that defines the source"
        )
    root, stem = str(path.parent), path.stem
    if stem.isidentifier():
        mod = sys.modules.get(stem)
        if mod is None and importlib.util.find_spec(stem) is None:
            mod = _import(stem, root)
        if mod is not None and Path(getattr(mod, "__file__", "") or "").resolve() == path:
            _register(mod, root, None)
            return mod
    # Its name is taken by another module (or is no identifier): a private name, loaded from the file itself.
    private = f"streamcli_user_{hashlib.sha1(str(path).encode()).hexdigest()[:10]}_{stem}"
    mod = sys.modules.get(private) or _load_file(str(path), private)
    _register(mod, root, str(path))
    return mod


def _module_named(module: str) -> ModuleType:
    root = os.getcwd()
    try:
        mod = _import(module, root)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (module == exc.name or module.startswith(exc.name + ".")):
            raise  # the module exists, one of its own imports is missing
        raise PluginNotFoundError(
            f"no module named {module!r} in the current folder ({root}) or on sys.path; run from the folder that "
            f"holds {module.split('.')[0]}.py, or give the file's path: path/to/file.py:Class"
        ) from None
    _register(mod, root, None)
    return mod


def load_reference(name: str) -> Any:
    """The attribute ``name`` (``module:attr`` or ``file.py:attr``) refers to; its module imported as above.

    Raises ``PluginNotFoundError`` for a missing module, file or attribute (naming the fix), and
    ``PluginLoadError`` when the module itself fails to import.
    """
    target, _, attr = name.rpartition(":")
    try:
        if target.endswith(".py") or os.sep in target or "/" in target:
            path = Path(target).expanduser().resolve()
            mod = _module_of_file(path if path.suffix == ".py" else path.with_suffix(".py"), target)
        else:
            mod = _module_named(target)
    except PluginNotFoundError:
        raise
    except Exception as exc:
        raise PluginLoadError(f"plugin {name!r} failed to import: {type(exc).__name__}: {exc}") from exc
    obj: Any = mod
    for part in attr.split("."):
        if not hasattr(obj, part):
            classes = {n: v for n, v in vars(obj).items() if isinstance(v, type) and not n.startswith("_")}
            own = [n for n, v in classes.items() if v.__module__ == getattr(obj, "__name__", None)]
            names = own or list(classes)  # the module's own classes, not those it imported
            close = difflib.get_close_matches(part, names, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise PluginNotFoundError(
                f"{target} has no attribute {part!r}{hint}; its classes: {', '.join(sorted(names)) or 'none'}"
            )
        obj = getattr(obj, part)
    return obj
