"""The version, in one place: the package metadata reads it from here (pyproject.toml, dynamic)."""

__version__ = "0.3.0"
