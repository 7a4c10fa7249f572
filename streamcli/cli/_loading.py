"""From the loader options to a loader: ``check_config`` validates them alone (no source, no torch) and
``open_loader`` builds the ``StreamLoader``; a bad value is a usage error naming the flag."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from streamcli.cli._common import UsageFailure
from streamcli.cli._options import LoaderOptions, flag_names
from streamcli.cli._spec import SourceSpec

if TYPE_CHECKING:
    from streamcli.loader import StreamLoader


def check_config(opts: LoaderOptions, **overrides: Any) -> None:
    """Validate the loader settings alone (no source, no torch): a bad value is a usage error naming the flag."""
    from streamcli.config import LoaderConfig

    kwargs = {**opts.kwargs(), **overrides}
    if kwargs.get("transform") is not None:
        from streamcli.transforms import parse_transform

        try:
            parse_transform(kwargs["transform"])
        except ValueError as exc:
            raise UsageFailure(f"--transform: {exc}") from None
    known = {k: v for k, v in kwargs.items() if k in LoaderConfig.__dataclass_fields__}
    try:
        LoaderConfig(opts.batch_size, opts.time_steps, **known)
    except (ValueError, TypeError) as exc:
        raise UsageFailure(flag_names(str(exc))) from None


def open_loader(spec: SourceSpec, opts: LoaderOptions, **overrides: Any) -> StreamLoader:
    """Build the loader; its ``ValueError`` (a bad option value) and ``SharedMemoryError`` (batches too large for
    the machine, refused before anything is allocated) become usage errors naming the flags."""
    from streamcli.errors import SharedMemoryError
    from streamcli.loader import StreamLoader  # imports torch: only when a command runs

    kwargs = opts.kwargs()
    kwargs.update(overrides)
    if spec.source is None:
        raise UsageFailure(f"the {spec.plugin} source was not constructed")
    try:
        return StreamLoader(spec.source, opts.batch_size, opts.time_steps, **kwargs)
    except SharedMemoryError as exc:  # prefetch= is the library's alone: the CLI's fix is -t or -b
        raise UsageFailure(flag_names(str(exc).replace("prefetch=, ", ""))) from None
    except (ValueError, TypeError) as exc:
        raise UsageFailure(flag_names(str(exc))) from None
