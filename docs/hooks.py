"""MkDocs hook: the ``streamcli`` Typer app as a click command, for mkdocs-click's CLI reference (docs/cli.md).

MkDocs loads a hook file under its path as the module name, which no import statement can spell, so the module
also registers itself as ``streamcli_docs_hooks`` for mkdocs-click's ``:module:`` to find.
"""

import sys

import typer

from streamcli.cli import app

command = typer.main.get_command(app)
sys.modules["streamcli_docs_hooks"] = sys.modules[__name__]
